// The reward registry (JSON spec -> RewardFunction) and RewardSet (see reward.h).
#include "core/rollout/reward.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <set>

#include "core/common/error.h"
#include "core/common/strings.h"
#include "core/rollout/external_reward.h"
#include "core/rollout/reward_builtin.h"
#include "core/rollout/reward_trl.h"

namespace grpo::rollout {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Reads typed keys from one reward spec and rejects keys nobody read.
class SpecReader {
public:
  SpecReader(const nlohmann::json& spec, std::string context) : spec_(spec), context_(std::move(context)) {}

  std::string string(const std::string& key, std::optional<std::string> fallback = std::nullopt) {
    used_.insert(key);
    if (!spec_.contains(key)) return require(key, fallback);
    const auto& v = spec_[key];
    check(v.is_string(), field(key), std::string("expected a string, got ") + v.type_name());
    return v.get<std::string>();
  }
  double number(const std::string& key, std::optional<double> fallback = std::nullopt) {
    used_.insert(key);
    if (!spec_.contains(key)) return require(key, fallback);
    const auto& v = spec_[key];
    check(v.is_number(), field(key), std::string("expected a number, got ") + v.type_name());
    return v.get<double>();
  }
  std::vector<std::string> strings(const std::string& key, std::vector<std::string> fallback) {
    used_.insert(key);
    if (!spec_.contains(key)) return fallback;
    const auto& v = spec_[key];
    check(v.is_array(), field(key), std::string("expected an array of strings, got ") + v.type_name());
    std::vector<std::string> out;
    for (const auto& s : v) {
      check(s.is_string(), field(key), std::string("expected an array of strings, got an element of type ") + s.type_name());
      out.push_back(s.get<std::string>());
    }
    return out;
  }
  bool boolean(const std::string& key, bool fallback) {
    used_.insert(key);
    if (!spec_.contains(key)) return fallback;
    check(spec_[key].is_boolean(), field(key), std::string("expected true or false, got ") + spec_[key].type_name());
    return spec_[key].get<bool>();
  }
  std::string choice(const std::string& key, const std::vector<std::string>& allowed, const std::string& fallback) {
    std::string v = string(key, fallback);
    for (const auto& a : allowed)
      if (v == a) return v;
    throw Error(field(key), "\"" + v + "\" is not one of: " + join(allowed, ", "), hint_for(v, allowed));
  }
  // Call after reading: an unknown key is an error naming the nearest known one.
  void finish() {
    std::vector<std::string> known(used_.begin(), used_.end());
    for (const auto& [key, value] : spec_.items())
      if (!used_.count(key))
        throw Error(context_, "unknown key \"" + key + "\"", hint_for(key, known, "known keys: " + join(known, ", ")));
  }

private:
  std::string field(const std::string& key) const { return context_ + ": field \"" + key + "\""; }
  template <typename T>
  T require(const std::string& key, const std::optional<T>& fallback) {
    if (!fallback) throw Error(field(key), "missing (this reward needs it)");
    return *fallback;
  }
  static std::string hint_for(const std::string& v, const std::vector<std::string>& known, std::string otherwise = {}) {
    std::string near = nearest_name(v, known);
    return near.empty() ? otherwise : "did you mean \"" + near + "\"?";
  }

  const nlohmann::json& spec_;
  std::string context_;
  std::set<std::string> used_ = {"name", "alias", "weight"};
};

}  // namespace

std::vector<std::string> known_reward_names() {
  std::vector<std::string> names = {"accuracy", "exact_match", "format", "length", "external"};
  for (const auto& n : trl_reward_names()) names.push_back(n);
  return names;
}

std::unique_ptr<RewardFunction> make_reward(const nlohmann::json& spec_in) {
  nlohmann::json spec = spec_in.is_string() ? nlohmann::json{{"name", spec_in}} : spec_in;
  check(spec.is_object(), "reward spec", std::string("expected an object or a name, got ") + spec.type_name(),
        "e.g. {\"name\": \"accuracy\"}");
  check(spec.contains("name") && spec["name"].is_string(), "reward spec " + spec.dump(), "needs a \"name\" string",
        "one of: " + join(known_reward_names(), ", "));
  const std::string kind = spec["name"].get<std::string>();
  SpecReader r(spec, "reward \"" + kind + "\"");
  const std::string alias = r.string("alias", kind);

  std::unique_ptr<RewardFunction> fn;
  if (is_trl_reward_name(kind)) {
    TrlRewardArgs args;
    args.number = [&r](const std::string& key, std::optional<double> fallback) { return r.number(key, fallback); };
    args.strings = [&r](const std::string& key, std::vector<std::string> fallback) { return r.strings(key, std::move(fallback)); };
    fn = make_trl_reward(kind, spec.contains("alias") ? alias : std::string(), args);
  } else if (kind == "accuracy") {
    fn = std::make_unique<AccuracyReward>(alias);
  } else if (kind == "exact_match") {
    fn = std::make_unique<ExactMatchReward>(alias);
  } else if (kind == "format") {
    std::string pattern = r.string("pattern");
    auto mode = r.choice("mode", {"full", "search"}, "full") == "full" ? FormatReward::Mode::Full : FormatReward::Mode::Search;
    fn = std::make_unique<FormatReward>(pattern, mode, r.boolean("dotall", true), alias);
  } else if (kind == "length") {
    double target = r.number("target");
    double penalty = r.number("penalty", 0.01);
    auto unit = r.choice("unit", {"chars", "tokens"}, "chars") == "chars" ? LengthReward::Unit::Chars : LengthReward::Unit::Tokens;
    fn = std::make_unique<LengthReward>(target, penalty, unit, alias);
  } else if (kind == "external") {
    ExternalRewardOptions o;
    o.command = r.string("command");
    o.timeout_s = r.number("timeout_s", o.timeout_s);
    o.startup_timeout_s = r.number("startup_timeout_s", o.startup_timeout_s);
    o.shutdown_grace_s = r.number("shutdown_grace_s", o.shutdown_grace_s);
    o.max_consecutive_failures = static_cast<int>(r.number("max_consecutive_failures", o.max_consecutive_failures));
    o.batch = r.choice("protocol", {"sample", "batch"}, "sample") == "batch";
    o.name = alias;
    r.finish();  // before starting anything
    return std::make_unique<ExternalReward>(o);
  } else {
    std::string near = nearest_name(kind, known_reward_names());
    throw Error("reward spec", "unknown reward \"" + kind + "\"",
                near.empty() ? "known rewards: " + join(known_reward_names(), ", ") : "did you mean \"" + near + "\"?");
  }
  r.finish();
  return fn;
}

