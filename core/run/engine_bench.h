// Benchmarks of the run layer:
//  - `grpo bench async`: the async engine against the synchronous loop on the same model, task
//    and step count, in one run: wall time to N steps, the trainer's idle fraction (time waiting
//    for rollouts over step time) and generation's idle fraction (time blocked on full queues,
//    or, in the sync loop, time spent training, over wall time).
//  - `grpo bench weight-sync`: publication cost of one adapter version (save + SHA256SUMS +
//    atomic rename) and its bytes for several LoRA ranks, against the full model's size.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace grpo::run {

struct AsyncBenchOptions {
  std::string model_dir;        // a model with a tokenizer (the demo model)
  std::string size;             // "" = model_dir as is; "25m" = a random ~25M model with its tokenizer
  int64_t steps = 12;
  int generators = 1;
  int64_t max_completion_length = 16;
};
nlohmann::json bench_async(const AsyncBenchOptions& options);

struct WeightSyncBenchOptions {
  std::string model_dir;
  std::string size;             // as above
  std::vector<int64_t> ranks = {1, 8, 64};
  int repeats = 5;
};
nlohmann::json bench_weight_sync(const WeightSyncBenchOptions& options);

}  // namespace grpo::run
