#!/usr/bin/env bash
# Proves the README's install steps on a pristine Debian 12 root: debootstrap --variant=minbase,
# nothing else installed, this commit cloned into it, everything run inside a chroot (as root).
#
# Usage: scripts/check_fresh.sh [--full] [--keep]
#   (default)  scripts/setup.sh --demo (and checks it installed no Node.js/npm), scripts/setup.sh
#              --test, a CMake configure of every preset, and a build and run of dependency_check,
#              the smallest target that links Qt Charts, Qt Network and LibTorch. CI runs this.
#   --full     the README's two commands as a newcomer runs them on one fresh root, each timed:
#              `scripts/demo.sh --demo --steps 10` (headless), then `scripts/test.sh`.
#   --keep     leave the root in place (its path is printed) instead of removing it.
# Needs root (chroot and mounts) and reaches the same Debian mirror as the host's apt sources.
# The minbase root is cached as a tarball and downloaded .debs are kept between runs, both under
# GRPO_FRESH_CACHE (default /var/cache/grpo-fresh); the root itself is always made new.
# What is checked is the commit at HEAD: uncommitted changes are not in the clone.
set -euo pipefail
SRC="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${GRPO_FRESH_CACHE:-/var/cache/grpo-fresh}"
SUITE=bookworm

full=0 keep=0
for a in "$@"; do
  case "$a" in
    --full) full=1 ;;
    --keep) keep=1 ;;
    *) echo "usage: scripts/check_fresh.sh [--full] [--keep]" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" -ne 0 ]; then exec sudo -E "$0" "$@"; fi

log() { echo "check_fresh: $*"; }
timings=()
report() { for t in "${timings[@]}"; do echo "  $t"; done; }
fail() {
  echo "check_fresh: FAIL: $*" >&2
  [ ${#timings[@]} -eq 0 ] || { echo "check_fresh: the steps before it:"; report; }
  exit 1
}
timed() {  # timed LABEL CMD...: runs CMD, records its wall time under LABEL
  local label="$1" t0=$SECONDS; shift
  log "== $label"
  "$@" || fail "$label (exit $?, after $((SECONDS - t0)) s)"
  timings+=("$label: $((SECONDS - t0)) s")
  log "$label: $((SECONDS - t0)) s"
}

# The host's Debian mirror (deb822 or one-line sources), so the root gets what the host gets.
mirror() {
  local m
  m=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | grep -v security | grep -m1 debian || true)
  [ -n "$m" ] || m=$(sed -n "s/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*\)[[:space:]]\+${SUITE}[[:space:]].*/\2/p" \
                       /etc/apt/sources.list 2>/dev/null | head -n1 || true)
  echo "${m:-http://deb.debian.org/debian}"
}

command -v debootstrap >/dev/null || {
  log "installing debootstrap on the host"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
}
command -v git >/dev/null || fail "git is needed on the host to clone the commit"
mkdir -p "$CACHE/apt-archives/partial" "$CACHE/apt-lists/partial"

# ---- the pristine root: a cached minbase tarball, unpacked anew for every check ----
tarball="$CACHE/debian12-minbase.tar.gz"
if [ ! -s "$tarball" ]; then
  boot="$CACHE/bootstrap.tmp"
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
  for m in var/lib/apt/lists var/cache/apt/archives dev sys proc; do
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
  rm -f "$root/etc/apt/sources.list"
  cp -a /etc/apt/sources.list* "$root/etc/apt/" 2>/dev/null || true
  find "$root/etc/apt/sources.list.d" -type f ! -name '*.list' ! -name '*.sources' -delete 2>/dev/null || true
  # apt settings that change how the mirror is reached (proxies, date checks), nothing else
  for f in /etc/apt/apt.conf.d/*; do
    [ -f "$f" ] && grep -q '^[[:space:]]*Acquire::' "$f" && cp "$f" "$root/etc/apt/apt.conf.d/"
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
  mount --bind "$CACHE/apt-lists" "$root/var/lib/apt/lists"
  git clone --quiet --no-hardlinks "$SRC" "$root/src"
  git -C "$root/src" checkout --quiet "$rev"
  log "root $root: Debian $(cat "$root/etc/debian_version"), $(packages | wc -l) packages, commit ${rev:0:12}"
}

# in_root CMD...: runs a shell command in the root's /src with a clean environment (no DISPLAY).
in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb CI="${CI:-}" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/bash -c "cd /src 2>/dev/null || cd /; $*"
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

if [ "$full" = 0 ]; then
  new_root
  installs "scripts/setup.sh --demo" in_root scripts/setup.sh --demo
  for p in nodejs npm clang python3-torch xvfb; do
    installed "$p" && fail "scripts/setup.sh --demo installed $p, which only the tests need"
  done
  log "the demo's setup left $(packages | wc -l) packages in all, no nodejs/npm"
  installs "scripts/setup.sh --test" in_root scripts/setup.sh --test
  for preset in release debug asan engine; do
    timed "cmake --preset $preset" in_root "cmake --preset $preset >/tmp/configure-$preset.log 2>&1 || { tail -n 40 /tmp/configure-$preset.log; exit 1; }"
  done
  timed "build dependency_check" in_root "cmake --build --preset release --target dependency_check"
  timed "run dependency_check" in_root "QT_QPA_PLATFORM=offscreen build/release/tests/install/dependency_check"
else
  new_root
  installs "scripts/demo.sh --demo --steps 10 (setup, build, headless demo)" \
    in_root "scripts/demo.sh --demo --steps 10 --output /tmp/demo-run"
  in_root "test -s /tmp/demo-run/metrics.jsonl && test -d /tmp/demo-run/adapters" || fail "the demo wrote no metrics or adapters"
  for p in nodejs npm clang python3-torch xvfb; do
    installed "$p" && fail "scripts/demo.sh installed $p, which only the tests need"
  done
  log "demo: $(in_root 'wc -l < /tmp/demo-run/metrics.jsonl') metrics lines; no test tools installed"
  # The test command next, on the same machine, as a newcomer who tried the demo first would.
  installs "scripts/test.sh (setup, build, every test, package, fuzz, ASan)" in_root scripts/test.sh
fi
log "passed on a pristine Debian 12 root:"
report
