#!/usr/bin/env bash
# One command: install dependencies, build, and run every test. Usage: scripts/test.sh [PRESET]
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
scripts/setup.sh
scripts/build.sh "$preset"
ctest --preset "$preset" -j2