// ---- RewardSet ----

RewardSet::RewardSet(std::vector<std::unique_ptr<RewardFunction>> functions, std::vector<double> weights)
    : functions_(std::move(functions)) {
  set_weights(std::move(weights));
}

RewardSet RewardSet::from_json(const nlohmann::json& specs, std::vector<double> weights) {
  check(specs.is_array(), "reward_funcs", std::string("expected an array of reward specs, got ") + specs.type_name());
  RewardSet set;
  std::vector<double> spec_weights;
  for (size_t i = 0; i < specs.size(); ++i) {
    try {
      set.functions_.push_back(make_reward(specs[i]));
    } catch (const Error& e) {
      throw e.within("reward_funcs[" + std::to_string(i) + "]");
    }
    const auto& s = specs[i];
    double w = 1.0;
    if (s.is_object() && s.contains("weight")) {
      check(s["weight"].is_number(), "reward_funcs[" + std::to_string(i) + "]: field \"weight\"", "expected a number");
      w = s["weight"].get<double>();
    }
    spec_weights.push_back(w);
  }
  set.set_weights(weights.empty() ? spec_weights : std::move(weights));
  return set;
}

void RewardSet::add(std::unique_ptr<RewardFunction> fn, double weight) {
  functions_.push_back(std::move(fn));
  weights_.push_back(weight);
}

std::vector<std::string> RewardSet::names() const {
  std::vector<std::string> out;
  for (const auto& f : functions_) out.push_back(f->name());
  return out;
}

void RewardSet::set_weights(std::vector<double> weights) {
  if (weights.empty()) weights.assign(functions_.size(), 1.0);
  check(weights.size() == functions_.size(), "reward_weights",
        "has " + std::to_string(weights.size()) + " values for " + std::to_string(functions_.size()) + " reward functions",
        "give one weight per reward function, in order");
  for (double w : weights) check(std::isfinite(w), "reward_weights", "values must be finite numbers");
  weights_ = std::move(weights);
}

RewardFunction* RewardSet::accuracy_function() const {
  for (const auto& fn : functions_)
    if (fn->measures_accuracy()) return fn.get();
  return nullptr;
}

void RewardSet::set_event_sink(const RewardEventSink& sink) {
  for (auto& fn : functions_) fn->set_event_sink(sink);
}

RewardScores RewardSet::score(const std::vector<RewardInput>& batch) {
  RewardScores out;
  out.names = names();
  out.weights = weights_;
  for (auto& fn : functions_) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::optional<double>> values;
    try {
      values = fn->score(batch);
    } catch (const Error& e) {
      throw e.within("reward \"" + fn->name() + "\"");
    } catch (const std::exception& e) {
      throw Error("reward \"" + fn->name() + "\"", std::string("failed: ") + e.what());
    }
    out.seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    check(values.size() == batch.size(), "reward \"" + fn->name() + "\"",
          "returned " + std::to_string(values.size()) + " values for a batch of " + std::to_string(batch.size()));
    std::vector<double> row(batch.size(), kNaN);
    for (size_t b = 0; b < values.size(); ++b)
      if (values[b]) row[b] = *values[b];
    out.per_function.push_back(std::move(row));
  }
  for (size_t b = 0; b < batch.size(); ++b) out.total.push_back(weighted_nansum(out.per_function, weights_, b));
  return out;
}

double weighted_nansum(const std::vector<std::vector<double>>& per_function, const std::vector<double>& weights,
                       size_t sample) {
  double sum = 0.0;
  bool any = false;
  for (size_t f = 0; f < per_function.size(); ++f) {
    double v = per_function[f][sample];
    if (std::isnan(v)) continue;
    sum += (f < weights.size() ? weights[f] : 1.0) * v;
    any = true;
  }
  return any ? sum : kNaN;
}

}  // namespace grpo::rollout
