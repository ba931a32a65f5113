// The arithmetic demo task generator (see arith_task.h).
#include "core/rollout/arith_task.h"

#include <algorithm>
#include <random>
#include <type_traits>
#include <set>

#include "core/common/error.h"
#include "core/common/strings.h"
#include "core/rollout/dataset_sampler.h"

namespace grpo::rollout {

namespace {

int64_t pow10(int d) {
  int64_t p = 1;
  while (d-- > 0) p *= 10;
  return p;
}

// The value of v0 o1 v1 o2 v2 ... with * before + and -.
int64_t evaluate(const std::vector<int64_t>& v, const std::string& ops) {
  int64_t total = 0, term = v[0], sign = 1;
  for (size_t k = 1; k < v.size(); ++k) {
    if (ops[k - 1] == '*') {
      term *= v[k];
    } else {
      total += sign * term;
      sign = ops[k - 1] == '+' ? 1 : -1;
      term = v[k];
    }
  }
  return total + sign * term;
}

}  // namespace

ArithOptions ArithOptions::difficulty(int level, uint64_t seed) {
  ArithOptions o;
  o.seed = seed;
  switch (level) {
    case 1: o.min_digits = 1, o.max_digits = 1, o.terms = 2, o.ops = "+-"; break;
    case 2: o.min_digits = 2, o.max_digits = 2, o.terms = 2, o.ops = "+-"; break;
    case 3: o.min_digits = 2, o.max_digits = 2, o.terms = 2, o.ops = "+-*"; break;
    case 4: o.min_digits = 1, o.max_digits = 3, o.terms = 3, o.ops = "+-*"; break;
    case 5: o.min_digits = 2, o.max_digits = 4, o.terms = 3, o.ops = "+-*"; break;
    default: throw Error("arith task: field \"difficulty\"", "must be 1..5, got " + std::to_string(level));
  }
  return o;
}

ArithOptions ArithOptions::from_json(const nlohmann::json& j) {
  const std::string ctx = "arith task";
  check(j.is_object(), ctx, std::string("expected an object, got ") + j.type_name());
  const std::vector<std::string> known = {"seed", "difficulty", "min_digits", "max_digits", "terms", "ops",
                                          "allow_negative", "prompt_template", "suffix"};
  for (const auto& [key, value] : j.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string near = nearest_name(key, known);
    throw Error(ctx, "unknown key \"" + key + "\"", near.empty() ? "known keys: " + join(known, ", ") : "did you mean \"" + near + "\"?");
  }
  auto get = [&](const char* key, auto& out, bool (nlohmann::json::*is_type)() const noexcept, const char* what) {
    if (!j.contains(key)) return;
    check((j[key].*is_type)(), ctx + ": field \"" + key + "\"", std::string("expected ") + what + ", got " + j[key].type_name());
    out = j[key].get<std::remove_reference_t<decltype(out)>>();
  };
  uint64_t seed = 0;
  int level = 0;
  get("seed", seed, &nlohmann::json::is_number_integer, "an integer >= 0");
  check(!j.contains("seed") || j["seed"].is_number_unsigned() || j["seed"].get<int64_t>() >= 0,
        ctx + ": field \"seed\"", "must be an integer >= 0, got " + (j.contains("seed") ? j["seed"].dump() : ""));
  get("difficulty", level, &nlohmann::json::is_number_integer, "an integer 1..5");
  ArithOptions o = level ? difficulty(level, seed) : ArithOptions{};
  o.seed = seed;
  get("min_digits", o.min_digits, &nlohmann::json::is_number_integer, "an integer");
  get("max_digits", o.max_digits, &nlohmann::json::is_number_integer, "an integer");
  get("terms", o.terms, &nlohmann::json::is_number_integer, "an integer");
  get("ops", o.ops, &nlohmann::json::is_string, "a string such as \"+-*\"");
  get("allow_negative", o.allow_negative, &nlohmann::json::is_boolean, "true or false");
  get("prompt_template", o.prompt_template, &nlohmann::json::is_string, "a string");
  get("suffix", o.suffix, &nlohmann::json::is_string, "a string");
  o.validate();
  return o;
}

void ArithOptions::validate() const {
  const std::string ctx = "arith task";
  check(min_digits >= 1 && min_digits <= max_digits, ctx + ": field \"min_digits\"",
        "must be >= 1 and <= max_digits, got " + std::to_string(min_digits));
  check(terms >= 2 && terms <= 4, ctx + ": field \"terms\"", "must be 2..4, got " + std::to_string(terms));
  check(max_digits * terms <= 18, ctx + ": field \"max_digits\"",
        "max_digits * terms must be <= 18 (results fit in 64 bits), got " + std::to_string(max_digits * terms));
  check(!ops.empty() && ops.find_first_not_of("+-*") == std::string::npos, ctx + ": field \"ops\"",
        "must be a non-empty string of '+', '-', '*', got \"" + ops + "\"");
  check(prompt_template.find("{expr}") != std::string::npos, ctx + ": field \"prompt_template\"",
        "must contain {expr}", "e.g. \"What is {expr}?\"");
}

Example arith_example(const ArithOptions& o, int64_t i) {
  std::mt19937_64 engine(o.seed + 0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(i + 1));
  auto draw = [&](uint64_t m) { return static_cast<int64_t>(bounded_random(engine, m)); };
  std::vector<int64_t> values(static_cast<size_t>(o.terms));
  std::string ops(static_cast<size_t>(o.terms - 1), '+');
  int64_t result = 0;
  for (int attempt = 0;; ++attempt) {
    for (auto& v : values) {
      int d = o.min_digits + static_cast<int>(draw(static_cast<uint64_t>(o.max_digits - o.min_digits + 1)));
      v = d == 1 ? draw(10) : pow10(d - 1) + draw(static_cast<uint64_t>(9 * pow10(d - 1)));
    }
    for (auto& op : ops) op = o.ops[static_cast<size_t>(draw(o.ops.size()))];
    result = evaluate(values, ops);
    if (o.allow_negative || result >= 0) break;
    check(attempt < 100000, "arith task", "cannot draw a non-negative result", "set allow_negative or add '+' to ops");
  }

  std::string expr = std::to_string(values[0]);
  for (size_t k = 1; k < values.size(); ++k) expr += std::string(" ") + ops[k - 1] + " " + std::to_string(values[k]);
  std::string prompt = o.prompt_template;
  prompt.replace(prompt.find("{expr}"), 6, expr);

  Example ex;
  ex.prompt_text = prompt + o.suffix;
  // A conversational prompt (one user turn), as TRL's examples {"prompt": [{"role": "user", ...}]}:
  // it goes through the model's chat template; prompt_text keeps the bare question for rewards.
  ex.messages = nlohmann::json::array({{{"role", "user"}, {"content", ex.prompt_text}}});
  ex.answer = std::to_string(result);
  ex.metadata = {{"task", "arith"}, {"expr", expr}, {"index", i}};
  ex.index = i;
  return ex;
}

std::vector<Example> arith_examples(const ArithOptions& o, int64_t count, int64_t first) {
  o.validate();
  std::vector<Example> out;
  for (int64_t i = first; i < first + count; ++i) out.push_back(arith_example(o, i));
  return out;
}

}  // namespace grpo::rollout
