// TRL's and open-r1's named reward functions (see reward_trl.h).
#include "core/rollout/reward_trl.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/common/error.h"
#include "core/common/strings.h"
#include "core/rollout/reward_builtin.h"
#include "core/rollout/reward_math.h"
#include "core/rollout/reward_regex.h"

namespace grpo::rollout {

namespace {

constexpr double kPi = 3.14159265358979323846;

// A reward defined by one function of a sample, with TRL's name.
class LambdaReward : public RewardFunction {
public:
  using Fn = std::function<std::optional<double>(const RewardInput&)>;
  LambdaReward(std::string name, Fn fn, bool accuracy = false)
      : name_(std::move(name)), fn_(std::move(fn)), accuracy_(accuracy) {}
  std::string name() const override { return name_; }
  bool measures_accuracy() const override { return accuracy_; }
  std::vector<std::optional<double>> score(const std::vector<RewardInput>& batch) override {
    return map_batch(batch, fn_);
  }

private:
  std::string name_;
  Fn fn_;
  bool accuracy_;
};

// The number of completion tokens, or nothing when a non-empty completion came without its ids.
std::optional<double> token_count(const RewardInput& in) {
  if (in.completion_ids.empty() && !in.completion.empty()) return std::nullopt;
  return static_cast<double>(in.completion_ids.size());
}

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + needle.size())) ++n;
  return n;
}

struct Entry {
  const char* name;      // what configs may write
  const char* trl_name;  // TRL's __name__ (the metric name)
};

const std::vector<Entry>& entries() {
  static const std::vector<Entry> e = {
      {"accuracy_reward", "accuracy_reward"},
      {"reasoning_accuracy_reward", "reasoning_accuracy_reward"},
      {"think_format_reward", "think_format_reward"},
      {"format_reward", "format_reward"},
      {"tag_count_reward", "tag_count_reward"},
      {"soft_overlong_punishment", "soft_overlong_punishment_reward"},
      {"get_soft_overlong_punishment", "soft_overlong_punishment_reward"},
      {"soft_overlong_punishment_reward", "soft_overlong_punishment_reward"},
      {"repetition_penalty", "repetition_penalty_reward"},
      {"get_repetition_penalty_reward", "repetition_penalty_reward"},
      {"repetition_penalty_reward", "repetition_penalty_reward"},
      {"cosine_scaled_reward", "cosine_scaled_reward"},
      {"get_cosine_scaled_reward", "cosine_scaled_reward"},
  };
  return e;
}

}  // namespace

const std::vector<std::string>& trl_reward_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& e : entries()) v.push_back(e.name);
    return v;
  }();
  return names;
}

bool is_trl_reward_name(const std::string& name) {
  const auto& n = trl_reward_names();
  return std::find(n.begin(), n.end(), name) != n.end();
}

std::optional<double> trl_accuracy(const std::string& completion, const std::optional<std::string>& solution) {
  RewardInput in;
  in.completion = completion;
  in.answer = solution;
  return AccuracyReward::score_one(in);
}

