// The ranges of the keys that the GRPO table (config.cpp) and the SFT table (core/run/
// sft_config.cpp) share: a key has one range wherever it appears, so a value one command accepts
// the other does not refuse. Keys whose meaning differs between the two (max_steps <= 0 and
// max_grad_norm <= 0 mean something in SFT, and token_budget 0 in GRPO) keep their own rows.
#pragma once

#include "core/grpo/choices.h"
#include "core/grpo/config_schema.h"

namespace grpo::grpo::shared_range {

inline ConfigRange lora_r() { return closed(1, 1024); }
inline ConfigRange lora_alpha() { return left_open(0, 1e6); }
inline ConfigRange lora_dropout() { return right_open(0, 1); }
inline ConfigRange learning_rate() { return left_open(0, 1); }
inline ConfigRange warmup_ratio() { return closed(0, 1); }
inline ConfigRange weight_decay() { return closed(0, 1); }
inline ConfigRange eval_size() { return closed(0, 100000); }
inline ConfigRange num_train_epochs() { return closed(1, 100000); }
inline ConfigRange lr_scheduler_type() { return one_of(kLrSchedules.names()); }
// Tokens in one packed row; GRPO also takes 0 (pad micro-batches instead), SFT always packs.
inline constexpr double kMaxTokenBudget = 1 << 24;

}  // namespace grpo::grpo::shared_range
