#!/usr/bin/env bash
# Prints this machine's ccache totals as two numbers, "HITS MISSES" (0 0 without ccache); with
# --since "HITS MISSES" (an earlier output), what happened since: "N hits, M misses".
# scripts/test.sh and scripts/check_fresh.sh take it before and after their builds, so a CI log
# shows whether its builds came from the cache (a cold cache is what makes a CI run long:
# BENCHMARKS.md, 'CI time'). Usage: scripts/ccache_stats.sh [--since "HITS MISSES"]
set -euo pipefail
totals() {
  if ! command -v ccache >/dev/null; then echo "0 0"; return; fi
  ccache --print-stats 2>/dev/null | awk '
  $1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" { hits += $2 }
  $1 == "cache_miss" { misses += $2 }
  END { printf "%d %d\n", hits, misses }'
}
if [ "${1:-}" = --since ]; then
  read -r hits0 misses0 <<<"${2:?--since needs the earlier output, \"HITS MISSES\"}"
  read -r hits1 misses1 <<<"$(totals)"
  echo "$((hits1 - hits0)) hits, $((misses1 - misses0)) misses"
else
  totals
fi
