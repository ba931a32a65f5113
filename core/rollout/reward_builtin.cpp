// The built-in reward functions (see reward_builtin.h).
#include "core/rollout/reward_builtin.h"

#include <algorithm>
#include <cmath>

#include "core/common/error.h"
#include "core/common/strings.h"
#include "core/rollout/reward_math.h"

namespace grpo::rollout {

namespace {
bool has_answer(const RewardInput& in) { return in.answer && !trim(*in.answer).empty(); }

}  // namespace

// ---- accuracy ----
std::optional<double> AccuracyReward::score_one(const RewardInput& in) {
  if (!has_answer(in)) return std::nullopt;
  // TRL's accuracy_reward: a solution without any parseable answer ("forty two") is skipped.
  auto gold = parse_gold_answer(*in.answer);
  if (!gold.value && gold.fallback.empty()) return std::nullopt;
  auto predicted = extract_completion_answer(in.completion);
  if (!predicted) return 0.0;
  return math_answers_equal(*predicted, reference_answer(*in.answer)) ? 1.0 : 0.0;
}

std::vector<std::optional<double>> AccuracyReward::score(const std::vector<RewardInput>& batch) {
  return map_batch(batch, &AccuracyReward::score_one);
}

// ---- exact_match ----
std::vector<std::optional<double>> ExactMatchReward::score(const std::vector<RewardInput>& batch) {
  return map_batch(batch, [](const RewardInput& in) -> std::optional<double> {
    if (!in.answer) return std::nullopt;
    return trim(in.completion) == trim(*in.answer) ? 1.0 : 0.0;
  });
}

// ---- format ----
FormatReward::FormatReward(const std::string& pattern, Mode mode, bool dotall, std::string name)
    : regex_(pattern, "reward \"" + name + "\": field \"pattern\"", dotall), mode_(mode), name_(std::move(name)) {}

std::vector<std::optional<double>> FormatReward::score(const std::vector<RewardInput>& batch) {
  return map_batch(batch, [this](const RewardInput& in) -> std::optional<double> {
    bool ok = mode_ == Mode::Full ? regex_.full_match(in.completion) : regex_.search(in.completion).has_value();
    return ok ? 1.0 : 0.0;
  });
}

// ---- length ----
size_t count_code_points(const std::string& s) {
  return static_cast<size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

LengthReward::LengthReward(double target, double penalty, Unit unit, std::string name)
    : target_(target), penalty_(penalty), unit_(unit), name_(std::move(name)) {
  check(std::isfinite(target) && target >= 0, "reward \"" + name_ + "\": field \"target\"",
        "must be a number >= 0, got " + std::to_string(target));
  check(std::isfinite(penalty) && penalty >= 0, "reward \"" + name_ + "\": field \"penalty\"",
        "must be a number >= 0, got " + std::to_string(penalty));
}

std::optional<double> LengthReward::length_of(const RewardInput& in) const {
  if (unit_ == Unit::Chars) return static_cast<double>(count_code_points(in.completion));
  if (in.completion_ids.empty() && !in.completion.empty()) return std::nullopt;
  return static_cast<double>(in.completion_ids.size());
}

std::vector<std::optional<double>> LengthReward::score(const std::vector<RewardInput>& batch) {
  return map_batch(batch, [this](const RewardInput& in) -> std::optional<double> {
    auto len = length_of(in);
    if (!len) return std::nullopt;
    double over = std::max(0.0, *len - target_);
    return over > 0 ? -penalty_ * over : 0.0;
  });
}

}  // namespace grpo::rollout
