#!/usr/bin/env bash
# One command: install dependencies, build, run every test, check the .deb, fuzz each parser briefly,
# then build the suite again under ASan + UBSan + LSan and run its tests there too (all but those
# marked NUMERICS in tests/CMakeLists.txt: tensor numerics alone, which LibTorch bounds-checks).
# Beside the build, proves the install steps on a pristine Debian 12 root (scripts/check_fresh.sh).
# Usage: scripts/test.sh [--quick] [PRESET]
#   --quick  a developer's check: build and ctest only (no package, fuzzing, ASan or fresh root)
#   (GRPO_FUZZ_RUNS=N sets the fuzz inputs per target; GRPO_ASAN=0 skips the sanitizer pass, about
#    18 min on 2 cores; GRPO_FRESH=0 skips the pristine-root check, about 8 min)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
if [ "${1:-}" = --quick ]; then quick=1; shift; fi
preset="${1:-release}"
scripts/setup.sh --test
# The README's install steps on a pristine Debian 12 root (debootstrap minbase, chroot): setup,
# a configure of every preset, and a build and run of the smallest Qt Charts + Network + LibTorch
# program. Mostly downloads and dpkg, so it runs beside the build (niced), and the tests start
# only once it is done: timing-sensitive tests never share the machine with it. Not run inside
# such a root itself (check_fresh.sh --full runs this script there).
fresh_pid=
if [ "$quick" = 0 ] && [ "${GRPO_FRESH:-1}" != 0 ] && [ ! -e /.grpo-fresh-root ]; then
  mkdir -p build
  fresh_log="build/check_fresh.log"
  echo "== scripts/check_fresh.sh runs beside the build; its output: $fresh_log"
  nice -n 10 scripts/check_fresh.sh >"$fresh_log" 2>&1 &
  fresh_pid=$!
  # On an early exit (a failed build), stop it (its own trap unmounts) and keep our exit status.
  stop_fresh() {
    local rc=$?
    if [ -n "$fresh_pid" ]; then kill -TERM "$fresh_pid" 2>/dev/null; wait "$fresh_pid" 2>/dev/null || true; fi
    exit "$rc"
  }
  trap stop_fresh EXIT
fi
scripts/build.sh "$preset"
if [ -n "$fresh_pid" ]; then
  fresh_status=0
  wait "$fresh_pid" || fresh_status=$?
  fresh_pid=
  sed 's/^/[fresh] /' "$fresh_log"
  if [ "$fresh_status" != 0 ]; then
    echo "scripts/check_fresh.sh failed (exit $fresh_status): the install steps do not work on a pristine root" >&2
    exit "$fresh_status"
  fi
fi
ctest --preset "$preset" -j2
if [ "$quick" = 1 ]; then exit 0; fi
# The Debian package: built from this build, unpacked into a temporary root, run from there.
if [ "$preset" = release ]; then NO_BUILD=1 scripts/check_package.sh build/release; fi
# Every parser of untrusted input under libFuzzer + ASan + UBSan: a fixed seed and input count
# (reproducible), capped in time. Longer exploration: scripts/fuzz.sh 600.
FUZZ_SEED=1 FUZZ_RUNS="${GRPO_FUZZ_RUNS:-20000}" scripts/fuzz.sh 30
# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer + LeakSanitizer (build/asan):
# any report fails its test.
if [ "${GRPO_ASAN:-1}" != 0 ]; then scripts/test_asan.sh; fi
