// LocalGenerator: an in-process rollout source. It shares the trainer's base weights read-only
// (the same tensors, no copy) but holds its own LoRA adapter: the version it samples with,
// loaded from the bucket by name (adapters/policy-v<N>) exactly as a remote worker does.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "core/run/policy.h"
#include "core/run/rollout_source.h"

namespace grpo::run {

class LocalGenerator : public RolloutSource {
public:
  // `trainer_policy`: the trainer's model (base weights are aliased; its current adapter values
  // are copied as version `initial_version`).
  LocalGenerator(const Policy& trainer_policy, std::string name, int64_t initial_version = 0);

  std::string name() const override { return name_; }
  std::vector<RolloutResult> generate(const std::vector<RolloutRequest>& requests,
                                      const rollout::SamplingParams& params) override;
  void on_version_published(int64_t version, const std::string& adapter_dir) override;
  int64_t tokens_generated() const override { return tokens_.load(); }
  int64_t loaded_version() const { return loaded_version_; }

private:
  void take_up_new_version();

  std::string name_;
  model::CausalLM model_{nullptr};
  std::unique_ptr<rollout::Sampler> sampler_;
  std::shared_ptr<text::Tokenizer> tokenizer_;
  int64_t loaded_version_ = 0;
  std::mutex pending_mu_;
  int64_t pending_version_ = -1;
  std::string pending_dir_;
  std::atomic<int64_t> tokens_{0};
};

}  // namespace grpo::run
