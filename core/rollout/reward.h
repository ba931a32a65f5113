// Reward functions: the one interface every reward implements, the registry that builds rewards
// by name from a JSON spec, and RewardSet, which scores a batch with several functions at once.
//
// A reward scores a batch of (prompt, completion, answer, metadata) samples. It may return None
// (std::nullopt) for a sample it cannot score; RewardSet turns None into NaN, the value
// grpo::grpo::compute_advantages expects in its (F, B) per-function tensor (docs/formulas.md,
// "Rewards": rewards are summed with nansum; a sample every function returned None for is
// unscorable).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace grpo::rollout {

// One sample to score. `metadata` is a JSON object holding the dataset's extra columns.
struct RewardInput {
  std::string prompt;
  std::string completion;
  std::optional<std::string> answer;
  nlohmann::json metadata = nlohmann::json::object();
  // The completion's token ids as sampled (rewards that count tokens read these; empty for an
  // empty completion, or when the caller has none: such rewards then return None).
  std::vector<int64_t> completion_ids = {};
};

// Receives fault events of a reward (the shape of one line of a run's events file, without
// "time"/"step": {"event": "reward_timeout", "severity", "message", "advice", ...}). Called on the
// scoring thread.
using RewardEventSink = std::function<void(const nlohmann::json& event)>;

class RewardFunction {
public:
  virtual ~RewardFunction() = default;
  // Rewards that can fail at run time (external programs) report faults here; others ignore it.
  virtual void set_event_sink(RewardEventSink) {}
  // The name metrics use: "rewards/<name>/mean" (docs/formulas.md, "Reward metrics").
  virtual std::string name() const = 0;
  // True for a 1/0 verdict on the sample's answer (accuracy, accuracy_reward, ...): eval/accuracy
  // is the mean of the first such function of a run's set (RewardSet::accuracy_function).
  virtual bool measures_accuracy() const { return false; }
  // One value per input, in order; std::nullopt = this function cannot score that sample.
  virtual std::vector<std::optional<double>> score(const std::vector<RewardInput>& batch) = 0;
};

// ---- registry ----
// make_reward({"name": "accuracy"}) and friends. Known names and their keys:
//   accuracy                                  1/0 numeric answer match (None without an answer)
//   exact_match                               1/0 trimmed string equality (None without an answer)
//   format    pattern, mode: "full"|"search" (default full), dotall (default true)
//                                             1/0 regex match of the completion (PCRE2, UTF+UCP)
//   length    target, penalty (default 0.01), unit: "chars"|"tokens" (default chars)
//                                             0 up to target, then -penalty per unit past it
//   external  command, timeout_s (10), startup_timeout_s (30), shutdown_grace_s (1),
//             max_consecutive_failures (3), protocol: "sample"|"batch" (default sample)
//                                             a user program speaking JSON lines (external_reward.h)
// and TRL's names with TRL's semantics and metric names (reward_trl.h): accuracy_reward,
// reasoning_accuracy_reward, think_format_reward, format_reward, tag_count_reward,
// soft_overlong_punishment (max_completion_len, soft_punish_cache), repetition_penalty
// (ngram_size, max_penalty), cosine_scaled_reward (max_len, ...).
// An optional "alias" key renames the function (for two functions of one kind in a set); a
// "weight" key is read by RewardSet::from_json. A string spec is shorthand for {"name": s}.
// An unknown name or key is a grpo::Error naming the nearest known one.
std::unique_ptr<RewardFunction> make_reward(const nlohmann::json& spec);
std::vector<std::string> known_reward_names();

// ---- RewardSet ----
struct RewardScores {
  std::vector<std::string> names;                // F function names
  std::vector<std::vector<double>> per_function;  // [F][B], NaN where a function returned None
  std::vector<double> weights;                   // F weights (reward_weights; all 1 by default)
  std::vector<double> total;                     // [B] weighted nansum; NaN if all None
  std::vector<double> seconds;                   // [F] wall time each function took on the batch
};

class RewardSet {
public:
  RewardSet() = default;
  // weights: one per function, or empty for all 1 (TRL's reward_weights).
  RewardSet(std::vector<std::unique_ptr<RewardFunction>> functions, std::vector<double> weights = {});
  // From a JSON array of specs (strings are shorthand for {"name": s}).
  static RewardSet from_json(const nlohmann::json& specs, std::vector<double> weights = {});

  void add(std::unique_ptr<RewardFunction> fn, double weight = 1.0);
  size_t size() const { return functions_.size(); }
  std::vector<std::string> names() const;
  const std::vector<double>& weights() const { return weights_; }
  void set_weights(std::vector<double> weights);
  void set_event_sink(const RewardEventSink& sink);  // passed to every function
  // The first function that measures_accuracy(), or nullptr.
  RewardFunction* accuracy_function() const;

  // Runs every function on the batch, in order. A function that throws, or returns the wrong
  // number of values, is an error naming the function.
  RewardScores score(const std::vector<RewardInput>& batch);

private:
  std::vector<std::unique_ptr<RewardFunction>> functions_;
  std::vector<double> weights_;
};

// Weighted nansum of one column of a [F][B] matrix: NaN when every function gave NaN.
double weighted_nansum(const std::vector<std::vector<double>>& per_function,
                       const std::vector<double>& weights, size_t sample);

}  // namespace grpo::rollout