std::unique_ptr<RewardFunction> make_trl_reward(const std::string& kind, const std::string& alias,
                                                const TrlRewardArgs& args) {
  std::string trl_name;
  for (const auto& e : entries())
    if (kind == e.name) trl_name = e.trl_name;
  check(!trl_name.empty(), "reward spec", "\"" + kind + "\" is not a TRL reward name");
  const std::string name = alias.empty() || alias == kind ? trl_name : alias;
  const std::string where = "reward \"" + kind + "\"";

  if (trl_name == "accuracy_reward")
    return std::make_unique<LambdaReward>(
        name, [](const RewardInput& in) { return trl_accuracy(in.completion, in.answer); }, /*accuracy=*/true);

  if (trl_name == "reasoning_accuracy_reward") {
    auto delimiters = args.strings("reasoning_delimiters", {"</think>"});
    check(!delimiters.empty(), where + ": field \"reasoning_delimiters\"", "must name at least one delimiter");
    return std::make_unique<LambdaReward>(name, [delimiters](const RewardInput& in) -> std::optional<double> {
      // TRL: the first delimiter present wins; the answer is what follows its last occurrence.
      for (const auto& d : delimiters) {
        size_t p = d.empty() ? std::string::npos : in.completion.rfind(d);
        if (p != std::string::npos) return trl_accuracy(in.completion.substr(p + d.size()), in.answer);
      }
      return 0.0;  // incomplete reasoning is penalized, not skipped
    }, /*accuracy=*/true);
  }

  if (trl_name == "think_format_reward") {
    // re.match(r"^<think>(?!.*<think>)(.*?)</think>.*$", DOTALL | MULTILINE): anchored at the
    // start, and ".*$" always reaches the end, so a full match of the same pattern is equivalent.
    auto re = std::make_shared<Regex>("<think>(?!.*<think>)(.*?)</think>.*", where, /*dotall=*/true);
    return std::make_unique<LambdaReward>(name, [re](const RewardInput& in) -> std::optional<double> {
      return re->full_match(in.completion) ? 1.0 : 0.0;
    });
  }

  if (trl_name == "format_reward") {
    // re.match anchors only the start; with MULTILINE "$" also matches before any newline.
    auto re = std::make_shared<Regex>("(?m)\\A<think>\\n.*?\\n</think>\\n<answer>\\n.*?\\n</answer>$", where, true);
    return std::make_unique<LambdaReward>(name, [re](const RewardInput& in) -> std::optional<double> {
      auto m = re->search(in.completion);
      return m && m->begin == 0 ? 1.0 : 0.0;
    });
  }

  if (trl_name == "tag_count_reward") {
    return std::make_unique<LambdaReward>(name, [](const RewardInput& in) -> std::optional<double> {
      double v = 0;
      for (const char* tag : {"<think>\n", "\n</think>\n", "\n<answer>\n", "\n</answer>"})
        if (count_of(in.completion, tag) == 1) v += 0.25;
      return v;
    });
  }

  if (trl_name == "soft_overlong_punishment_reward") {
    const double max_len = args.number("max_completion_len", std::nullopt);
    const double cache = args.number("soft_punish_cache", std::nullopt);
    check(std::isfinite(max_len) && max_len > 0 && max_len == std::floor(max_len),
          where + ": field \"max_completion_len\"", "must be a whole number of tokens > 0");
    check(std::isfinite(cache) && cache >= 0 && cache <= max_len && cache == std::floor(cache),
          where + ": field \"soft_punish_cache\"", "must be a whole number of tokens in [0, max_completion_len]");
    return std::make_unique<LambdaReward>(name, [max_len, cache](const RewardInput& in) -> std::optional<double> {
      auto len = token_count(in);
      if (!len) return std::nullopt;
      if (*len <= max_len - cache) return 0.0;
      if (*len <= max_len) return (max_len - cache - *len) / cache;  // cache > 0 here
      return -1.0;
    });
  }

  if (trl_name == "repetition_penalty_reward") {
    const double n = args.number("ngram_size", 3);
    const double max_penalty = args.number("max_penalty", -1.0);
    check(std::isfinite(n) && n >= 1 && n <= 64 && n == std::floor(n), where + ": field \"ngram_size\"",
          "must be a whole number in [1, 64]");
    check(std::isfinite(max_penalty) && max_penalty <= 0, where + ": field \"max_penalty\"",
          "must be a number <= 0 (a penalty)");
    const size_t ngram = static_cast<size_t>(n);
    return std::make_unique<LambdaReward>(name, [ngram, max_penalty](const RewardInput& in) -> std::optional<double> {
      if (!token_count(in)) return std::nullopt;
      const auto& ids = in.completion_ids;
      if (ids.size() < ngram) return 0.0;
      std::set<std::vector<int64_t>> unique;
      const size_t total = ids.size() - ngram + 1;
      for (size_t i = 0; i < total; ++i) unique.emplace(ids.begin() + static_cast<std::ptrdiff_t>(i),
                                                        ids.begin() + static_cast<std::ptrdiff_t>(i + ngram));
      const double scaling = 1.0 - static_cast<double>(unique.size()) / static_cast<double>(total);
      return scaling != 0 ? scaling * max_penalty : 0.0;
    });
  }

  // cosine_scaled_reward (TRL's get_cosine_scaled_reward)
  const double max_len = args.number("max_len", std::nullopt);
  const double min_wrong = args.number("min_value_wrong", -1.0), max_wrong = args.number("max_value_wrong", -0.5);
  const double min_correct = args.number("min_value_correct", 0.5), max_correct = args.number("max_value_correct", 1.0);
  check(std::isfinite(max_len) && max_len > 0, where + ": field \"max_len\"", "must be a number of tokens > 0");
  for (double v : {min_wrong, max_wrong, min_correct, max_correct})
    check(std::isfinite(v), where, "the min_value_*/max_value_* fields must be finite numbers");
  return std::make_unique<LambdaReward>(name, [=](const RewardInput& in) -> std::optional<double> {
    auto correct = trl_accuracy(in.completion, in.answer);
    if (!correct) return std::nullopt;
    auto len = token_count(in);
    if (!len) return std::nullopt;
    const double cosine = std::cos(std::min(*len / max_len, 1.0) * kPi);
    const double lo = *correct > 0 ? min_correct : max_wrong, hi = *correct > 0 ? max_correct : min_wrong;
    return lo + 0.5 * (hi - lo) * (1.0 + cosine);
  });
}

}  // namespace grpo::rollout
