// Math-answer helpers behind the `accuracy` reward: pull the final answer out of a completion
// (the last \boxed{...}, else the last number) and compare it numerically with the reference.
//
// Numbers understood: integers, decimals, negatives, thousands separators ("1,234", LaTeX
// "1{,}234"), fractions "3/4", "\frac{3}{4}", "\dfrac{3}{4}", "\frac34", with surrounding "$",
// "\left"/"\right", spaces, a trailing ".", "%", "^\circ" and "\text{...}" units ignored.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace grpo::rollout {

// The content of the last \boxed{...} (or \fbox{...}) in `text`, nested braces balanced;
// nothing when there is none or its braces never close.
std::optional<std::string> extract_boxed(std::string_view text);

// The last number in `text` as written ("-12", "3.5", "1,234", "3/4", "\frac{3}{4}").
// A "-" counts as a sign only when it does not follow a word character or closing bracket,
// nor a number and one space, so "7-5" and "10 - 5" yield "5" while "is -5" yields "-5".
std::optional<std::string> extract_last_number(std::string_view text);

// The value of a math answer ("1,234", "-3/4", "\frac{3}{4}", "$42$"), or nothing.
std::optional<double> parse_math_number(std::string_view s);

// The answer a completion gives: the last boxed content, or else the last number.
std::optional<std::string> extract_completion_answer(std::string_view completion);

// The reference answer's own final part: text after the last "####" (GSM8K style), the last
// boxed content if any, else the whole trimmed string.
std::string reference_answer(std::string_view answer);

// accuracy's test: numeric equality (relative tolerance 1e-9) when both sides parse as
// numbers, else equality after removing spaces, "$" and a trailing ".".
bool math_answers_equal(std::string_view predicted, std::string_view reference);

}  // namespace grpo::rollout
