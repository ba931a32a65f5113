#!/usr/bin/env bash
# One command: install dependencies, build, and open the desktop app ready to train its embedded
# demo (asynchronous GRPO with LoRA on the tiny-arith model, resources/models/): click Start and
# watch reward and greedy eval accuracy rise. Without a display it runs the same demo headless in
# the terminal and writes PNG charts at the end. Extra arguments go to grpo-studio
# (e.g. --demo --steps 100 to start at once; --headless to force the terminal).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --demo          # build and run dependencies only (no test tools)
scripts/build.sh release grpo grpo-studio  # what the demo runs, not the tests
app=build/release/app/grpo-studio
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
  exec "$app" "$@"
fi
echo "demo: no display; running headless (for a window without a display: xvfb-run -a $app)"
exec "$app" --headless "$@"
