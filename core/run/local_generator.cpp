#include "core/run/local_generator.h"

#include <chrono>

#include <torch/torch.h>

#include "core/common/error.h"
#include "core/common/log.h"
#include "core/model/peft_io.h"

namespace grpo::run {

LocalGenerator::LocalGenerator(const Policy& trainer_policy, std::string name, int64_t initial_version)
    : name_(std::move(name)), tokenizer_(trainer_policy.tokenizer), loaded_version_(initial_version) {
  const auto& trainer = trainer_policy.model;
  model_ = model::CausalLM(model::CausalLMOptions(trainer->config())
                               .dtype(trainer->dtype())
                               .device(trainer->device())
                               .init_weights(false));
  // Alias the base weights: same storage, so the generator costs no second copy of the model.
  auto mine = model_->named_base_parameters();
  auto theirs = trainer->named_base_parameters();
  torch::NoGradGuard no_grad;
  for (const auto& kv : theirs) {
    torch::Tensor* p = mine.find(kv.key());
    check(p != nullptr, name_, "base parameter " + kv.key() + " missing in the generator's model");
    p->set_data(kv.value().detach());
  }
  if (trainer->has_lora()) {
    model_->add_lora(trainer->lora_config());
    auto dst = model_->named_lora_parameters();
    for (const auto& kv : trainer->named_lora_parameters()) dst[kv.key()].copy_(kv.value().detach());
  }
  model_->eval();
  sampler_ = std::make_unique<rollout::Sampler>(model_, tokenizer_.get());
}

void LocalGenerator::on_version_published(int64_t version, const std::string& adapter_dir) {
  std::lock_guard<std::mutex> lock(pending_mu_);
  if (version > pending_version_) {
    pending_version_ = version;
    pending_dir_ = adapter_dir;
  }
}

void LocalGenerator::take_up_new_version() {
  int64_t version;
  std::string dir;
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    version = pending_version_;
    dir = pending_dir_;
  }
  if (version <= loaded_version_) return;
  try {
    model::load_adapter_weights(*model_, dir);
    model_->eval();
    loaded_version_ = version;
  } catch (const Error& e) {
    // The version may already have left the bucket (retention): keep sampling with ours.
    log_warn(name_ + ": cannot load policy-v" + std::to_string(version) + ": " + e.what());
  }
}

std::vector<RolloutResult> LocalGenerator::generate(const std::vector<RolloutRequest>& requests,
                                                    const rollout::SamplingParams& params) {
  take_up_new_version();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<int64_t>> prompts;
  std::vector<uint64_t> keys;
  int64_t n = requests.empty() ? 1 : requests.front().n;
  for (const auto& r : requests) {
    check(r.n == n, name_, "all requests of one batch must ask for the same number of completions");
    prompts.push_back(r.prompt_ids);
    keys.push_back(r.prompt_key);
  }
  const int64_t before = sampler_->tokens_generated();
  auto groups = sampler_->generate(prompts, n, params, /*share_prefix=*/true, keys);
  tokens_ += sampler_->tokens_generated() - before;
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<RolloutResult> out;
  for (size_t i = 0; i < requests.size(); ++i)
    out.push_back({requests[i].group_id, std::move(groups[i]), loaded_version_, name_, dt});
  return out;
}

}  // namespace grpo::run
