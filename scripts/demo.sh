#!/usr/bin/env bash
# One command: install dependencies, build, and run the app's main job on its embedded demo:
# asynchronous GRPO with LoRA on the tiny-arith model (resources/models/), watching reward and
# greedy eval accuracy rise. Extra arguments go to `grpo train` (e.g. --steps 100).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release
exec build/release/app/grpo train --demo "$@"
