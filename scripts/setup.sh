#!/usr/bin/env bash
# Installs every build and test dependency from Debian 12 packages (idempotent; sudo only when
# not root). Also installs the Node package used as the tokenizer benchmark's reference.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  qt6-base-dev qt6-base-dev-tools qt6-charts-dev qt6-qpa-plugins
  libtorch-dev nlohmann-json3-dev libcli11-dev libpcre2-dev libutf8proc-dev libyaml-cpp-dev
  libopenblas0-pthread python3-torch xvfb xauth
  clang libclang-rt-14-dev
  openssl  # the CLI: tests make self-signed certificates for the TLS tests
)
# Node.js (for the tokenizer benchmark's reference) may already come from elsewhere with npm.
if ! command -v npm >/dev/null 2>&1; then PACKAGES+=(nodejs npm); fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Debian's default BLAS is the slow reference one; OpenBLAS (pthread) must be the alternative.
for alt in libblas.so.3-x86_64-linux-gnu liblapack.so.3-x86_64-linux-gnu; do
  cand=$(update-alternatives --list "$alt" 2>/dev/null | grep openblas-pthread | head -n1 || true)
  if [ -n "$cand" ]; then $SUDO update-alternatives --set "$alt" "$cand" >/dev/null; fi
done

# Reference tokenizer (Hugging Face tokenizers' Rust core) for `grpo bench tokenize`. Optional:
# the benchmark reports it missing rather than failing.
if [ -f tests/bench/package.json ] && command -v npm >/dev/null 2>&1; then
  if [ ! -d tests/bench/node_modules ]; then
    (cd tests/bench && { npm ci --no-audit --no-fund --silent 2>/dev/null || npm install --no-audit --no-fund --silent; }) \
      || echo "setup: warning: npm install in tests/bench failed; grpo bench tokenize will run without the reference"
  fi
fi
echo "setup: dependencies ready"
