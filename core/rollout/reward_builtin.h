// The built-in reward functions: accuracy, exact_match, format and length. Each is a plain
// class so code and tests can build one directly; make_reward (reward.h) builds them by name.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/rollout/reward.h"
#include "core/rollout/reward_regex.h"

namespace grpo::rollout {

// accuracy (and TRL's accuracy_reward): 1 when the completion's final answer equals the sample's
// answer as math_verify compares them (reward_math.h), else 0. None when the sample has no answer,
// or one without anything parseable ("forty two"), as TRL skips it.
class AccuracyReward : public RewardFunction {
public:
  explicit AccuracyReward(std::string name = "accuracy") : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  bool measures_accuracy() const override { return true; }
  std::vector<std::optional<double>> score(const std::vector<RewardInput>& batch) override;
  static std::optional<double> score_one(const RewardInput& in);

private:
  std::string name_;
};

// exact_match: 1 when the trimmed completion equals the trimmed answer, else 0; None without one.
class ExactMatchReward : public RewardFunction {
public:
  explicit ExactMatchReward(std::string name = "exact_match") : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  std::vector<std::optional<double>> score(const std::vector<RewardInput>& batch) override;

private:
  std::string name_;
};

// format: 1 when the completion matches `pattern`, else 0. Mode Full anchors the pattern at both
// ends of the completion (Python's re.fullmatch); Search accepts a match anywhere (re.search).
// With dotall (the default) "." also matches newlines, as completions span lines.
class FormatReward : public RewardFunction {
public:
  enum class Mode { Full, Search };
  FormatReward(const std::string& pattern, Mode mode = Mode::Full, bool dotall = true,
               std::string name = "format");
  std::string name() const override { return name_; }
  std::vector<std::optional<double>> score(const std::vector<RewardInput>& batch) override;

private:
  Regex regex_;
  Mode mode_;
  std::string name_;
};

// length: 0 while the completion is at most `target` long, then -penalty per unit past it:
//   r = -penalty * max(0, len - target)
// Unit Chars counts Unicode code points; unit Tokens counts the completion's real token ids
// (RewardInput::completion_ids). None only for a non-empty completion that came without its ids.
class LengthReward : public RewardFunction {
public:
  enum class Unit { Chars, Tokens };
  LengthReward(double target, double penalty, Unit unit = Unit::Chars, std::string name = "length");
  std::string name() const override { return name_; }
  std::vector<std::optional<double>> score(const std::vector<RewardInput>& batch) override;
  // The length in this reward's unit; nothing when tokens are asked for and the ids are missing.
  std::optional<double> length_of(const RewardInput& in) const;

private:
  double target_, penalty_;
  Unit unit_;
  std::string name_;
};

// One value per input: f(input) for each, in order (the shape of most rewards' score()).
template <typename F>
std::vector<std::optional<double>> map_batch(const std::vector<RewardInput>& batch, F&& f) {
  std::vector<std::optional<double>> out;
  out.reserve(batch.size());
  for (const auto& in : batch) out.push_back(f(in));
  return out;
}

// Unicode code points in UTF-8 text (bytes that are not continuation bytes).
size_t count_code_points(const std::string& s);

}  // namespace grpo::rollout
