// Starting a run from a PEFT LoRA adapter made elsewhere (config key init_adapter): the adapter's
// own r / lora_alpha / target_modules / use_rslora replace the config's LoRA settings (so the
// resolved config.json says what is really trained), and its weights are loaded onto the policy.
// PEFT's checks apply (plain LoRA on the attention/MLP projections; shapes must fit the base).
// An adapter whose plan varies by module (rank_pattern, alpha_pattern, layers_to_transform, a
// regex target_modules) is refused: TrainConfig cannot carry it, so a resumed run would rebuild
// another adapter. Such adapters still load for export, inspect and workers (peft_io.h).
#pragma once

#include "core/grpo/config.h"
#include "core/run/policy.h"

namespace grpo::run {

// No-op when cfg.init_adapter is empty. Call before anything holds the adapter's parameters
// (the trainer's optimizer, generators). Throws grpo::Error naming the adapter directory.
void seed_from_init_adapter(Policy& policy, grpo::TrainConfig& cfg);

}  // namespace grpo::run
