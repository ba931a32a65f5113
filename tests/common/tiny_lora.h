// Fixtures of the trainer tests (test_trainer, test_device, test_learning): a tiny Qwen2-style
// model with a LoRA adapter whose every factor is non-zero, and GRPO samples whose behaviour
// log-probs sit near the model's own (ratios close to 1, a few clipped).
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "core/grpo/trainer.h"
#include "core/model/causal_lm.h"
#include "tests/common/tiny_model.h"

namespace grpo::testing {

struct TinyLora {
  int64_t vocab = 40, hidden = 16;
  int64_t r = 2;
  double lora_alpha = 4;
  double init_std = 0.2;  // base weights
  double lora_std = 0.3;  // both factors (B != 0, so every factor has a gradient)
  uint64_t seed = 42;
};

inline ::grpo::model::CausalLM tiny_lora_model(const TinyLora& t = {}, torch::Dtype dtype = torch::kFloat32,
                                               torch::Device device = torch::kCPU) {
  namespace model = ::grpo::model;
  torch::manual_seed(t.seed);
  model::CausalLM m(model::CausalLMOptions(tiny_qwen2_config(t.vocab, t.hidden)).dtype(dtype).device(device));
  m->init_weights(t.init_std);
  model::LoraConfig lc;
  lc.r = t.r;
  lc.lora_alpha = t.lora_alpha;
  m->add_lora(lc);
  torch::NoGradGuard ng;
  for (auto& p : m->lora_parameters()) p.normal_(0, t.lora_std);
  return m;
}

struct SampleSpec {
  std::vector<int64_t> prompt, completion;
  double advantage = 0;
};

// One sample per spec; old_logprobs = the model's log-probs (temperature 1) of the completion
// tokens plus -0.05, 0, +0.05 in turn, as a slightly stale batch has.
inline std::vector<::grpo::grpo::TrainSample> samples_near_policy(::grpo::model::CausalLM& m,
                                                                  const std::vector<SampleSpec>& specs) {
  std::vector<::grpo::grpo::TrainSample> out;
  torch::NoGradGuard ng;
  for (const auto& spec : specs) {
    ::grpo::grpo::TrainSample s;
    s.prompt_ids = spec.prompt;
    s.completion_ids = spec.completion;
    std::vector<int64_t> full = spec.prompt;
    full.insert(full.end(), spec.completion.begin(), spec.completion.end());
    auto ids = torch::tensor(full, torch::kInt64).unsqueeze(0).to(m->device());  // (1, T)
    auto lp = torch::log_softmax(m->forward(ids)[0], -1).to(torch::kCPU);        // (T, V)
    const int64_t p = int64_t(spec.prompt.size());
    for (size_t t = 0; t < spec.completion.size(); ++t)
      s.old_logprobs.push_back(lp[p - 1 + int64_t(t)][spec.completion[t]].item<float>() +
                               0.05f * float(int(t % 3) - 1));
    s.advantage = spec.advantage;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace grpo::testing
