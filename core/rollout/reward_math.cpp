// Math-answer extraction and comparison for the accuracy reward (see reward_math.h).
#include "core/rollout/reward_math.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "core/common/strings.h"
#include "core/rollout/reward_regex.h"

namespace grpo::rollout {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Index just past the brace group starting at text[open] == '{', or npos if unbalanced.
size_t skip_braces(std::string_view text, size_t open) {
  int depth = 0;
  for (size_t i = open; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {  // \{ and \} are literal braces
      ++i;
      continue;
    }
    if (text[i] == '{') ++depth;
    if (text[i] == '}' && --depth == 0) return i + 1;
  }
  return std::string_view::npos;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
}

// Removes every `\cmd{...}` group (units such as \text{ cm}).
void remove_command_groups(std::string& s, std::string_view cmd) {
  for (size_t p = s.find(cmd); p != std::string::npos; p = s.find(cmd, p)) {
    size_t open = p + cmd.size();
    size_t close = open < s.size() && s[open] == '{' ? skip_braces(s, open) : std::string::npos;
    if (close == std::string::npos) {
      ++p;  // "\textbf" when looking for "\text", or unbalanced: look further on
      continue;
    }
    s.erase(p, close - p);
  }
}

// Strips LaTeX and prose decoration around a number; see the list in reward_math.h.
std::string normalize(std::string_view in) {
  std::string s(in);
  replace_all(s, "\xE2\x88\x92", "-");  // U+2212 MINUS SIGN
  replace_all(s, "{,}", ",");
  for (std::string_view unit : {"\\text", "\\textbf", "\\mathrm", "\\mbox"}) remove_command_groups(s, unit);
  for (std::string_view junk : {"\\left", "\\right", "\\!", "\\,", "\\;", "\\ ", "\\%", "%", "^\\circ",
                                "^{\\circ}", "\\$", "$", "\\displaystyle"})
    replace_all(s, junk, "");
  s.erase(std::remove_if(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); }), s.end());
  while (!s.empty() && s.back() == '.') s.pop_back();
  while (s.size() >= 2 && s.front() == '{' && skip_braces(s, 0) == s.size()) s = s.substr(1, s.size() - 2);
  return s;
}

// A plain unsigned decimal: "12", "1,234", "3.50", ".5", "5." (commas only in groups of 3).
std::optional<double> parse_decimal(std::string_view s) {
  if (s.empty()) return std::nullopt;
  std::string digits;
  size_t i = 0, group = 0;
  bool commas = false, first_group = true;
  for (; i < s.size() && s[i] != '.'; ++i) {
    if (is_digit(s[i])) {
      digits += s[i];
      ++group;
    } else if (s[i] == ',') {
      if (group == 0 || (first_group ? group > 3 : group != 3)) return std::nullopt;
      commas = true;
      first_group = false;
      group = 0;
    } else {
      return std::nullopt;
    }
  }
  if (commas && group != 3) return std::nullopt;
  if (i < s.size()) {  // fractional part
    digits += '.';
    for (++i; i < s.size(); ++i) {
      if (!is_digit(s[i])) return std::nullopt;
      digits += s[i];
    }
  }
  if (digits.empty() || digits == ".") return std::nullopt;
  return std::strtod(digits.c_str(), nullptr);
}

// "\frac{a}{b}", "\dfrac{a}{b}", "\tfrac{a}{b}", "\frac34" -> (a, b) as strings.
std::optional<std::pair<std::string, std::string>> split_latex_frac(std::string_view s) {
  for (std::string_view cmd : {"\\frac", "\\dfrac", "\\tfrac"}) {
    if (!starts_with(s, cmd)) continue;
    std::string_view rest = s.substr(cmd.size());
    if (rest.size() == 2 && is_digit(rest[0]) && is_digit(rest[1]))
      return std::pair{std::string(1, rest[0]), std::string(1, rest[1])};
    if (rest.empty() || rest[0] != '{') return std::nullopt;
    size_t a_end = skip_braces(rest, 0);
    if (a_end == std::string_view::npos || a_end >= rest.size() || rest[a_end] != '{') return std::nullopt;
    size_t b_end = skip_braces(rest, a_end);
    if (b_end != rest.size()) return std::nullopt;
    return std::pair{std::string(rest.substr(1, a_end - 2)), std::string(rest.substr(a_end + 1, b_end - a_end - 2))};
  }
  return std::nullopt;
}

std::optional<double> parse_normalized(std::string_view s, int depth) {
  if (s.empty() || depth > 3) return std::nullopt;
  double sign = 1.0;
  if (s[0] == '-' || s[0] == '+') {
    sign = s[0] == '-' ? -1.0 : 1.0;
    s.remove_prefix(1);
  }
  std::optional<double> value;
  if (auto frac = split_latex_frac(s)) {
    auto a = parse_normalized(normalize(frac->first), depth + 1);
    auto b = parse_normalized(normalize(frac->second), depth + 1);
    if (a && b && *b != 0.0) value = *a / *b;
  } else if (size_t slash = s.find('/'); slash != std::string_view::npos) {
    auto a = parse_decimal(s.substr(0, slash));
    std::string_view den = s.substr(slash + 1);
    double den_sign = 1.0;
    if (!den.empty() && den[0] == '-') {
      den_sign = -1.0;
      den.remove_prefix(1);
    }
    auto b = parse_decimal(den);
    if (a && b && *b != 0.0) value = *a / (den_sign * *b);
  } else {
    value = parse_decimal(s);
  }
  if (!value || !std::isfinite(*value)) return std::nullopt;
  return sign * *value;
}

}  // namespace

