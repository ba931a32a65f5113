// RolloutSource: where completions come from. The engine asks a source for G completions of a
// batch of prompts; the source samples with the newest policy version it has loaded from the
// bucket and says which version that was. The local generator (local_generator.h) implements it
// in-process; remote workers (core/cluster) implement it over HTTP. A source that fails throws
// grpo::Error; the engine logs it and retries, and never stops the run for it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/rollout/sampler.h"

namespace grpo::run {

struct RolloutRequest {
  int64_t group_id = 0;
  uint64_t prompt_key = 0;            // stable id of the prompt (the sampler's RNG stream)
  std::vector<int64_t> prompt_ids;
  int64_t n = 1;                      // completions wanted (num_generations)
};

struct RolloutResult {
  int64_t group_id = 0;
  std::vector<rollout::Completion> completions;  // n of them
  int64_t policy_version = 0;                    // the adapter version that produced them
  std::string source;                            // which source (for metrics and events)
  double duration_s = 0;
};

class RolloutSource {
public:
  virtual ~RolloutSource() = default;
  virtual std::string name() const = 0;
  // Generates every request with one policy version; blocking. Called by one engine thread at
  // a time per source.
  virtual std::vector<RolloutResult> generate(const std::vector<RolloutRequest>& requests,
                                              const rollout::SamplingParams& params) = 0;
  // A new version was published in the bucket at `adapter_dir`; the source takes it up before
  // its next generate(). Called from the trainer thread; must not block on generation.
  virtual void on_version_published(int64_t version, const std::string& adapter_dir) = 0;
  // The version this source's next group would carry, where it may lag the newest published one
  // (remote workers load a new adapter in their own time); nullopt: the newest. Admission counts
  // the lag (docs/formulas.md, "Admission"). Called from pipeline threads; must not block.
  virtual std::optional<int64_t> sampling_version() const { return std::nullopt; }
  // Generated tokens so far (for rollout/generated_tok_s).
  virtual int64_t tokens_generated() const = 0;
  // A retune changed max_staleness: a source that keeps several versions loaded keeps those the
  // trainer may still accept (docs/workers.md, "Adapter versions kept"). Called from the trainer
  // thread at a step boundary, before the next version is published; must not block.
  virtual void on_max_staleness(int64_t /*max_staleness*/) {}

  // Optional streaming form, for sources that keep many groups in flight and finish them in any
  // order (remote workers: a slow worker then delays only its own groups, not every batch).
  // stream() runs until hooks.stop() is true, asking next() for new groups while it has room,
  // handing each finished group to offer() (which may refuse it for now: the source keeps it and
  // offers it again) and each failed group to fail(). The engine uses stream() when streams().
  struct StreamHooks {
    std::function<std::optional<RolloutRequest>(rollout::SamplingParams* params)> next;
    std::function<bool(RolloutResult& result)> offer;
    std::function<void(int64_t group_id, const std::string& why)> fail;
    std::function<bool()> stop;
  };
  virtual bool streams() const { return false; }
  virtual void stream(const StreamHooks& /*hooks*/) {}
};

}  // namespace grpo::run
