#!/usr/bin/env bash
# One command: install dependencies, build, run every test, check the .deb, fuzz each parser briefly.
# Usage: scripts/test.sh [PRESET]   (GRPO_FUZZ_RUNS=N sets the fuzz inputs per target)
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