std::optional<std::string> extract_boxed(std::string_view text) {
  size_t best_at = 0, best = std::string_view::npos, best_len = 0;
  for (std::string_view cmd : {"\\boxed", "\\fbox"}) {
    size_t p = text.rfind(cmd);
    while (p != std::string_view::npos && (best == std::string_view::npos || p > best_at)) {
      size_t open = p + cmd.size();
      while (open < text.size() && text[open] == ' ') ++open;
      if (open < text.size() && text[open] == '{') {
        size_t close = skip_braces(text, open);
        if (close != std::string_view::npos) {
          best_at = p;
          best = open + 1;
          best_len = close - 1 - best;
          break;
        }
      }
      if (p == 0) break;
      p = text.rfind(cmd, p - 1);
    }
  }
  if (best == std::string_view::npos) return std::nullopt;
  return trim(text.substr(best, best_len));
}

std::optional<std::string> extract_last_number(std::string_view text) {
  // A sign counts only when not glued to a preceding word or bracket ("7-5" -> "5") and not a
  // spaced binary minus after a number ("10 - 3" -> "3").
  static const Regex number(
      R"((?:(?<![\w)\]}])(?<![\d)\]}] )-)?)"
      R"((?:\\[dt]?frac\{[^{}]*\}\{[^{}]*\}|\\[dt]?frac\d\d)"
      R"(|(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:/\d+(?:\.\d+)?)?|\.\d+))",
      "accuracy: number pattern");
  auto matches = number.find_all(text);
  if (matches.empty()) return std::nullopt;
  const auto& m = matches.back();
  return std::string(text.substr(m.begin, m.end - m.begin));
}

std::optional<double> parse_math_number(std::string_view s) {
  std::string n = normalize(s);
  if (auto boxed = extract_boxed(n)) n = normalize(*boxed);
  if (auto v = parse_normalized(n, 0)) return v;
  size_t eq = n.rfind('=');  // "x=5" -> 5
  if (eq != std::string::npos) return parse_normalized(n.substr(eq + 1), 0);
  return std::nullopt;
}

namespace {

std::string_view after_hashes(std::string_view answer) {
  size_t hashes = answer.rfind("####");
  return hashes == std::string_view::npos ? answer : answer.substr(hashes + 4);
}

// True for an answer written as a bare expression rather than prose or delimited LaTeX: no $,
// \( or \[, \boxed, no line breaks, and outside \commands and \text{} no word of four or more
// letters nor two words of two or more letters in a row ("We get 5").
bool looks_bare(std::string_view s) {
  if (s.empty() || s.size() > math::kMaxInput) return false;
  for (std::string_view marker : {"$", "\n", "\\(", "\\[", "\\boxed", "\\fbox"})
    if (s.find(marker) != std::string_view::npos) return false;
  size_t run = 0;
  bool word_before = false;  // a word of 2+ letters, then only spaces so far
  for (size_t i = 0; i <= s.size(); ++i) {
    char c = i < s.size() ? s[i] : '\0';
    if (std::isalpha(static_cast<unsigned char>(c))) {
      if (++run >= 4) return false;
      continue;
    }
    if (run >= 2) {
      if (word_before) return false;
      word_before = true;
    } else if (run == 1 || (c != ' ' && c != '\0')) {
      word_before = false;
    }
    run = 0;
    if (c == '\\') {  // skip a command name, and the braced text of \text-like commands
      size_t j = i + 1;
      while (j < s.size() && std::isalpha(static_cast<unsigned char>(s[j]))) ++j;
      std::string_view name = s.substr(i + 1, j - i - 1);
      bool text = name.substr(0, 4) == "text" || name.substr(0, 4) == "math" || name == "mbox" ||
                  name == "operatorname";
      i = j - 1;
      if (text && j < s.size() && s[j] == '{') {
        int depth = 0;
        for (; j < s.size(); ++j) {
          if (s[j] == '{') ++depth;
          if (s[j] == '}' && --depth == 0) break;
        }
        i = j;
      }
      word_before = false;
    }
  }
  return true;
}

math::Answer parse_text(std::string_view text) {
  std::string t = trim(text);
  if (looks_bare(t)) {
    math::Answer whole = math::parse_whole(t);
    if (whole.value) return whole;
  }
  return math::parse_answer(t);
}

}  // namespace

math::Answer parse_gold_answer(std::string_view answer) { return parse_text(after_hashes(answer)); }

math::Answer parse_completion_answer(std::string_view completion) { return math::parse_answer(completion); }

std::optional<std::string> extract_completion_answer(std::string_view completion) {
  math::Answer a = math::parse_answer(completion);
  if (a.value) return a.text;
  if (!a.fallback.empty()) return "$" + a.fallback + "$";  // unparsed LaTeX: compared as text
  return std::nullopt;
}

std::string reference_answer(std::string_view answer) {
  std::string t = trim(after_hashes(answer));
  if (looks_bare(t) && math::parse_whole(t).value) return t;
  math::Answer a = math::parse_answer(t);
  if (a.value) return a.text;
  if (!a.fallback.empty()) return "$" + a.fallback + "$";
  return t;
}

bool math_answers_equal(std::string_view predicted, std::string_view reference) {
  return math::verify(parse_text(reference), parse_text(predicted));
}

}  // namespace grpo::rollout
