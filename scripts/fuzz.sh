#!/usr/bin/env bash
# Fuzzes every parser of untrusted input with libFuzzer (clang, ASan, UBSan) for a bounded time.
# usage: scripts/fuzz.sh [SECONDS_PER_TARGET=60] [TARGET...]
# FUZZ_RUNS=N FUZZ_SEED=S: a fixed number of inputs from a fixed seed instead (reproducible: what
# CI runs, so a run that passes here passes there); SECONDS still caps each target.
# New interesting inputs go to build/fuzz/corpus/<target>/ (not the repo). A crash fails the run
# and leaves its input in build/fuzz/artifacts/; fix the bug, then copy the input into
# tests/fuzz/corpus/<target>/ so the normal build's fuzz_replay_<target> test keeps it fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
shift || true
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(safetensors hf_config tokenizer run_config http_request beacon)
command -v clang++ >/dev/null || { echo "error: clang++ not found (scripts/setup.sh installs clang)" >&2; exit 1; }
CC=clang CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DGRPO_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/fuzz
mkdir -p build/fuzz/artifacts
status=0
for t in "${targets[@]}"; do
  mkdir -p "build/fuzz/corpus/$t"
  echo "== fuzz_$t for ${secs}s"
  if ! build/fuzz/tests/fuzz/fuzz_$t "build/fuzz/corpus/$t" "tests/fuzz/corpus/$t" \
       -max_total_time="$secs" ${FUZZ_RUNS:+-runs="$FUZZ_RUNS"} ${FUZZ_SEED:+-seed="$FUZZ_SEED"} -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -artifact_prefix="build/fuzz/artifacts/$t-" -print_final_stats=1 2>"build/fuzz/$t.log"; then
    echo "fuzz_$t FAILED: see build/fuzz/$t.log and build/fuzz/artifacts/" >&2
    tail -n 30 "build/fuzz/$t.log" >&2
    status=1
  else
    grep -E "stat::number_of_executed_units|cov:" "build/fuzz/$t.log" | tail -n 2
  fi
done
exit $status
