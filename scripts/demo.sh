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
echo "last-position logits for ids 1,2,3 (first 8 of $( "$grpo" inspect model --json "$model" | python3 -c 'import json,sys; print(json.load(sys.stdin)["vocab_size"])')):"
"$grpo" inspect logits --model "$model" --ids 1,2,3 --last |
  python3 -c 'import json,sys; print([round(x, 4) for x in json.load(sys.stdin)["logits"][0][:8]])'
