// The reward functions TRL users already name in their configs, with TRL's semantics and metric
// names (trl/rewards/*.py, and open-r1's rewards.py for format_reward and tag_count_reward):
//
//   accuracy_reward            1/0 by math_verify-style comparison of the completion's answer with
//                              the sample's solution; None when the solution has no parseable answer
//   reasoning_accuracy_reward  the same on the text after the last reasoning delimiter
//                              (reasoning_delimiters, default ["</think>"]); 0 when none is present
//   think_format_reward        1 when the completion starts with <think>, has no second <think>, and
//                              closes it with </think> (TRL's ^<think>(?!.*<think>)(.*?)</think>.*$)
//   format_reward              open-r1's ^<think>\n.*?\n</think>\n<answer>\n.*?\n</answer>$ (re.match,
//                              DOTALL | MULTILINE: the answer block may be followed by a newline and more)
//   tag_count_reward           open-r1's 0.25 for each of "<think>\n", "\n</think>\n", "\n<answer>\n",
//                              "\n</answer>" present exactly once
//   soft_overlong_punishment   DAPO's soft overlong penalty in completion tokens (max_completion_len,
//                              soft_punish_cache): 0, then linear down to -1 over the cache, then -1
//   repetition_penalty         TRL's n-gram repetition penalty over completion token ids
//                              (ngram_size 3, max_penalty -1)
//   cosine_scaled_reward       TRL's cosine length schedule (max_len tokens) of the accuracy verdict
//
// The token-counting ones read RewardInput::completion_ids (the real token ids the policy sampled);
// a non-empty completion without ids is unscorable (None), never a guess. TRL's factory names
// (get_soft_overlong_punishment, ...) are accepted for the names above; name() is TRL's
// __name__ ("soft_overlong_punishment_reward", ...) so metrics read rewards/<that>/mean as in TRL.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/rollout/reward.h"

namespace grpo::rollout {

// The TRL/open-r1 names make_trl_reward builds (its aliases included).
const std::vector<std::string>& trl_reward_names();
bool is_trl_reward_name(const std::string& name);

// Reads a TRL-named spec's keys through `number`/`strings` callbacks of reward.cpp's SpecReader.
struct TrlRewardArgs {
  std::function<double(const std::string& key, std::optional<double> fallback)> number;
  std::function<std::vector<std::string>(const std::string& key, std::vector<std::string> fallback)> strings;
};
// Builds the reward `kind` (one of trl_reward_names()); `alias` is its name() when the spec
// renames it, else "" for TRL's own name.
std::unique_ptr<RewardFunction> make_trl_reward(const std::string& kind, const std::string& alias, const TrlRewardArgs& args);

// The accuracy verdict TRL's accuracy_reward gives one sample (None: no parseable solution).
std::optional<double> trl_accuracy(const std::string& completion, const std::optional<std::string>& solution);

}  // namespace grpo::rollout
