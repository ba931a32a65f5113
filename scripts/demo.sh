#!/usr/bin/env bash
# One command: install dependencies, build, and run the app's main job on its embedded demo.
# Until the demo model and the desktop app land, the main job is inspecting a Hugging Face
# checkpoint and computing its logits (the tiny Qwen2 model the tests use).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release
grpo=build/release/app/grpo
model=tests/data/golden/models/qwen2-tied-bf16
"$grpo" inspect model "$model"
echo "Next-token logits after ids 1,2,3 (JSON, first 200 characters):"
"$grpo" inspect logits --model "$model" --ids 1,2,3 --last | cut -c1-200
