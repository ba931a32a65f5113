#!/usr/bin/env bash
# One command: install dependencies, build, run every test, check the .deb, fuzz each parser briefly,
# then build the whole suite again under ASan + UBSan + LSan and run every test there too.
# Usage: scripts/test.sh [PRESET]   (GRPO_FUZZ_RUNS=N sets the fuzz inputs per target;
#                                    GRPO_ASAN=0 skips the sanitizer pass, about 18 min on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
scripts/setup.sh
scripts/build.sh "$preset"
ctest --preset "$preset" -j2
# The Debian package: built from this build, unpacked into a temporary root, run from there.
if [ "$preset" = release ]; then NO_BUILD=1 scripts/check_package.sh build/release; fi
# Every parser of untrusted input under libFuzzer + ASan + UBSan: a fixed seed and input count
# (reproducible), capped in time. Longer exploration: scripts/fuzz.sh 600.
FUZZ_SEED=1 FUZZ_RUNS="${GRPO_FUZZ_RUNS:-20000}" scripts/fuzz.sh 60
# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer + LeakSanitizer (build/asan):
# any report fails its test.
if [ "${GRPO_ASAN:-1}" != 0 ]; then scripts/test_asan.sh; fi
