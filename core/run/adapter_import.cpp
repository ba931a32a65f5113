// init_adapter: adopt a PEFT adapter's LoRA settings and weights at the start of a run.
#include "core/run/adapter_import.h"

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/log.h"
#include "core/model/peft_io.h"

namespace grpo::run {

void seed_from_init_adapter(Policy& policy, grpo::TrainConfig& cfg) {
  if (cfg.init_adapter.empty()) return;
  const std::string& dir = cfg.init_adapter;
  check(is_directory(dir), "init_adapter", dir + " is not a directory",
        "give a PEFT adapter folder (adapter_config.json + adapter_model.safetensors)");
  const model::LoraConfig lora = model::read_adapter_config(dir);
  const auto fresh = lora_config_from(cfg);
  if (fresh.r != lora.r || fresh.scaling() != lora.scaling() || fresh.resolved_targets() != lora.resolved_targets())
    log_warn("init_adapter " + dir + ": its r " + std::to_string(lora.r) + ", lora_alpha " +
             std::to_string(lora.lora_alpha) + " and target_modules replace the config's (r " +
             std::to_string(fresh.r) + ", lora_alpha " + std::to_string(fresh.lora_alpha) + ")");
  model::load_adapter(*policy.model, dir);  // replaces the fresh adapter; checks names and shapes
  cfg.r = lora.r;
  cfg.lora_alpha = lora.lora_alpha;
  cfg.lora_dropout = lora.lora_dropout;
  cfg.use_rslora = lora.use_rslora;
  cfg.target_modules = lora.resolved_targets();
  log_info("init_adapter: started from " + dir);
}

}  // namespace grpo::run
