#include "core/run/sync_trainer.h"

#include <chrono>
#include <cmath>

#include <torch/torch.h>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/timing.h"
#include "core/common/log.h"
#include "core/grpo/advantages.h"
#include "core/model/peft_io.h"
#include "core/rollout/arith_task.h"
#include "core/rollout/dataset_source.h"
#include "core/rollout/reward_builtin.h"
#include "core/run/adapter_import.h"
#include "core/run/tensorboard.h"

namespace grpo::run {
namespace {

double mean_std(const std::vector<double>& v, double* std_out) {
  double s = 0, n = 0;
  for (double x : v)
    if (!std::isnan(x)) { s += x; n += 1; }
  const double m = n > 0 ? s / n : NAN;
  double var = 0;
  for (double x : v)
    if (!std::isnan(x)) var += (x - m) * (x - m);
  if (std_out) *std_out = n > 1 ? std::sqrt(var / (n - 1)) : 0.0;
  return m;
}

}  // namespace

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

double greedy_accuracy(Policy& policy, rollout::RewardSet& rewards, const std::vector<rollout::Example>& examples,
                       const grpo::TrainConfig& cfg, size_t limit, std::mutex* rewards_mutex) {
  const size_t n = limit > 0 ? std::min(examples.size(), limit) : examples.size();
  rollout::Sampler sampler(policy.model, policy.tokenizer.get());
  auto params = policy.sampling_params(cfg, 0);
  params.temperature = 0.0;  // greedy
  double correct = 0, scored = 0;
  const size_t chunk = 64;
  for (size_t s = 0; s < n; s += chunk) {
    const size_t e = std::min(n, s + chunk);
    std::vector<std::vector<int64_t>> prompts;
    for (size_t i = s; i < e; ++i) prompts.push_back(policy.encode_prompt(examples[i], cfg.max_prompt_length));
    auto out = sampler.generate(prompts, 1, params);
    std::vector<rollout::RewardInput> inputs;
    for (size_t i = s; i < e; ++i) {
      const auto& ids = out[i - s][0].token_ids;
      inputs.push_back({examples[i].prompt_text, policy.decode(ids), examples[i].answer, examples[i].metadata, ids});
    }
    std::unique_lock<std::mutex> lock;
    if (rewards_mutex) lock = std::unique_lock<std::mutex>(*rewards_mutex);
    // eval/accuracy is accuracy: the run's accuracy function, else the built-in one (never the
    // first reward's mean, which may be a format or length score).
    rollout::AccuracyReward builtin;
    rollout::RewardFunction* acc = rewards.accuracy_function();
    for (const auto& v : (acc ? acc : &builtin)->score(inputs))
      if (v && !std::isnan(*v)) { correct += *v; scored += 1; }
  }
  return scored > 0 ? correct / scored : NAN;
}

double SyncTrainer::evaluate(int64_t limit) {
  return greedy_accuracy(policy_, rewards_, data_.eval, cfg_, static_cast<size_t>(std::max<int64_t>(0, limit)));
}

std::map<std::string, double> SyncTrainer::one_step(int64_t step) {
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
  auto groups = sampler_->generate(prompts, G, params, /*share_prefix=*/true, keys);
  const double gen_s = seconds_since(t_gen);
  const double generated = static_cast<double>(sampler_->tokens_generated() - tokens_before);

  // Score every completion.
  const auto t_score = std::chrono::steady_clock::now();
  std::vector<rollout::RewardInput> inputs;
  std::vector<std::string> texts;
  for (size_t p = 0; p < examples.size(); ++p)
    for (const auto& c : groups[p]) {
      texts.push_back(policy_.decode(c.token_ids));
      inputs.push_back({examples[p].prompt_text, texts.back(), examples[p].answer, examples[p].metadata, c.token_ids});
    }
  auto scores = rewards_.score(inputs);
  const int64_t B = static_cast<int64_t>(inputs.size());
  const int64_t F = static_cast<int64_t>(scores.per_function.size());
  auto per_func = torch::empty({F, B}, torch::kFloat64);
  for (int64_t f = 0; f < F; ++f)
    for (int64_t b = 0; b < B; ++b) per_func[f][b] = scores.per_function[f][b];
  auto adv = grpo::compute_advantages(per_func, scores.weights, G, grpo::parse_scale_rewards(cfg_.scale_rewards, "scale_rewards"));
  const double score_s = seconds_since(t_score);

  std::vector<grpo::TrainSample> samples;
  for (int64_t b = 0; b < B; ++b) {
    const auto& c = groups[b / G][b % G];
    if (c.token_ids.empty()) continue;
    grpo::TrainSample s;
    s.prompt_ids = prompts[b / G];
    s.completion_ids = c.token_ids;
    s.old_logprobs = c.logprobs;
    s.advantage = adv.advantages[b].item<double>();
    s.truncated = c.finish_reason == "length";
    s.policy_version = version_;
    samples.push_back(std::move(s));
  }
  auto metrics = trainer_->step(samples);

  double reward_std = 0;
  metrics["reward"] = mean_std(std::vector<double>(adv.rewards.data_ptr<double>(), adv.rewards.data_ptr<double>() + B), nullptr);
  for (int64_t g = 0; g < adv.group_std.size(0); ++g) reward_std += adv.group_std[g].item<double>();
  metrics["reward_std"] = reward_std / static_cast<double>(adv.group_std.size(0));
  metrics["frac_reward_zero_std"] = adv.frac_reward_zero_std;
  for (int64_t f = 0; f < F; ++f) {
    double sd = 0;
    metrics["rewards/" + scores.names[f] + "/mean"] = mean_std(scores.per_function[f], &sd);
    metrics["rewards/" + scores.names[f] + "/std"] = sd;
  }
  metrics["perf/generate_s"] = gen_s;
  metrics["rollout/score_s"] = score_s;
  metrics["rollout/generated_tok_s"] = gen_s > 0 ? generated / gen_s : 0.0;
  metrics["sample/staleness_mean"] = 0.0;
  metrics["sample/staleness_max"] = 0.0;

  // A few traces per step, as TRL logs 8 per policy version.
  for (int64_t b = 0; b < std::min<int64_t>(B, 8); ++b) {
    const auto& c = groups[b / G][b % G];
    dir_.append_jsonl("samples.jsonl", {{"step", step},
                                        {"policy_version", version_},
                                        {"group", b / G},
                                        {"prompt", examples[b / G].prompt_text},
                                        {"completion", texts[b]},
                                        {"answer", examples[b / G].answer ? nlohmann::json(*examples[b / G].answer) : nlohmann::json()},
                                        {"reward", std::isnan(adv.rewards[b].item<double>()) ? nlohmann::json() : nlohmann::json(adv.rewards[b].item<double>())},
                                        {"advantage", adv.advantages[b].item<double>()},
                                        {"finish_reason", c.finish_reason}});
  }
  return metrics;
}

std::string SyncTrainer::run(const std::function<void(const StepReport&)>& on_step, const std::atomic<bool>* stop) {
  const auto t_start = std::chrono::steady_clock::now();
  const int64_t keep = cfg_.max_staleness + 2;
  auto publish = [&](int64_t version) {
    return dir_.publish_adapter(version, [&](const std::string& d) {
      model::save_adapter(*policy_.model, d, cfg_.model_name_or_path);
    }, keep);
  };
  dir_.append_jsonl("events.jsonl", {{"time", wall_time_s()}, {"event", "start"}, {"mode", "sync"}, {"max_steps", cfg_.max_steps}});
  auto last_end = std::chrono::steady_clock::now();
  bool unpublished = false;
  TensorBoardWriter tensorboard(dir_.root());  // events.out.tfevents.* beside metrics.jsonl
  for (int64_t step = 1; step <= cfg_.max_steps; ++step) {
    if (stop && stop->load()) {
      dir_.append_jsonl("events.jsonl", {{"time", wall_time_s()}, {"event", "stop"}, {"step", step - 1}});
      break;
    }
    auto metrics = one_step(step);
    unpublished = true;
    if (step % cfg_.weight_sync_steps == 0) {
      const auto t_sync = std::chrono::steady_clock::now();
      publish(++version_);
      unpublished = false;
      metrics["perf/weight_sync_s"] = seconds_since(t_sync);
    }
    if (cfg_.eval_steps > 0 && !data_.eval.empty() && (step % cfg_.eval_steps == 0 || step == cfg_.max_steps))
      metrics["eval/accuracy"] = evaluate(cfg_.eval_size);
    const auto now = std::chrono::steady_clock::now();
    metrics["perf/step_s"] = std::chrono::duration<double>(now - last_end).count();
    last_end = now;
    metrics["epoch"] = static_cast<double>(stream_->epoch());
    nlohmann::json rec = {{"step", step}, {"time", wall_time_s()}, {"policy_version", version_}};
    for (const auto& [k, v] : metrics) rec[k] = std::isfinite(v) ? nlohmann::json(v) : nlohmann::json();
    dir_.append_jsonl("metrics.jsonl", rec);
    tensorboard.log_metrics(rec);
    if (on_step) on_step({step, cfg_.max_steps, seconds_since(t_start), version_, metrics, "", ""});
  }
  // The final weights are always a published version, and a copy stays in <run>/adapter.
  if (unpublished || version_ == 0) publish(++version_);
  const std::string final_dir = dir_.adapter_dir(version_);
  model::save_adapter(*policy_.model, dir_.path("adapter"), cfg_.model_name_or_path);
  dir_.append_jsonl("events.jsonl", {{"time", wall_time_s()}, {"event", "finished"}, {"policy_version", version_}, {"adapter", dir_.path("adapter")}});
  return final_dir;
}

}  // namespace grpo::run
