#include "core/run/sync_trainer.h"

#include <chrono>
#include <cmath>

#include <torch/torch.h>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/timing.h"
#include "core/common/log.h"
#include "core/grpo/advantages.h"
#include "core/model/flops.h"
#include "core/model/peft_io.h"
#include "core/rollout/arith_task.h"
#include "core/rollout/dataset_source.h"
#include "core/run/adapter_import.h"
#include "core/run/step_assembler.h"
#include "core/run/step_logger.h"
#include "core/run/throughput_advisor.h"

namespace grpo::run {

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
    all = rollout::arith_examples(rollout::ArithOptions::difficulty(static_cast<int>(cfg.task_difficulty), static_cast<uint64_t>(cfg.seed)), 20000);
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
  so.seed = static_cast<uint64_t>(cfg.seed);
  return rollout::split_eval(std::move(all), so);
}

SyncTrainer::SyncTrainer(grpo::TrainConfig cfg, const std::string& run_dir)
    : cfg_(std::move(cfg)), dir_(run_dir), policy_(load_policy(cfg_)) {
  seed_from_init_adapter(policy_, cfg_);  // before the trainer holds the adapter
  torch::manual_seed(static_cast<uint64_t>(cfg_.seed));
  data_ = load_examples(cfg_);
  check(!data_.train.empty(), "dataset", "no training examples");
  stream_ = std::make_unique<rollout::DatasetStream>(data_.train, static_cast<uint64_t>(cfg_.seed));
  rewards_ = rollout::RewardSet::from_json(cfg_.reward_funcs, cfg_.reward_weights);
  sampler_ = std::make_unique<rollout::Sampler>(policy_.model, policy_.tokenizer.get());
  trainer_ = std::make_unique<grpo::GrpoTrainer>(policy_.model, cfg_);
  nlohmann::json resolved = cfg_.to_json();
  resolved["output_dir"] = run_dir;
  if (!policy_.model_commit.empty()) resolved["model_revision"] = policy_.model_commit;  // the Hub snapshot, pinned
  if (!cfg_.dataset_name.empty())  // the dataset's snapshot too, so the run can be reproduced
    if (auto c = rollout::dataset_commit(dataset_ref(cfg_, cfg_.dataset_train_split)); !c.empty()) resolved["dataset_revision"] = c;
  dir_.write_config(resolved);
}

SyncTrainer::~SyncTrainer() = default;

double eval_accuracy(Policy& policy, rollout::RewardSet& rewards, const std::vector<rollout::Example>& examples,
                     const grpo::TrainConfig& cfg, int64_t limit, std::mutex* rewards_mutex) {
  rollout::Sampler sampler(policy.model, policy.tokenizer.get());
  auto how = policy.greedy_eval(policy.sampling_params(cfg, 0), cfg.max_prompt_length);
  how.rewards = &rewards;
  how.rewards_mutex = rewards_mutex;
  return rollout::greedy_accuracy(sampler, examples, static_cast<size_t>(std::max<int64_t>(0, limit)), how);
}

double SyncTrainer::evaluate(int64_t limit) {
  return eval_accuracy(policy_, rewards_, data_.eval, cfg_, limit);
}

