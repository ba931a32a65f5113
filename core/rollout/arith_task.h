// The built-in demo task: integer arithmetic prompts with exact answers ("What is 37 + 45?",
// answer "82"), produced as Examples like a dataset's, so the demo needs no files.
//
// Deterministic: example i depends only on (options, i). Its engine is std::mt19937_64 seeded
// with seed + 0x9E3779B97F4A7C15 * (i + 1), and every draw uses bounded_random
// (dataset_sampler.h), so the same options give the same examples on every platform.
// Each operand has a digit count uniform in [min_digits, max_digits] and a value uniform among
// the numbers with that many digits (0..9 for one digit). Operators are drawn uniformly from
// `ops`; the answer follows the usual precedence (* before + and -). With allow_negative off, a
// draw whose result is negative is redrawn (from the same engine).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/rollout/dataset.h"

namespace grpo::rollout {

struct ArithOptions {
  uint64_t seed = 0;
  int min_digits = 1;
  int max_digits = 2;
  int terms = 2;                 // operands per expression, 2..4
  std::string ops = "+-*";       // any of '+', '-', '*'
  bool allow_negative = true;    // results (never operands) may be negative
  std::string prompt_template = "What is {expr}?";  // "{expr}" is replaced by "37 + 45"
  std::string suffix;            // appended to every prompt, e.g. " Put the answer in \\boxed{}."

  // Presets: 1 = one digit, + -; 2 = two digits, + -; 3 = two digits, + - *;
  // 4 = up to three digits, three terms; 5 = two to four digits, three terms. Others: error.
  static ArithOptions difficulty(int level, uint64_t seed = 0);
  // From JSON: {"seed", "difficulty", "min_digits", "max_digits", "terms", "ops",
  // "allow_negative", "prompt_template", "suffix"}; "difficulty" is applied first, then the
  // other keys. Unknown keys are errors naming the nearest known one.
  static ArithOptions from_json(const nlohmann::json& j);
  void validate() const;  // throws grpo::Error naming the bad field
};

// Example i: prompt_text from the template, messages [{"role": "user", "content": prompt_text}]
// (a conversational prompt: it goes through the model's chat template, as TRL does), answer the
// exact result as a decimal string, metadata {"task": "arith", "expr": "37 + 45", "index": i},
// index = i.
Example arith_example(const ArithOptions& options, int64_t i);
// Examples first .. first + count - 1.
std::vector<Example> arith_examples(const ArithOptions& options, int64_t count, int64_t first = 0);

}  // namespace grpo::rollout
