#!/usr/bin/env bash
# Prints this machine's ccache totals as two numbers, "HITS MISSES" (0 0 without ccache).
# scripts/test.sh and scripts/check_fresh.sh take it before and after their builds and report the
# difference, so a CI log shows whether its builds came from the cache (a cold cache is what
# makes a CI run long: BENCHMARKS.md, 'CI time').
set -euo pipefail
if ! command -v ccache >/dev/null; then echo "0 0"; exit 0; fi
ccache --print-stats 2>/dev/null | awk '
  $1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" { hits += $2 }
  $1 == "cache_miss" { misses += $2 }
  END { printf "%d %d\n", hits, misses }'
