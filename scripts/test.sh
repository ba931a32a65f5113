#!/usr/bin/env bash
# One command: install dependencies, build, run every test, check the .deb, fuzz each parser briefly,
# then build the suite again under ASan + UBSan + LSan and run its tests there too (all but those
# marked NUMERICS in tests/CMakeLists.txt: tensor numerics alone, which LibTorch bounds-checks).
# Beside it, on pristine Debian roots (scripts/check_fresh.sh, debootstrap + chroot): the install
# steps on Debian 12; the install steps, the whole release build and the whole CTest suite on
# Debian 13 (LibTorch 2.6, Qt 6.8, GCC 14); and the CUDA build (Debian 13's CUDA LibTorch 2.6 and
# CUDA 12.4) compiled and linked for everything with a CUDA role.
# Usage: scripts/test.sh [--quick] [PRESET]
#   --quick  a developer's check: build and ctest only (no package, fuzzing, ASan or fresh roots)
#   (GRPO_FUZZ_RUNS=N sets the fuzz inputs per target; GRPO_ASAN=0 skips the sanitizer pass;
#    GRPO_FRESH=0 skips the pristine roots; GRPO_FRESH=bookworm only the Debian 12 install check;
#    GRPO_BENCH_GUARD=0 skips the benchmark guard's warnings)
# Caches between runs, outside the clone: ccache (~/.cache/ccache, CCACHE_MAXSIZE, 12G here), and
# scripts/check_fresh.sh's minbase tarballs, .debs and per-release ccaches (/var/cache/grpo-fresh).
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
if [ "${1:-}" = --quick ]; then quick=1; shift; fi
preset="${1:-release}"
t_start=$SECONDS
stage_times=()
stage() {  # stage LABEL CMD...: runs CMD, records its wall time
  local label="$1" t0=$SECONDS; shift
  echo "== $label"
  "$@"
  stage_times+=("$label: $((SECONDS - t0)) s")
}
# Five builds share this machine's ccache over a CI run (release, ASan, fuzz here; the Debian 13
# ones keep their own): 5 GB, ccache's default, evicts part of a warm cache every run.
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-12G}"
stage "scripts/setup.sh --test" scripts/setup.sh --test
ccache_before="$(scripts/ccache_stats.sh)"
# The pristine roots are mostly downloads and dpkg at first, then the Debian 13 build and tests:
# they run beside this build as one chain (its output in build/fresh-*.log). Tests on both sides
# share the machine with builds: none may depend on timing. Not run inside such a root itself
# (check_fresh.sh --full runs this script there).
fresh_pid=
fresh=()
if [ "$quick" = 0 ] && [ "${GRPO_FRESH:-1}" != 0 ] && [ ! -e /.grpo-fresh-root ]; then
  # Each check as NAME|OPTIONS; its output goes to build/fresh-NAME.log.
  fresh=("bookworm|--release bookworm")
  if [ "${GRPO_FRESH:-1}" != bookworm ]; then fresh+=("trixie-ctest|--release trixie --ctest" "trixie-cuda|--release trixie --cuda"); fi
  mkdir -p build
  fresh_chain() {
    local check
    for check in "${fresh[@]}"; do
      # shellcheck disable=SC2086  # the options are words
      if ! scripts/check_fresh.sh ${check#*|} >"build/fresh-${check%%|*}.log" 2>&1; then
        echo "${check#*|}" >build/fresh-failed
        return 1
      fi
    done
  }
  rm -f build/fresh-failed build/fresh-*.log
  echo "== beside the build, one after another (build/fresh-*.log):$(printf ' [scripts/check_fresh.sh %s]' "${fresh[@]#*|}")"
  fresh_chain &
  fresh_pid=$!
  # On an early exit (a failed build), stop it (its own traps unmount) and keep our exit status.
  stop_fresh() {
    local rc=$?
    if [ -n "$fresh_pid" ]; then
      pkill -TERM -P "$fresh_pid" 2>/dev/null || true
      kill -TERM "$fresh_pid" 2>/dev/null || true
      wait "$fresh_pid" 2>/dev/null || true
    fi
    exit "$rc"
  }
  trap stop_fresh EXIT
fi
stage "build ($preset)" scripts/build.sh "$preset"
stage "ctest ($preset)" ctest --preset "$preset" -j2
if [ "$quick" = 1 ]; then exit 0; fi
# The Debian package: built from this build, unpacked into a temporary root, run from there.
if [ "$preset" = release ]; then stage "package" env NO_BUILD=1 scripts/check_package.sh build/release; fi
# Every parser of untrusted input under libFuzzer + ASan + UBSan: a fixed seed and input count
# (reproducible), capped in time. Longer exploration: scripts/fuzz.sh 600.
stage "fuzz" env FUZZ_SEED=1 FUZZ_RUNS="${GRPO_FUZZ_RUNS:-20000}" scripts/fuzz.sh 30
# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer + LeakSanitizer (build/asan):
# any report fails its test.
if [ "${GRPO_ASAN:-1}" != 0 ]; then stage "ASan+UBSan build and ctest" scripts/test_asan.sh; fi
if [ -n "$fresh_pid" ]; then
  t0=$SECONDS
  fresh_status=0
  wait "$fresh_pid" || fresh_status=$?
  fresh_pid=
  stage_times+=("waiting for the pristine roots: $((SECONDS - t0)) s")
  for log in build/fresh-*.log; do sed "s/^/[$(basename "$log" .log)] /" "$log"; done
  if [ "$fresh_status" != 0 ]; then
    echo "scripts/check_fresh.sh $(cat build/fresh-failed 2>/dev/null) failed: see its lines above" >&2
    exit 1
  fi
fi
# The guarded benchmark ratios (BENCHMARKS.md, "Guarded ratios"), now that nothing else runs: a
# ratio more than 15% below its recorded figure prints a "bench_guard: WARNING" line. It warns,
# never fails: one CI run on a shared machine is not a measurement (developers run the 5-run
# check before they stop: scripts/bench_guard.py).
if [ "$preset" = release ] && [ "${GRPO_BENCH_GUARD:-1}" != 0 ]; then
  stage "bench guard (warn only)" python3 scripts/bench_guard.py --warn-only --repeat 3
fi
total=$((SECONDS - t_start))
echo "scripts/test.sh: every stage passed in $total s"
for t in "${stage_times[@]}"; do echo "  $t"; done
echo "  this machine's ccache over the run: $(scripts/ccache_stats.sh --since "$ccache_before")" \
     "(the roots' own: build/fresh-*.log)"
# CI has 5,400 s. A warm run (ccache and the roots' caches filled by the last run on this machine)
# is meant to stay under an hour; past that, say so loudly, so a slower CI is found by this line
# and not by the day it runs out of time.
if [ -n "${CI:-}" ] && [ "$total" -gt 3600 ]; then
  echo "scripts/test.sh: WARNING: this run took $total s, over CI's 3600 s target for a warm run" \
       "(limit 5400 s): see the stage times above and BENCHMARKS.md, 'CI time'" >&2
fi
