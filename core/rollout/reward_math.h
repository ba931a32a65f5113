// Math-answer helpers behind the `accuracy` reward: find the answer in a completion and in the
// reference the way Hugging Face's math_verify does (math_extract.h: \boxed{}, "final answer
// is", "answer:", LaTeX, plain numbers), and compare them as math_verify.verify does
// (math_expr.h: numbers in any notation, \frac, \sqrt, percentages, `x = 3` vs 3, tuples,
// intervals, sets, relations, and expressions by evaluation).
//
// The accuracy reward calls extract_completion_answer(completion), reference_answer(answer) and
// math_answers_equal(predicted, reference); the texts in between read back to the same answers.
// parse_gold_answer / parse_completion_answer + math::verify are the same in one step.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/rollout/math_extract.h"

namespace grpo::rollout {

// The content of the last \boxed{...} (or \fbox{...}) in `text`, nested braces balanced;
// nothing when there is none or its braces never close.
std::optional<std::string> extract_boxed(std::string_view text);

// The last number in `text` as written ("-12", "3.5", "1,234", "3/4", "\frac{3}{4}"); a simple
// helper the accuracy reward no longer uses.
// A "-" counts as a sign only when it does not follow a word character or closing bracket,
// nor a number and one space, so "7-5" and "10 - 5" yield "5" while "is -5" yields "-5".
std::optional<std::string> extract_last_number(std::string_view text);

// The value of a plain numeric answer ("1,234", "-3/4", "\frac{3}{4}", "$42$", "50\%" -> 50,
// "x = 5" -> 5), or nothing (a simple helper; the accuracy reward no longer uses it).
std::optional<double> parse_math_number(std::string_view s);

// The answer a completion gives, as math_verify extracts it: the last \boxed{...} (joined with
// the boxes right before it), else "final answer is ...", "answer: ...", the last LaTeX
// ($...$, \[...\], ...) or the last plain number or expression. Returned as text that
// math_answers_equal reads back: a plain number ("42", "0.5"), a plain expression ("4 4/9",
// "28%"), or normalized LaTeX in "$...$" ("$\frac{1}{2}$", "$x = 3$", "$1, 2$"). Nothing when
// the completion holds no candidate at all.
std::optional<std::string> extract_completion_answer(std::string_view completion);

// The reference answer's own final part: the text after the last "####" (GSM8K style); a bare
// expression ("42", "x + 1", "2\sqrt{2}", "1,000", "[0, 1)") as it is; otherwise what
// math_verify extracts from it (a MATH solution's \boxed{} answer, "$\frac{1}{2}$", ...), in
// the same form as extract_completion_answer; else the whole trimmed string.
std::string reference_answer(std::string_view answer);

// The gold side parsed as math_verify parses a reference (LaTeX and plain-expression
// extraction, after any GSM8K "####"); a bare expression is parsed whole (math_verify would
// read "2\sqrt{2}" without $ as its first number; we read it as written). TRL's accuracy_reward
// skips a sample (None) whose gold yields nothing at all: `!a.value && a.fallback.empty()`
// ("forty two", "Answer is forty two.").
math::Answer parse_gold_answer(std::string_view answer);

// A completion parsed as math_verify parses a prediction (LaTeX and plain-expression
// extraction, \boxed{} first).
math::Answer parse_completion_answer(std::string_view completion);

// accuracy's test: math_verify.verify(parse(reference), parse(predicted)) with its defaults
// (6 decimals when a decimal number is involved, variables significant). Each side is a bare
// expression parsed whole, or text to extract the answer from. Never throws.
bool math_answers_equal(std::string_view predicted, std::string_view reference);

}  // namespace grpo::rollout