// One synchronous step: generate every group with the current weights, score them together,
// train. Returns the step's report (without its timing, which run() adds).
StepReport SyncTrainer::one_step(int64_t step) {
  const int64_t G = cfg_.num_generations;
  auto examples = stream_->next_batch(cfg_.prompts_per_step);
  std::vector<std::vector<int64_t>> prompts;
  std::vector<uint64_t> keys;
  for (const auto& ex : examples) {
    prompts.push_back(policy_.encode_prompt(ex, cfg_.max_prompt_length));
    keys.push_back(static_cast<uint64_t>(ex.index));
  }
  const auto t_gen = std::chrono::steady_clock::now();
  const int64_t tokens_before = sampler_->tokens_generated();
  auto params = policy_.sampling_params(cfg_, static_cast<uint64_t>(cfg_.seed) * 1000003ULL + static_cast<uint64_t>(step));
  auto completions = sampler_->generate(prompts, G, params, /*share_prefix=*/true, keys);
  const double gen_s = seconds_since(t_gen);
  const double generated = static_cast<double>(sampler_->tokens_generated() - tokens_before);

  const auto t_score = std::chrono::steady_clock::now();
  std::vector<ScoredGroup> groups(examples.size());
  std::vector<ScoredGroup*> to_score;
  for (size_t p = 0; p < examples.size(); ++p) {
    groups[p].group_id = static_cast<int64_t>(p);
    groups[p].example = examples[p];
    groups[p].prompt_ids = prompts[p];
    groups[p].result.completions = std::move(completions[p]);
    groups[p].result.policy_version = version_;
    to_score.push_back(&groups[p]);
  }
  // The whole step is scored together ("batch" scaling spans it).
  score_groups(policy_, rewards_, grpo::parse_scale_rewards(cfg_.scale_rewards, "scale_rewards"), to_score);
  const double score_s = seconds_since(t_score);

  AssembledStep assembled = assemble_step(step, std::vector<const ScoredGroup*>(to_score.begin(), to_score.end()));
  auto metrics = trainer_->step(assembled.samples);
  for (const auto& [k, v] : assembled.metrics) metrics[k] = v;
  metrics["perf/generate_s"] = gen_s;
  metrics["rollout/score_s"] = score_s;
  metrics["rollout/generated_tok_s"] = gen_s > 0 ? generated / gen_s : 0.0;
  metrics["sample/staleness_mean"] = 0.0;
  metrics["sample/staleness_max"] = 0.0;
  StepReport report{step, cfg_.max_steps, 0, version_, std::move(metrics), "", ""};
  report.samples = std::move(assembled.traces);
  return report;
}

std::string SyncTrainer::run(const std::function<void(const StepReport&)>& on_step, const std::atomic<bool>* stop) {
  const auto t_start = std::chrono::steady_clock::now();
  auto publish = [&](int64_t version) {
    return dir_.publish_adapter(version, [&](const std::string& d) {
      model::save_adapter(*policy_.model, d, cfg_.model_name_or_path);
    }, RunDirectory::keep_versions(cfg_.max_staleness));
  };
  bool measured = false;
  const double peak = model::mfu_peak_flops(cfg_.mfu_peak_tflops, policy_.model->device(), policy_.model->dtype(), &measured);
  dir_.append_event({{"time", wall_time_s()}, {"event", "start"}, {"mode", "sync"}, {"max_steps", cfg_.max_steps},
                     {"mfu_peak_tflops", peak / 1e12}, {"mfu_peak", measured ? "measured" : "mfu_peak_tflops"}});
  auto last_end = std::chrono::steady_clock::now();
  bool unpublished = false;
  StepLogger logger(dir_);
  for (int64_t step = 1; step <= cfg_.max_steps; ++step) {
    if (stop && stop->load()) {
      dir_.append_event({{"time", wall_time_s()}, {"event", "stop"}, {"step", step - 1}});
      break;
    }
    StepReport report = one_step(step);
    unpublished = true;
    if (step % cfg_.weight_sync_steps == 0) {
      const auto t_sync = std::chrono::steady_clock::now();
      publish(++version_);
      unpublished = false;
      report.metrics["perf/weight_sync_s"] = seconds_since(t_sync);
    }
    report.policy_version = version_;
    if (cfg_.eval_steps > 0 && !data_.eval.empty() && (step % cfg_.eval_steps == 0 || step == cfg_.max_steps))
      report.metrics["eval/accuracy"] = evaluate(cfg_.eval_size);
    const auto now = std::chrono::steady_clock::now();
    report.metrics["perf/step_s"] = std::chrono::duration<double>(now - last_end).count();
    last_end = now;
    add_mfu(report.metrics, peak);
    report.metrics["epoch"] = static_cast<double>(stream_->epoch());
    report.elapsed_s = seconds_since(t_start);
    logger.log(report);
    if (on_step) on_step(report);
  }
  // The final weights are always a published version, and a copy stays in <run>/adapter.
  if (unpublished || version_ == 0) publish(++version_);
  const std::string final_dir = dir_.adapter_dir(version_);
  model::save_adapter(*policy_.model, dir_.path("adapter"), cfg_.model_name_or_path);
  dir_.append_event({{"time", wall_time_s()}, {"event", "finished"}, {"policy_version", version_}, {"adapter", dir_.path("adapter")}});
  return final_dir;
}

}  // namespace grpo::run
