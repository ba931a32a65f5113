#!/usr/bin/env bash
# One command: install dependencies, build, run every test, check the .deb, fuzz each parser briefly,
# and run the whole suite under ASan + UBSan + LSan. Where this machine can make pristine Debian roots
# (root, debootstrap + chroot: scripts/check_fresh.sh), two of them do part of that work:
#   - beside the host's build, a Debian 13 root (LibTorch 2.6, Qt 6.8, GCC 14) installed with
#     Debian's CUDA LibTorch and CUDA 12.4 builds one sanitizer tree of everything, checks that the
#     CUDA-role targets link libtorch_cuda.so, and runs the whole suite there under ASan + UBSan +
#     LSan, the NUMERICS tests included (check_fresh.sh --sanitize): the LibTorch 2 paths, the CUDA
#     build and the sanitizers in one tree instead of three;
#   - after the host's stages, the README's install steps on a Debian 12 root.
# Without the roots (not root, GRPO_FRESH=0 or bookworm, or inside such a root already) the
# sanitizer pass runs on this machine instead (scripts/test_asan.sh: all but the NUMERICS tests).
# Usage: scripts/test.sh [--quick] [PRESET]
#   --quick  a developer's check: build and ctest only (no package, fuzzing, sanitizers or roots)
#   (GRPO_FUZZ_RUNS=N sets the fuzz inputs per target; GRPO_ASAN=0 skips the sanitizer pass wherever
#    it would run; GRPO_FRESH=0 skips the pristine roots; GRPO_FRESH=bookworm only the Debian 12
#    install check; GRPO_BENCH_GUARD=0 skips the benchmark guard's warnings)
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
# Three builds share this machine's ccache over a CI run (release and fuzz here, ASan without the
# roots; the Debian 13 root keeps its own): 5 GB, ccache's default, could evict part of a warm cache.
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-12G}"
stage "scripts/setup.sh --test" scripts/setup.sh --test
ccache_before="$(scripts/ccache_stats.sh)"
# The pristine roots (not inside such a root itself: check_fresh.sh --full runs this script there).
# Tests on both sides share the machine with builds: none may depend on timing.
roots=0
if [ "$quick" = 0 ] && [ "${GRPO_FRESH:-1}" != 0 ] && [ ! -e /.grpo-fresh-root ]; then roots=1; fi
sanitize_root=0
if [ "$roots" = 1 ] && [ "${GRPO_FRESH:-1}" != bookworm ] && [ "${GRPO_ASAN:-1}" != 0 ]; then sanitize_root=1; fi
mkdir -p build
rm -f build/fresh-*.log
fresh_pid=
if [ "$sanitize_root" = 1 ]; then
  # Mostly downloads and dpkg at first, then the sanitizer tree and the suite: beside the host's
  # stages from the start (its output in build/fresh-trixie-sanitize.log).
  echo "== beside the build (build/fresh-trixie-sanitize.log): scripts/check_fresh.sh --release trixie --sanitize"
  scripts/check_fresh.sh --release trixie --sanitize >build/fresh-trixie-sanitize.log 2>&1 &
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
show_log() { sed "s/^/[$(basename "$1" .log)] /" "$1"; }
stage "build ($preset)" scripts/build.sh "$preset"
stage "ctest ($preset)" ctest --preset "$preset" -j2
if [ "$quick" = 1 ]; then exit 0; fi
# The Debian package: built from this build, unpacked into a temporary root, run from there.
if [ "$preset" = release ]; then stage "package" env NO_BUILD=1 scripts/check_package.sh build/release; fi
# Every parser of untrusted input under libFuzzer + ASan + UBSan: a fixed seed and input count
# (reproducible), capped in time. Longer exploration: scripts/fuzz.sh 600.
stage "fuzz" env FUZZ_SEED=1 FUZZ_RUNS="${GRPO_FUZZ_RUNS:-20000}" scripts/fuzz.sh 30
# The README's install steps on a pristine Debian 12 root: after the host's builds, while the Debian
# 13 root still compiles.
if [ "$roots" = 1 ]; then
  bookworm_check() {
    local rc=0
    scripts/check_fresh.sh --release bookworm >build/fresh-bookworm.log 2>&1 || rc=$?
    show_log build/fresh-bookworm.log
    [ "$rc" = 0 ] || echo "scripts/check_fresh.sh --release bookworm failed: see its lines above" >&2
    return "$rc"
  }
  stage "pristine Debian 12 root: install steps" bookworm_check
fi
# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer + LeakSanitizer: in the
# Debian 13 root when it runs, else here (build/asan). Any report fails its test.
if [ "${GRPO_ASAN:-1}" != 0 ] && [ "$sanitize_root" = 0 ]; then
  stage "ASan+UBSan build and ctest" scripts/test_asan.sh
fi
if [ -n "$fresh_pid" ]; then
  t0=$SECONDS
  fresh_status=0
  wait "$fresh_pid" || fresh_status=$?
  fresh_pid=
  stage_times+=("waiting for the Debian 13 root (sanitizers, CUDA link): $((SECONDS - t0)) s")
  show_log build/fresh-trixie-sanitize.log
  if [ "$fresh_status" != 0 ]; then
    echo "scripts/check_fresh.sh --release trixie --sanitize failed: see its lines above" >&2
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
