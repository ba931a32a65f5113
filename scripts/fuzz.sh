#!/usr/bin/env bash
# Fuzzes every parser of untrusted input with libFuzzer (clang, ASan, UBSan) for a bounded time.
# usage: scripts/fuzz.sh [SECONDS_PER_TARGET=60] [TARGET...]
# FUZZ_RUNS=N FUZZ_SEED=S: a fixed number of inputs from a fixed seed instead (reproducible: what
# CI runs, so a run that passes here passes there); SECONDS still caps each target.
# FUZZ_BUILD_DIR=DIR: the clang build directory (default build/fuzz; called B below).
# New interesting inputs go to B/corpus/<target>/ (not the repo). A crash fails the run
# and leaves its input in B/artifacts/; fix the bug, then copy the input into
# tests/fuzz/corpus/<target>/ so the normal build's fuzz_replay_<target> test keeps it fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
shift || true
targets=("$@")
B="${FUZZ_BUILD_DIR:-build/fuzz}"
[[ ${#targets[@]} -gt 0 ]] || targets=(safetensors hf_config tokenizer chat_template run_config http_request beacon reward_protocol parquet math_answer)
command -v clang++ >/dev/null || { echo "error: clang++ not found (scripts/setup.sh installs clang)" >&2; exit 1; }
CC=clang CXX=clang++ cmake -S . -B "$B" -G Ninja -DGRPO_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$B"
mkdir -p "$B/artifacts"
status=0
for t in "${targets[@]}"; do
  mkdir -p "$B/corpus/$t"
  # JSON parsers get inputs large and deep enough to reach nesting limits (1 MiB, a bracket dictionary).
  extra=(-max_len=65536)
  case "$t" in
    hf_config|tokenizer|run_config|http_request|beacon|reward_protocol|safetensors)
      extra=(-max_len=1048576 -dict=tests/fuzz/json.dict) ;;
  esac
  echo "== fuzz_$t for ${secs}s"
  if ! "$B/tests/fuzz/fuzz_$t" "$B/corpus/$t" "tests/fuzz/corpus/$t" \
       -max_total_time="$secs" ${FUZZ_RUNS:+-runs="$FUZZ_RUNS"} ${FUZZ_SEED:+-seed="$FUZZ_SEED"} -timeout=10 -rss_limit_mb=2048 "${extra[@]}" \
       -artifact_prefix="$B/artifacts/$t-" -print_final_stats=1 2>"$B/$t.log"; then
    echo "fuzz_$t FAILED: see $B/$t.log and $B/artifacts/" >&2
    tail -n 30 "$B/$t.log" >&2
    status=1
  else
    grep -E "stat::number_of_executed_units|cov:" "$B/$t.log" | tail -n 2
  fi
done
exit $status
