#!/usr/bin/env bash
# Installs dependencies from Debian 12 packages (idempotent; sudo only when not root).
# Usage: scripts/setup.sh [--demo | --test] [--no-libtorch]
#   --demo  what building and running grpo and grpo-studio needs, nothing else (scripts/demo.sh)
#   --test  that, plus what the tests, fuzzers, sanitizers and benchmarks need (the default;
#           scripts/test.sh): Python's torch and python3 for reference checks, Xvfb, clang and its
#           sanitizer runtimes, the openssl CLI, debootstrap for scripts/check_fresh.sh, and
#           Node.js with the npm `tokenizers` package for the tokenizer benchmark's reference, and
#           chromium with npm `puppeteer-core` for the browser view's tests (tests/web).
#   --no-libtorch  without Debian's LibTorch 1.13 (CPU) and python3-torch: for a GPU box that builds
#           against PyTorch's own CUDA LibTorch (scripts/gpu_check.sh)
# Every package is installed with --no-install-recommends, so each one the project needs is listed
# here by name (a pristine root has nothing else: scripts/check_fresh.sh proves it).
set -euo pipefail
cd "$(dirname "$0")/.."

mode="test" system_torch=1
for arg in "$@"; do
  case "$arg" in
    --demo) mode="demo" ;;
    --test) mode="test" ;;
    --no-libtorch) system_torch=0 ;;
    *) echo "usage: scripts/setup.sh [--demo | --test] [--no-libtorch]" >&2; exit 2 ;;
  esac
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# Building and running the app and the CLI.
PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  # Qt6Charts' CMake config needs Qt6OpenGL, which qt6-base-dev only recommends.
  qt6-base-dev qt6-base-dev-tools qt6-charts-dev libqt6opengl6-dev qt6-qpa-plugins
  nlohmann-json3-dev libcli11-dev libpcre2-dev libutf8proc-dev libyaml-cpp-dev
  # The Parquet reader's page codecs (core/io/parquet_codec.cpp): SNAPPY, GZIP, ZSTD.
  libsnappy-dev zlib1g-dev libzstd-dev
  # Debian's default BLAS is the slow reference one (about 6 vs 175 GFLOP/s for fp32 GEMM here).
  libopenblas0-pthread
  # Text in the charts and in the headless demo's PNGs: fontconfig alone ships no font.
  fonts-dejavu-core
)
if [ "$system_torch" = 1 ]; then PACKAGES+=(libtorch-dev); fi
if [ "$mode" = test ]; then
  if [ "$system_torch" = 1 ]; then PACKAGES+=(python3-torch); fi  # PyTorch's grpo step baseline
  PACKAGES+=(
    git
    python3                 # reference checks: python3's eval of the arithmetic tasks
    xvfb xauth              # the real-window test and screenshots
    clang libclang-rt-14-dev  # libFuzzer, ASan + UBSan + LSan
    openssl                 # the TLS tests make self-signed certificates with the CLI
    debootstrap             # scripts/check_fresh.sh builds a pristine Debian 12 root
    file                    # CPack's .deb generator (dpkg-shlibdeps) in scripts/check_package.sh
    desktop-file-utils appstream  # that script validates the desktop entry and AppStream metainfo
    chromium                # the browser view's tests, benchmark and screenshot (tests/web), headless
  )
  # Node.js for the tokenizer benchmark's reference (may already come from elsewhere with npm).
  if ! command -v npm >/dev/null 2>&1; then PACKAGES+=(nodejs npm); fi
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
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
