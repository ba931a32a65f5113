// Fuzz target: the accuracy rewards' math answers (core/rollout/reward_math.h, math_expr.h,
// math_extract.h), what a policy writes in a completion and what a dataset holds as its gold.
// The input is split at the first NUL into a completion and a gold answer. Everything must stay
// bounded (input caps, parse depth, exponent limits) and nothing may throw: a reward that cannot
// read an answer scores 0 or None, it never fails the scoring thread.
#include <string_view>

#include "core/rollout/reward_math.h"
#include "tests/fuzz/fuzz_target.h"

FUZZ_BODY({
  using namespace grpo::rollout;
  const size_t cut = input.find('\0');
  const std::string completion = input.substr(0, cut);
  const std::string gold = cut == std::string::npos ? std::string("42") : input.substr(cut + 1);
  (void)extract_boxed(completion);
  (void)extract_last_number(completion);
  (void)parse_math_number(gold);
  (void)parse_gold_answer(gold);
  (void)parse_completion_answer(completion);
  const std::string reference = reference_answer(gold);
  if (auto predicted = extract_completion_answer(completion)) {
    const bool a = math_answers_equal(*predicted, reference);
    // Equality of an answer with itself must hold whenever it is compared as written.
    (void)a;
  }
  (void)math_answers_equal(completion, gold);
})
