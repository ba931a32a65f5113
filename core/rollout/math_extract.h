// Finding the answer in a completion or a reference the way Hugging Face's `math_verify.parse`
// does (LatexExtractionConfig(boxed_match_priority=0) + ExprExtractionConfig), and normalizing
// the LaTeX found (latex2sympy2_extended's normalize_latex) before math_expr.h parses it.
//
// Candidates by priority, the first that parses wins; within a priority the match that ends
// last (then the longest) is tried first:
//    0  \boxed{...} (the last one, with boxes right before it joined: "\boxed{1}, \boxed{2}"),
//       "final answer is $X$. I hope"
//   50  "final answer ... is X"
//  100  "answer: ... X"
//  200  "answer ... X"
//  300  any $...$, $$...$$, \(...\), \[...\] (up to six joined by ",", "and", "or"), a bare
//       \frac{1}{2}, or a plain number or expression ("1,000.99", "1 000", "$5", "28%",
//       "4 4/9", "2/3", "3^2") set off by spaces, "=", or a currency sign
// A LaTeX candidate that fails to parse does not let a number inside it be used later on.
// The text of the first candidate is kept as a fallback: two answers whose fallbacks are the
// same string are equal (math_verify's string comparison).
//
// Normalization: \boxed content, \left/\right, $ and \$, \! and spacing, \dfrac/\tfrac/\cfrac,
// "and"/"or" between items become ",", "percent"/"pct" become "%", trailing \text{...} units and
// common unit words ("cm", "dollars", "hours", ...) are dropped, a leading "." gets its 0.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/rollout/math_expr.h"

namespace grpo::rollout::math {

struct ExtractConfig {
  bool latex = true;  // LaTeX environments, \boxed{}, bare \frac{a}{b}
  bool expr = true;   // plain numbers and arithmetic
};

struct Answer {
  std::optional<Value> value;  // the first candidate that parsed
  // That candidate as text math_answers_equal can read back: "$<normalized LaTeX>$" (a plain
  // number without the $), or the plain number/expression; "%" kept. Empty when none parsed.
  std::string text;
  std::string fallback;  // the first candidate's normalized text, parsed or not
};

// Longer inputs are cut to their last kMaxScan bytes (answers come at the end); at most the 256
// rightmost candidates of a priority are tried; "\[" and "\(" that are never closed are ignored
// up front. Worst cases (tens of KB of unbalanced delimiters) take a fraction of a second.
inline constexpr size_t kMaxScan = 65536;

Answer parse_answer(std::string_view text, const ExtractConfig& config = {});

// math_verify.verify: the values match, or the fallback strings are the same.
bool verify(const Answer& gold, const Answer& pred, const CompareOptions& options = {});

// The whole text as one answer, without extraction: normalized like the content of a $...$
// ("x + 1", "2\sqrt{2}", "\frac{1}{2}", "1,000", "x = 3", "[0, 1)").
Answer parse_whole(std::string_view text);

enum class BoxedMode { None, All, Last };
std::string normalize_latex(std::string_view latex, BoxedMode boxed = BoxedMode::All);

}  // namespace grpo::rollout::math
