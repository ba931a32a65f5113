#include "core/run/policy.h"

#include <algorithm>

#include <torch/torch.h>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/log.h"
#include "core/model/weights.h"

namespace grpo::run {

model::LoraConfig lora_config_from(const grpo::TrainConfig& cfg) {
  model::LoraConfig lc;
  lc.r = cfg.r;
  lc.lora_alpha = cfg.lora_alpha;
  lc.lora_dropout = cfg.lora_dropout;
  lc.use_rslora = cfg.use_rslora;
  if (cfg.target_modules.is_string()) lc.target_modules = {cfg.target_modules.get<std::string>()};
  else lc.target_modules = cfg.target_modules.get<std::vector<std::string>>();
  lc.validate("config");
  return lc;
}

namespace {
void add_unique(std::vector<int64_t>& v, int64_t x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}
}  // namespace

Policy load_policy(const grpo::TrainConfig& cfg, bool with_lora) {
  Policy p;
  p.model_dir = cfg.model_name_or_path;
  const torch::Device device = torch::cuda::is_available() ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  p.model = model::from_pretrained(p.model_dir, model::default_compute_dtype(device), device);
  p.tokenizer = std::make_shared<text::Tokenizer>(text::Tokenizer::load(p.model_dir));
  if (with_lora) p.model->add_lora(lora_config_from(cfg));

  for (int64_t id : p.model->config().eos_token_ids) add_unique(p.stop_token_ids, id);
  const std::string gen = path_join(p.model_dir, "generation_config.json");
  if (file_exists(gen)) {
    auto j = nlohmann::json::parse(read_file(gen), nullptr, false);
    if (j.is_object() && j.contains("eos_token_id")) {
      const auto& e = j["eos_token_id"];
      if (e.is_number_integer()) add_unique(p.stop_token_ids, e.get<int64_t>());
      else if (e.is_array())
        for (const auto& x : e)
          if (x.is_number_integer()) add_unique(p.stop_token_ids, x.get<int64_t>());
    }
  }
  if (auto eos = p.tokenizer->eos_id()) add_unique(p.stop_token_ids, *eos);
  if (p.tokenizer->chat_template()) {
    try {
      p.tokenizer->apply_chat_template({{"user", "x"}}, true);
      p.chat = true;
      if (auto end = p.tokenizer->token_to_id("<|im_end|>")) add_unique(p.stop_token_ids, *end);
      if (auto end = p.tokenizer->token_to_id("<|eot_id|>")) add_unique(p.stop_token_ids, *end);
    } catch (const Error& e) {
      log_warn(std::string("chat template not supported, using plain prompts: ") + e.what());
    }
  }
  return p;
}

std::vector<int64_t> Policy::encode_prompt(const rollout::Example& ex, int64_t max_prompt_length) const {
  std::string text;
  if (chat) {
    std::vector<text::ChatMessage> messages;
    if (ex.messages && ex.messages->is_array()) {
      for (const auto& m : *ex.messages)
        messages.push_back({m.value("role", "user"), m.value("content", "")});
    } else {
      messages.push_back({"user", ex.prompt_text});
    }
    text = tokenizer->apply_chat_template(messages, /*add_generation_prompt=*/true);
  } else {
    text = ex.prompt_text;
  }
  auto ids32 = tokenizer->encode(text, /*add_special_tokens=*/!chat);
  std::vector<int64_t> ids(ids32.begin(), ids32.end());
  if (max_prompt_length > 0 && static_cast<int64_t>(ids.size()) > max_prompt_length)
    ids.erase(ids.begin(), ids.end() - max_prompt_length);  // keep the end: the question and the turn marker
  return ids;
}

std::string Policy::decode(const std::vector<int64_t>& ids, bool skip_special) const {
  std::vector<int32_t> v(ids.begin(), ids.end());
  return tokenizer->decode(v, skip_special);
}

rollout::SamplingParams Policy::sampling_params(const grpo::TrainConfig& cfg, uint64_t seed) const {
  rollout::SamplingParams s;
  s.temperature = cfg.temperature;
  s.top_p = cfg.top_p;
  s.top_k = cfg.top_k;
  s.min_p = cfg.min_p;
  s.max_tokens = cfg.max_completion_length;
  s.stop_token_ids = stop_token_ids;
  s.stop = cfg.stop;
  s.seed = seed;
  return s;
}

}  // namespace grpo::run
