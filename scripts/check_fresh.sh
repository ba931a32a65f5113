#!/usr/bin/env bash
# Proves the README's install steps on a pristine Debian root: debootstrap --variant=minbase,
# nothing else installed, this commit cloned into it, everything run inside a chroot (as root).
#
# Usage: scripts/check_fresh.sh [--release bookworm|trixie] [--full | --ctest | --cuda | --sanitize] [--keep]
#   --release  which Debian: bookworm (Debian 12, the default) or trixie (Debian 13)
#   (default)  scripts/setup.sh --demo (and checks it installed no Node.js/npm), scripts/setup.sh
#              --test, a CMake configure of every preset, and a build and run of dependency_check,
#              the smallest target that links Qt Charts, Qt Network and LibTorch. CI runs this on
#              bookworm.
#   --ctest    the default check, then the whole release tree built in the root and its whole CTest
#              suite run there (a developer's check of the CPU LibTorch at -O3; CI runs --sanitize).
#   --cuda     trixie only: scripts/setup.sh --cuda (Debian's CUDA LibTorch 2.6 and CUDA 12.4
#              toolkit; cuDNN's download declined, see below), then a configure against that
#              LibTorch and a build and link of everything with a CUDA role: grpo (the engine and
#              grpo worker), grpo-studio and test_device, at -O3 without sanitizers (CI's
#              --sanitize links the same targets). Nothing runs on a GPU here: there is none.
#   --sanitize trixie only, what CI runs there: one tree that does the work of three. The install
#              steps with Debian's CUDA LibTorch 2.6 and CUDA 12.4 (scripts/setup.sh --demo --cuda,
#              then --test --cuda; cuDNN declined, see below), then the asan preset (ASan + UBSan +
#              LSan) with the NUMERICS tests (GRPO_SANITIZE_NUMERICS=ON): every target compiled by
#              GCC 14 against LibTorch 2.6's headers, the CUDA-role ones (CUDA_TARGETS) checked to
#              link libtorch_cuda.so, and the whole CTest suite run on the CPU under the sanitizers,
#              with the cuDNN stub on the loader's path (no test reaches cuDNN: there is no GPU; each
#              stub function aborts if one did).
#   --full     the README's two commands as a newcomer runs them on one fresh root, each timed:
#              `scripts/demo.sh --demo --steps 10` (headless), then `scripts/test.sh`.
#   --keep     leave the root in place (its path is printed) instead of removing it.
# Needs root (chroot and mounts) and reaches the same Debian mirror as the host's apt sources. The
# root's apt sources are Debian's own for the release (its updates and security suites), as a new
# install writes them; --cuda and --sanitize add contrib and non-free, where Debian's CUDA packages live.
# Kept between runs under GRPO_FRESH_CACHE (default /var/cache/grpo-fresh): each release's minbase
# root as a tarball, the downloaded .debs, and each release's ccache (the trixie modes share one:
# the same compiler and the same LibTorch headers). The root itself is always made new.
# What is checked is the commit at HEAD: uncommitted changes are not in the clone.
#
# cuDNN: libtorch_cuda.so needs libcudnn.so.9, which Debian's nvidia-cudnn package downloads from
# NVIDIA when its licence is accepted; nothing here may download it. --cuda and --sanitize decline
# the licence and link against a stub libcudnn.so.9 made from the very symbols libtorch_cuda.so asks
# of it (scripts/cudnn_link_stub.sh, each a function that aborts), given to the linker by
# -rpath-link; every other library is resolved for real. It is never installed or shipped; only
# --sanitize's test run has it on the loader's path, in this throwaway root, where no test reaches
# cuDNN (no GPU). A GPU box needs NVIDIA's cuDNN (docs/gpu.md).
set -euo pipefail
SRC="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${GRPO_FRESH_CACHE:-/var/cache/grpo-fresh}"

