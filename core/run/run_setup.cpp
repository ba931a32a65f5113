#include "core/run/run_setup.h"

#include <algorithm>

#include <torch/torch.h>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/rollout/arith_task.h"
#include "core/rollout/sampler.h"
#include "core/run/adapter_import.h"

namespace grpo::run {

RunSetup prepare_run(grpo::TrainConfig cfg, bool fresh_start) {
  RunSetup s;
  s.policy = load_policy(cfg);
  check_fits_context(s.policy, cfg, "config");
  if (fresh_start) seed_from_init_adapter(s.policy, cfg);  // before the trainer holds the adapter
  torch::manual_seed(static_cast<uint64_t>(cfg.seed));
  s.config = std::make_shared<const grpo::TrainConfig>(std::move(cfg));
  const grpo::TrainConfig& c = *s.config;
  s.trainer = std::make_unique<grpo::GrpoTrainer>(s.policy.model, s.config);
  s.data = load_examples(c);
  check(!s.data.train.empty(), "dataset", "no training examples");
  s.stream = std::make_unique<rollout::DatasetStream>(s.data.train, static_cast<uint64_t>(c.resolved_data_seed()));
  s.rewards = rollout::RewardSet::from_json(c.reward_funcs, c.reward_weights);
  return s;
}

void write_resolved_config(const RunDirectory& dir, const grpo::TrainConfig& cfg, const Policy& policy) {
  nlohmann::json resolved = cfg.to_json();
  resolved["output_dir"] = dir.root();
  if (!policy.model_commit.empty()) resolved["model_revision"] = policy.model_commit;  // the Hub snapshot, pinned
  if (!cfg.dataset_name.empty())  // the dataset's snapshot too, so the run can be reproduced
    if (auto c = rollout::dataset_commit(dataset_ref(cfg, cfg.dataset_train_split)); !c.empty()) resolved["dataset_revision"] = c;
  dir.write_config(resolved);
}

void check_fits_context(const Policy& policy, const grpo::TrainConfig& cfg, const std::string& source) {
  const int64_t context = policy.model->config().max_position_embeddings;
  if (context <= 0) return;
  check(cfg.max_completion_length < context, source,
        "max_completion_length " + std::to_string(cfg.max_completion_length) +
            " leaves no room for a prompt in the model's context (max_position_embeddings " + std::to_string(context) + ")",
        "use at most " + std::to_string(context - 1));
}

rollout::DatasetRef dataset_ref(const grpo::TrainConfig& cfg, const std::string& split) {
  rollout::DatasetRef ref;
  ref.name = cfg.dataset_name;
  ref.config = cfg.dataset_config;
  ref.split = split;
  ref.revision = cfg.dataset_revision;
  ref.columns = cfg.dataset_columns;
  return ref;
}

rollout::DatasetSplit load_examples(const grpo::TrainConfig& cfg) {
  std::vector<rollout::Example> all;
  if (cfg.task == "arith") {
    all = rollout::arith_examples(
        rollout::ArithOptions::difficulty(static_cast<int>(cfg.task_difficulty), static_cast<uint64_t>(cfg.resolved_data_seed())),
        20000);
  } else if (!cfg.dataset_name.empty()) {
    all = rollout::load_dataset_ref(dataset_ref(cfg, cfg.dataset_train_split));
  } else if (!cfg.dataset_columns.empty() || is_directory(cfg.train_file)) {
    auto ref = dataset_ref(cfg, cfg.dataset_train_split);
    ref.name = cfg.train_file;
    all = rollout::load_dataset_ref(ref);
  } else {
    all = rollout::load_dataset(cfg.train_file);
  }
  if (!cfg.eval_file.empty()) return {std::move(all), rollout::load_dataset(cfg.eval_file)};
  if (!cfg.dataset_test_split.empty()) {
    auto ref = dataset_ref(cfg, cfg.dataset_test_split);
    if (cfg.dataset_name.empty()) ref.name = cfg.train_file;  // a folder or repo given as train_file
    return {std::move(all), rollout::load_dataset_ref(ref)};
  }
  rollout::SplitOptions so;
  so.eval_fraction = cfg.eval_fraction;
  so.eval_size = cfg.eval_size;
  if (cfg.task == "arith" && so.eval_fraction == 0 && so.eval_size == 0) so.eval_size = 200;
  so.seed = static_cast<uint64_t>(cfg.resolved_data_seed());
  return rollout::split_eval(std::move(all), so);
}


double eval_accuracy(Policy& policy, rollout::RewardSet& rewards, const std::vector<rollout::Example>& examples,
                     const grpo::TrainConfig& cfg, int64_t limit, std::mutex* rewards_mutex) {
  rollout::Sampler sampler(policy.model, policy.tokenizer.get());
  auto how = policy.greedy_eval(policy.sampling_params(cfg, 0), cfg.max_prompt_length);
  how.rewards = &rewards;
  how.rewards_mutex = rewards_mutex;
  return rollout::greedy_accuracy(sampler, examples, static_cast<size_t>(std::max<int64_t>(0, limit)), how);
}

}  // namespace grpo::run
