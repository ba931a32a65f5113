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
  // A run's config carries one r / lora_alpha / target list (TrainConfig), and a resumed run or a
  // generator rebuilds the adapter from it: an adapter whose plan differs module by module cannot
  // be carried that way yet, so it is refused here rather than trained and resumed as another one.
  check(lora.plain(), path_join(dir, model::kAdapterConfigName),
        "init_adapter: rank_pattern, alpha_pattern, layers_to_transform or a regex target_modules cannot be "
        "carried by a run's config yet (a resumed run would rebuild a different adapter)",
        "such adapters load for grpo export and serving; to train from one, start a fresh adapter");
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
