#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer (+ LeakSanitizer):
# configures and builds the asan preset (RelWithDebInfo, build/asan), then runs ctest's asan preset.
# Any report fails its test: UBSan aborts (-fno-sanitize-recover=undefined), ASan/LSan exit non-zero.
# Reports from inside LibTorch/Qt/fontconfig are suppressed in tests/sanitizers/*.supp (each with why).
# usage: scripts/test_asan.sh [CTEST_ARGS...]   e.g. scripts/test_asan.sh -R 'test_safetensors|test_model'
# Needs the dependencies of scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset asan >/dev/null
cmake --build --preset asan
ctest --preset asan -j2 "$@"
