#!/usr/bin/env bash
# Installs dependencies from Debian packages (idempotent; sudo only when not root), on Debian 12
# ("bookworm", LibTorch 1.13, Qt 6.4) or Debian 13 ("trixie", LibTorch 2.6, Qt 6.8): the few
# package names that differ between them are picked from /etc/os-release.
# Usage: scripts/setup.sh [--demo | --test] [--no-libtorch | --cuda]
#   --demo  what building and running grpo and grpo-studio needs, nothing else (scripts/demo.sh)
#   --test  that, plus what the tests, fuzzers, sanitizers and benchmarks need (the default;
#           scripts/test.sh): Python's torch and python3 for reference checks, Xvfb, clang and its
#           sanitizer runtimes, the openssl CLI, debootstrap for scripts/check_fresh.sh, and
#           Node.js with the npm `tokenizers` package for the tokenizer benchmark's reference, and
#           chromium with npm `puppeteer-core` for the browser view's tests (tests/web), and
#           slurm-wlm with munge for a real single-node Slurm cluster (tests/cluster/test_slurm).
#   --no-libtorch  without Debian's LibTorch and python3-torch: for a GPU box that builds against
#           PyTorch's own CUDA LibTorch (scripts/gpu_check.sh)
#   --cuda  Debian 13 only: Debian's CUDA LibTorch 2.6 (libtorch-cuda-dev, from contrib) and the
#           CUDA 12.4 toolkit (nvidia-cuda-toolkit, non-free) instead of the CPU LibTorch; the
#           contrib and non-free components must be in the apt sources. libtorch-cuda-dev pulls in
#           nvidia-cudnn, whose installer asks to accept NVIDIA's cuDNN licence and then downloads
#           cuDNN from NVIDIA (docs/gpu.md). Conflicts with the CPU LibTorch: one or the other.
# Every package is installed with --no-install-recommends, so each one the project needs is listed
# here by name (a pristine root has nothing else: scripts/check_fresh.sh proves it).
set -euo pipefail
cd "$(dirname "$0")/.."

mode="test" torch=cpu
for arg in "$@"; do
  case "$arg" in
    --demo) mode="demo" ;;
    --test) mode="test" ;;
    --no-libtorch) torch=none ;;
    --cuda) torch=cuda ;;
    *) echo "usage: scripts/setup.sh [--demo | --test] [--no-libtorch | --cuda]" >&2; exit 2 ;;
  esac
done

# The release decides the few names that differ. Debian 13 made libqt6opengl6-dev a virtual
# package (qt6-base-dev provides it) and ships clang 19 instead of 14.
release="unknown"
if [ -r /etc/os-release ]; then release="$(. /etc/os-release && echo "${VERSION_CODENAME:-${ID:-unknown}}")"; fi
case "$release" in
  bookworm) qt_opengl_dev=(libqt6opengl6-dev) clang_rt=libclang-rt-14-dev ;;
  trixie)   qt_opengl_dev=() clang_rt=libclang-rt-19-dev ;;
  *) echo "setup: this is '$release' (/etc/os-release VERSION_CODENAME); supported: Debian 12 (bookworm) and Debian 13 (trixie)" >&2
     exit 1 ;;
esac
if [ "$torch" = cuda ] && [ "$release" != trixie ]; then
  echo "setup: --cuda needs Debian 13 (trixie), the first release with a CUDA LibTorch; this is $release." >&2
  echo "setup: on Debian 12, build against PyTorch's wheel instead: README, 'Train on a GPU'." >&2
  exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# Building and running the app and the CLI.
PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  # Qt6Charts' CMake config needs Qt6OpenGL, which qt6-base-dev only recommends.
  qt6-base-dev qt6-base-dev-tools qt6-charts-dev "${qt_opengl_dev[@]}" qt6-qpa-plugins
  nlohmann-json3-dev libcli11-dev libpcre2-dev libutf8proc-dev libyaml-cpp-dev
  # The Parquet reader's page codecs (core/io/parquet_codec.cpp): SNAPPY, GZIP, ZSTD.
  libsnappy-dev zlib1g-dev libzstd-dev
  # Debian's default BLAS is the slow reference one (about 6 vs 175 GFLOP/s for fp32 GEMM here).
  libopenblas0-pthread
  # Text in the charts and in the headless demo's PNGs: fontconfig alone ships no font.
  fonts-dejavu-core
)
case "$torch" in
  cpu) PACKAGES+=(libtorch-dev) ;;
  # find_package(Torch) of a CUDA LibTorch looks for the toolkit (nvcc, the CUDA libraries' CMake
  # targets), though nothing here is compiled with nvcc.
  cuda) PACKAGES+=(libtorch-cuda-dev nvidia-cuda-toolkit) ;;
esac
if [ "$mode" = test ]; then
  # PyTorch's grpo step baseline, from the same LibTorch build as the C++ side uses.
  case "$torch" in cpu) PACKAGES+=(python3-torch) ;; cuda) PACKAGES+=(python3-torch-cuda) ;; esac
  PACKAGES+=(
    git
    python3                 # reference checks: python3's eval of the arithmetic tasks
    xvfb xauth              # the real-window test and screenshots
    clang "$clang_rt"       # libFuzzer, ASan + UBSan + LSan
    openssl                 # the TLS tests make self-signed certificates with the CLI
    debootstrap             # scripts/check_fresh.sh builds pristine Debian 12 and 13 roots
    file                    # CPack's .deb generator (dpkg-shlibdeps) in scripts/check_package.sh
    desktop-file-utils appstream  # that script validates the desktop entry and AppStream metainfo
    chromium                # the browser view's tests, benchmark and screenshot (tests/web), headless
    slurm-wlm munge         # a real single-node Slurm cluster for the worker launcher's tests (tests/cluster)
  )
  # Node.js for the tokenizer benchmark's reference (may already come from elsewhere with npm).
  if ! command -v npm >/dev/null 2>&1; then PACKAGES+=(nodejs npm); fi
fi

# A name counts as there when a package of that name is installed, or when an installed package
# provides it (a virtual package: apt accepts those names, dpkg-query does not know them).
provided=" $(dpkg-query -W -f='${db:Status-Abbrev}|${Provides}\n' 2>/dev/null | sed -n 's/^ii *|//p' |
             tr ',' '\n' | sed 's/^ *//; s/ .*//' | sort -u | tr '\n' ' ') "
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" && continue
  [[ "$provided" == *" $p "* ]] && continue
  missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# OpenBLAS (pthread) must be the BLAS/LAPACK alternative, not the reference one.
for alt in libblas.so.3-x86_64-linux-gnu liblapack.so.3-x86_64-linux-gnu; do
  cand=$(update-alternatives --list "$alt" 2>/dev/null | grep openblas-pthread | head -n1 || true)
  if [ -n "$cand" ]; then $SUDO update-alternatives --set "$alt" "$cand" >/dev/null; fi
done

# Reference tokenizer (Hugging Face tokenizers' Rust core) for `grpo bench tokenize`. Optional:
# the benchmark reports it missing rather than failing.
if [ "$mode" = test ] && [ -f tests/bench/package.json ] && command -v npm >/dev/null 2>&1; then
  if [ ! -d tests/bench/node_modules ]; then
    npm_log="$(mktemp)"
    (cd tests/bench && { npm ci --no-audit --no-fund >"$npm_log" 2>&1 || npm install --no-audit --no-fund >>"$npm_log" 2>&1; }) \
      || { tail -n 5 "$npm_log"; echo "setup: warning: npm install in tests/bench failed; grpo bench tokenize will run without the reference"; }
    rm -f "$npm_log"
  fi
fi
# The browser view's tests drive chromium with puppeteer-core (pinned in tests/web/package-lock.json;
# it downloads no browser). Required: without it test_web_dashboard fails saying so.
if [ "$mode" = test ] && [ -f tests/web/package.json ] && command -v npm >/dev/null 2>&1 && [ ! -d tests/web/node_modules ]; then
  (cd tests/web && npm ci --no-audit --no-fund --loglevel=error) || echo "setup: warning: npm ci in tests/web failed; test_web_dashboard will fail"
fi
echo "setup: dependencies ready ($mode)"