SUITE=bookworm mode=default keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --release) SUITE="${2:-}"; shift ;;
    --release=*) SUITE="${1#--release=}" ;;
    --full) mode=full ;;
    --ctest) mode=ctest ;;
    --cuda) mode=cuda ;;
    --sanitize) mode=sanitize ;;
    --keep) keep=1 ;;
    *) echo "usage: scripts/check_fresh.sh [--release bookworm|trixie] [--full | --ctest | --cuda | --sanitize] [--keep]" >&2; exit 2 ;;
  esac
  shift
done
case "$SUITE" in
  bookworm) DEBIAN=12 ;;
  trixie) DEBIAN=13 ;;
  *) echo "check_fresh: --release must be bookworm (Debian 12) or trixie (Debian 13), not '$SUITE'" >&2; exit 2 ;;
esac
if { [ "$mode" = cuda ] || [ "$mode" = sanitize ]; } && [ "$SUITE" != trixie ]; then
  echo "check_fresh: --$mode needs --release trixie (Debian 12 has no CUDA LibTorch)" >&2; exit 2
fi
if [ "$(id -u)" -ne 0 ]; then exec sudo -E "$0" "$@"; fi

log() { echo "check_fresh[$SUITE]: $*"; }
timings=()
report() { for t in "${timings[@]}"; do echo "  $t"; done; }
fail() {
  echo "check_fresh[$SUITE]: FAIL: $*" >&2
  [ ${#timings[@]} -eq 0 ] || { echo "check_fresh[$SUITE]: the steps before it:"; report; }
  exit 1
}
cached_build() {  # cached_build LABEL CMD...: timed, then the root's ccache hits and misses in it
  local label="$1" before; shift
  before="$(in_root scripts/ccache_stats.sh)"
  timed "$label" "$@"
  log "$label: ccache $(in_root "scripts/ccache_stats.sh --since '$before'")"
}
timed() {  # timed LABEL CMD...: runs CMD, records its wall time under LABEL
  local label="$1" t0=$SECONDS; shift
  log "== $label"
  "$@" || fail "$label (exit $?, after $((SECONDS - t0)) s)"
  timings+=("$label: $((SECONDS - t0)) s")
  log "$label: $((SECONDS - t0)) s"
}

# The host's Debian mirror and security mirror (deb822 or one-line sources), so the root reaches
# what the host reaches.
host_uris() {
  { sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | tr ' ' '\n'
    sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*\).*/\2/p' /etc/apt/sources.list 2>/dev/null; } |
    grep -E '^(https?|file)://' || true
}
mirror() {
  local m
  m="$(host_uris | grep -v security | grep -m1 '/debian/*$' || true)"
  echo "${m:-http://deb.debian.org/debian}"
}
security_mirror() {
  local m
  m="$(host_uris | grep -m1 'debian-security/*$' || true)"
  echo "${m:-$(mirror | sed 's#/debian/*$#/debian-security#')}"
}

command -v debootstrap >/dev/null || {
  log "installing debootstrap on the host"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
}
command -v git >/dev/null || fail "git is needed on the host to clone the commit"
mkdir -p "$CACHE/apt-archives/partial" "$CACHE/apt-lists-$SUITE/partial" "$CACHE/ccache-$SUITE"

# ---- the pristine root: a cached minbase tarball, unpacked anew for every check ----
tarball="$CACHE/debian$DEBIAN-minbase.tar.gz"
if [ ! -s "$tarball" ]; then
  boot="$CACHE/bootstrap-$SUITE.tmp"
  rm -rf "$boot"
  bootstrap() { debootstrap --variant=minbase --cache-dir="$CACHE/apt-archives" "$SUITE" "$boot" "$(mirror)" >/dev/null; }
  timed "debootstrap --variant=minbase $SUITE" bootstrap
  tar -C "$boot" -czf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
  rm -rf "$boot"
fi

root=""
cleanup() {
  [ -n "$root" ] || return 0
  local m
  for m in root/.cache/ccache var/lib/apt/lists var/cache/apt/archives dev sys proc; do
    mountpoint -q "$root/$m" 2>/dev/null && { umount -R "$root/$m" 2>/dev/null || umount -R -l "$root/$m"; }
  done
  if findmnt -rn -o TARGET | grep -q "^$root/"; then
    echo "check_fresh: warning: $root still has mounts; not removing it" >&2
  elif [ "$keep" = 1 ]; then
    log "root kept at $root"
  else
    rm -rf "$root"
  fi
  root=""
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rev="$(git -C "$SRC" rev-parse HEAD)"
git -C "$SRC" diff --quiet HEAD 2>/dev/null || log "warning: uncommitted changes are not checked (HEAD is $rev)"

# new_root: a fresh root with the host's apt sources, DNS, the shared .deb cache and this commit.
new_root() {
  cleanup
  root="$(mktemp -d "$CACHE/root.XXXXXX")"
  tar -C "$root" -xzf "$tarball"
  touch "$root/.grpo-fresh-root"  # scripts/test.sh inside it does not start another such check
  # Debian's own sources for the release, as a new install writes them (deb822).
  local components="main"
  case "$mode" in cuda|sanitize) components="main contrib non-free non-free-firmware" ;; esac
  rm -f "$root/etc/apt/sources.list" "$root"/etc/apt/sources.list.d/*
  cat >"$root/etc/apt/sources.list.d/debian.sources" <<SOURCES
Types: deb
URIs: $(mirror)
Suites: $SUITE $SUITE-updates
Components: $components
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $(security_mirror)
Suites: $SUITE-security
Components: $components
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
  # apt settings that change how the mirror is reached (proxies, date checks), nothing else
  # (a host's local files only: one a package owns, such as appstream's, would meet its own
  # package's conffile in the root and stop dpkg at a prompt)
  for f in /etc/apt/apt.conf.d/*; do
    [ -f "$f" ] && grep -q '^[[:space:]]*Acquire::' "$f" && ! dpkg -S "$f" >/dev/null 2>&1 && cp "$f" "$root/etc/apt/apt.conf.d/"
  done
  # The host's network as the root needs it, nothing more: DNS, and the local certificate
  # authorities (an HTTPS proxy's) that the ca-certificates package adds to the root's bundle
  # when a package pulls it in (npm's registry is reached over HTTPS).
  cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
  if [ -d /usr/local/share/ca-certificates ]; then
    mkdir -p "$root/usr/local/share/ca-certificates"
    cp -a /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
  fi
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys" && mount --make-rslave "$root/sys"
  mount --rbind /dev "$root/dev" && mount --make-rslave "$root/dev"
  mount --bind "$CACHE/apt-archives" "$root/var/cache/apt/archives"
  mount --bind "$CACHE/apt-lists-$SUITE" "$root/var/lib/apt/lists"
  mkdir -p "$root/root/.cache/ccache"
  mount --bind "$CACHE/ccache-$SUITE" "$root/root/.cache/ccache"
  git clone --quiet --no-hardlinks "$SRC" "$root/src"
  git -C "$root/src" checkout --quiet "$rev"
  log "root $root: Debian $(cat "$root/etc/debian_version"), $(packages | wc -l) packages, commit ${rev:0:12}"
}

# in_root CMD...: runs a shell command in the root's /src with a clean environment (no DISPLAY).
in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb CI="${CI:-}" CCACHE_MAXSIZE=8G \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/bash -c "cd /src 2>/dev/null || cd /; $*"
}

# no_test_tools WHO: the demo's install brought none of what only the tests need.
no_test_tools() {
  local p
  for p in nodejs npm clang python3-torch python3-torch-cuda xvfb; do
    installed "$p" && fail "$1 installed $p, which only the tests need"
  done
  return 0
}
installed() { in_root "dpkg-query -W -f='\${Status}' $1 2>/dev/null | grep -q 'install ok installed'"; }
packages() { chroot "$root" dpkg-query -W -f '${db:Status-Abbrev} ${Package}\n' | awk '$1 == "ii" { print $2 }' | sort; }

# installs LABEL CMD...: `timed`, and what the step installed: packages, and their download size
# (the archive sizes apt reports, whether or not the shared .deb cache already held them).
installs() {
  local label="$1" before after new mb; shift
  before="$(packages)"
  timed "$label" "$@"
  after="$(packages)"
  new="$(comm -13 <(echo "$before") <(echo "$after"))"
  [ -n "$new" ] || { log "$label installed nothing"; return 0; }
  # shellcheck disable=SC2086  # one package name per word
  mb="$(chroot "$root" apt-cache show --no-all-versions $new 2>/dev/null | awk '/^Size:/ { s += $2 } END { printf "%.0f", s / 1e6 }')"
  log "$label installed $(echo "$new" | wc -l) packages, $mb MB of archives"
  timings[${#timings[@]}-1]+=" ($(echo "$new" | wc -l) packages, $mb MB downloaded)"
}

# check_install [SETUP_FLAG]: the README's install steps, the demo's first (which must bring no test
# tools), then the tests', then a configure of every preset and the smallest program that links it
# all. SETUP_FLAG (--cuda) goes to each scripts/setup.sh call.
check_install() {
  local flag="${1:-}"
  installs "scripts/setup.sh --demo $flag" in_root scripts/setup.sh --demo $flag
  no_test_tools "scripts/setup.sh --demo $flag"
  log "the demo's setup left $(packages | wc -l) packages in all, no nodejs/npm"
  installs "scripts/setup.sh --test $flag" in_root scripts/setup.sh --test $flag
  # Run again, setup installs nothing: every name it checks is one dpkg knows (virtual ones too).
  in_root "scripts/setup.sh --test $flag" | grep -q "setup: installing" && fail "a second scripts/setup.sh --test $flag installed packages again"
  [ -z "$flag" ] || return 0  # the CUDA modes configure with their own options
  for preset in release debug asan engine; do
    timed "cmake --preset $preset" in_root "cmake --preset $preset >/tmp/configure-$preset.log 2>&1 || { tail -n 40 /tmp/configure-$preset.log; exit 1; }"
  done
  timed "build dependency_check" in_root "cmake --build --preset release --target dependency_check"
  timed "run dependency_check" in_root "QT_QPA_PLATFORM=offscreen build/release/tests/install/dependency_check"
}

# The targets with a CUDA role: the CLI (the engine, `grpo train`, `grpo worker`, `grpo bench`), the
# desktop app, and test_device, which scripts/gpu_check.sh runs with GRPO_TEST_DEVICE=cuda (the
# other tests it runs there are CPU suites that --sanitize already runs against LibTorch 2.6).
CUDA_TARGETS=(grpo grpo-studio test_device)

STUB=/tmp/cudnn-stub
# NVIDIA's cuDNN licence is declined, so nvidia-cudnn downloads nothing (see the top).
decline_cudnn() { in_root "echo 'nvidia-cudnn nvidia-cudnn/question select I Decline' | debconf-set-selections"; }
cudnn_stub() {
  in_root "test -e /usr/lib/x86_64-linux-gnu/libcudnn.so.9" && fail "libcudnn.so.9 is there: the stub would hide the real one"
  timed "the cuDNN link stub" in_root "scripts/cudnn_link_stub.sh $STUB"
}
# cuda_configure PRESET [CMAKE_ARGS...]: configure against the CUDA LibTorch; no GPU to ask for its
# architecture, so name the ones to build for (nothing here is nvcc-compiled).
cuda_configure() {
  local preset="$1"; shift
  timed "cmake --preset $preset (CUDA LibTorch)" in_root "cmake --preset $preset $* -DTORCH_CUDA_ARCH_LIST='8.0;9.0' \
    -DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath-link,$STUB -DCMAKE_SHARED_LINKER_FLAGS=-Wl,-rpath-link,$STUB \
    >/tmp/configure-cuda.log 2>&1 || { tail -n 40 /tmp/configure-cuda.log; exit 1; }"
  in_root "grep -q '^C10_CUDA_LIBRARY:FILEPATH=.*libc10_cuda' build/$preset/CMakeCache.txt" ||
    fail "CMake did not pick the CUDA LibTorch (no C10_CUDA_LIBRARY in build/$preset/CMakeCache.txt)"
}
# check_cuda_links PRESET: each CUDA-role target links libtorch_cuda.so for real (the CUDA kernels
# are in the binary's closure).
check_cuda_links() {
  local t
  for t in "${CUDA_TARGETS[@]}"; do
    in_root "f=\$(find build/$1 -type f -name $t -perm -u+x | head -n1); test -n \"\$f\" && readelf -d \"\$f\" | grep -q 'libtorch_cuda.so'" ||
      fail "$t ($1) does not link libtorch_cuda.so"
    log "CUDA link OK: $t ($1 tree, needs libtorch_cuda.so)"
  done
}
# run_ctest PRESET [ENV...]: the whole suite; ctest's own summary line ("100% tests passed, 0 tests
# failed out of N") goes to the log.
run_ctest() {
  local preset="$1"; shift
  timed "ctest --preset $preset" in_root "$* ctest --preset $preset -j2 2>&1 | tee /tmp/ctest.log | grep -E '^(Test project|[0-9]+% tests passed|The following tests FAILED|[[:space:]]+[0-9]+ - )' ; grep -q '^100% tests passed' /tmp/ctest.log || { grep -B2 -A60 -E 'FAILED|Failed' /tmp/ctest.log | tail -n 120; exit 1; }"
}

new_root
case "$mode" in
  default) check_install ;;
  ctest)
    check_install
    cached_build "build the release tree" in_root "cmake --build --preset release"
    run_ctest release
    ;;
  cuda)
    decline_cudnn
    installs "scripts/setup.sh --demo --cuda" in_root scripts/setup.sh --demo --cuda
    cudnn_stub
    cuda_configure release
    for t in "${CUDA_TARGETS[@]}"; do
      cached_build "build and link $t (CUDA LibTorch)" in_root "cmake --build --preset release --target $t"
    done
    check_cuda_links release
    ;;
  sanitize)
    decline_cudnn
    check_install --cuda
    cudnn_stub
    cuda_configure asan -DGRPO_SANITIZE_NUMERICS=ON
    cached_build "build the asan tree (CUDA LibTorch, NUMERICS too)" in_root "cmake --build --preset asan"
    check_cuda_links asan
    # The loader finds the stub for libtorch_cuda.so's libcudnn.so.9 (run-time here, in this root only).
    run_ctest asan "LD_LIBRARY_PATH=$STUB"
    ;;
  full)
    installs "scripts/demo.sh --demo --steps 10 (setup, build, headless demo)" \
      in_root "scripts/demo.sh --demo --steps 10 --output /tmp/demo-run"
    in_root "test -s /tmp/demo-run/metrics.jsonl && test -d /tmp/demo-run/adapters" || fail "the demo wrote no metrics or adapters"
    no_test_tools "scripts/demo.sh"
    log "demo: $(in_root 'wc -l < /tmp/demo-run/metrics.jsonl') metrics lines; no test tools installed"
    # The test command next, on the same machine, as a newcomer who tried the demo first would.
    installs "scripts/test.sh (setup, build, every test, package, fuzz, ASan)" in_root scripts/test.sh
    ;;
esac
log "passed on a pristine Debian $DEBIAN ($SUITE) root ($mode):"
report
