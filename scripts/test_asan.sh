#!/usr/bin/env bash
# The test suite under AddressSanitizer + UndefinedBehaviorSanitizer + LeakSanitizer: configures and
# builds the asan preset (RelWithDebInfo, build/asan), then runs the asan test preset.
# Any report fails its test: UBSan aborts (-fno-sanitize-recover=undefined), ASan/LSan exit non-zero.
# Reports from inside LibTorch/Qt/fontconfig are suppressed in tests/sanitizers/*.supp (each with why).
# The tests marked NUMERICS in tests/CMakeLists.txt (tensor numerics alone) are not in this build;
# configure with -DGRPO_SANITIZE_NUMERICS=ON to add them.
# usage: scripts/test_asan.sh               every target, every test
#        scripts/test_asan.sh TEST...       only these test executables (each test is named after its
#                                           executable), e.g. scripts/test_asan.sh test_safetensors test_model
# Needs the dependencies of scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset asan >/dev/null
if [[ $# -eq 0 ]]; then
  cmake --build --preset asan
  ctest --preset asan -j2
else
  cmake --build --preset asan --target "$@"
  ctest --preset asan -j2 -R "^($(IFS='|'; echo "$*"))\$"
fi
