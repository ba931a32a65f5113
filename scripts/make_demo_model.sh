#!/usr/bin/env bash
# Regenerates the embedded demo model resources/models/tiny-arith (deterministic recipe):
#   1. scripts/make_demo_tokenizer.py writes a Qwen2-style byte-level BPE tokenizer (ChatML);
#   2. `grpo init-model` writes a randomly initialised Qwen2 checkpoint with that tokenizer;
#   3. `grpo sft` fully fine-tunes it on the arithmetic task of `grpo train --demo`, stopping
#      early on purpose: greedy accuracy lands between 20% and 60%, leaving room for RL.
# usage: scripts/make_demo_model.sh [OUTPUT_DIR]   (GRPO=path/to/grpo to pick the binary)
# Single-threaded (OMP_NUM_THREADS=1) so float reductions, and so the weights, do not depend on
# the machine's core count.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/resources/models/tiny-arith}
GRPO=${GRPO:-}
if [[ -z "$GRPO" ]]; then
  for b in "$ROOT/build/release/app/grpo" "$ROOT/build/main/app/grpo" "$ROOT/build/app/grpo"; do
    if [[ -x "$b" ]]; then GRPO=$b; break; fi
  done
fi
[[ -x "${GRPO:-}" ]] || { echo "error: grpo binary not found; build it or set GRPO=..." >&2; exit 1; }
GRPO=$(realpath "$GRPO")
OUT=$(realpath -m "$OUT")
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# Must match resources/presets/demo.yaml (task_difficulty, seed) so the SFT data is the
# training split of the problems `grpo train --demo` evaluates on.
DIFFICULTY=1
SEED=42

python3 "$ROOT/scripts/make_demo_tokenizer.py" "$WORK/tokenizer"

cat > "$WORK/config.json" <<'JSON'
{
  "architectures": ["Qwen2ForCausalLM"],
  "model_type": "qwen2",
  "vocab_size": 544,
  "hidden_size": 128,
  "intermediate_size": 384,
  "num_hidden_layers": 4,
  "num_attention_heads": 4,
  "num_key_value_heads": 2,
  "max_position_embeddings": 512,
  "rms_norm_eps": 1e-06,
  "rope_theta": 10000.0,
  "tie_word_embeddings": true,
  "initializer_range": 0.02,
  "bos_token_id": 532,
  "eos_token_id": 534,
  "torch_dtype": "float32"
}
JSON

"$GRPO" init-model --config "$WORK/config.json" --tokenizer "$WORK/tokenizer" --output "$WORK/init" --seed 1234

rm -rf "$OUT.tmp"
cd "$WORK"  # a relative --model keeps the temp path out of config.json's _name_or_path
"$GRPO" sft --model init --task arith --difficulty "$DIFFICULTY" --seed "$SEED" --full \
  --save-format checkpoint --output "$OUT.tmp" \
  --steps "${SFT_STEPS:-250}" --lr 3e-3 --lr-scheduler cosine --batch-size 64 --token-budget 256 \
  --set warmup_ratio=0.05 --set weight_decay=0.0 --set eval_size=200 \
  --logging-steps 25 --eval-steps 50

rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
du -b "$OUT"/* | sort -k2
echo "demo model written to $OUT"
