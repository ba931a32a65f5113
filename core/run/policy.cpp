#include "core/run/policy.h"

#include <algorithm>

#include <torch/torch.h>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/log.h"
#include "core/hub/hf_cache.h"
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
  const hub::ResolvedRepo repo = hub::resolve_repo(cfg.model_name_or_path, cfg.model_revision);  // dir or Hub cache
  p.model_dir = repo.dir;
  p.model_commit = repo.commit;
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
  // The chat template parsed when the tokenizer loaded (a broken one is an error there).
  p.chat_template_kwargs = nlohmann::ordered_json(cfg.chat_template_kwargs);
  if (p.chat()) {
    for (const char* t : {"<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>"})
      if (auto end = p.tokenizer->token_to_id(t)) add_unique(p.stop_token_ids, *end);
  }
  return p;
}

bool Policy::chat() const { return tokenizer && tokenizer->chat() != nullptr; }

std::vector<int64_t> Policy::encode_prompt(const rollout::Example& ex, int64_t max_prompt_length) const {
  // TRL (maybe_apply_chat_template, then the tokenizer with add_special_tokens=False): a
  // conversational example goes through the chat template; a plain string prompt is used as is.
  std::string text = ex.prompt_text;
  if (ex.messages) {
    const text::ChatTemplate* t = tokenizer->chat();
    if (!t)
      throw Error(model_dir, "example " + std::to_string(ex.index) + " is a conversation but the model has no chat template",
                  "give plain-text prompts, or use a model whose tokenizer_config.json has a chat_template");
    text = t->render_prompt(nlohmann::ordered_json(*ex.messages), chat_template_kwargs);
  }
  auto ids32 = tokenizer->encode(text, /*add_special_tokens=*/false);
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

rollout::GreedyEval Policy::greedy_eval(rollout::SamplingParams params, int64_t max_prompt_length) const {
  rollout::GreedyEval how;
  how.encode = [this, max_prompt_length](const rollout::Example& ex) { return encode_prompt(ex, max_prompt_length); };
  how.decode = [this](const std::vector<int64_t>& ids) { return decode(ids); };
  how.params = std::move(params);
  return how;
}

}  // namespace grpo::run
