// Answer extraction and LaTeX normalization (see math_extract.h).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "core/rollout/math_extract.h"

#include <pcre2.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

namespace grpo::rollout::math {

namespace {

// ---------------------------------------------------------------------------------------------
// PCRE2 with capture groups

struct Span {
  size_t begin = std::string::npos, end = std::string::npos;
  bool set() const { return begin != std::string::npos; }
};

class Pattern {
public:
  Pattern(const std::string& pattern, bool dotall) {
    int err = 0;
    PCRE2_SIZE offset = 0;
    uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;
    if (dotall) options |= PCRE2_DOTALL;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &err, &offset,
                          nullptr);
    if (!code_) {
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(err, buf, sizeof buf);
      throw std::logic_error("math_extract: bad pattern at " + std::to_string(offset) + ": " +
                             reinterpret_cast<const char*>(buf) + " in " + pattern);
    }
    context_ = pcre2_match_context_create(nullptr);
    pcre2_set_match_limit(context_, 2000000);
    pcre2_set_depth_limit(context_, 100000);
  }
  ~Pattern() {
    pcre2_match_context_free(context_);
    pcre2_code_free(code_);
  }
  Pattern(const Pattern&) = delete;
  Pattern& operator=(const Pattern&) = delete;

  int group(const char* name) const {
    return pcre2_substring_number_from_name(code_, reinterpret_cast<PCRE2_SPTR>(name));
  }

  // Every non-overlapping match, left to right, with all capture groups.
  std::vector<std::vector<Span>> find_all(std::string_view s) const {
    std::vector<std::vector<Span>> out;
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
        pcre2_match_data_create_from_pattern(code_, nullptr), &pcre2_match_data_free);
    size_t pos = 0;
    while (pos <= s.size() && out.size() < 10000) {
      int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), pos, 0, data.get(), context_);
      if (rc < 0) break;
      uint32_t count = pcre2_get_ovector_count(data.get());
      PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data.get());
      std::vector<Span> groups(count);
      for (uint32_t k = 0; k < count; ++k)
        if (ov[2 * k] != PCRE2_UNSET) groups[k] = {ov[2 * k], ov[2 * k + 1]};
      size_t end = ov[1];
      pos = end > ov[0] ? end : end + 1;
      while (pos < s.size() && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80) ++pos;
      out.push_back(std::move(groups));
    }
    return out;
  }

  // Replaces every match: `replace(groups)` gives the replacement text.
  template <typename F>
  std::string substitute(std::string_view s, F&& replace) const {
    std::string out;
    size_t last = 0;
    for (const auto& m : find_all(s)) {
      out.append(s.substr(last, m[0].begin - last));
      out += replace(m, s);
      last = m[0].end;
    }
    out.append(s.substr(last));
    return out;
  }

private:
  pcre2_code* code_ = nullptr;
  pcre2_match_context* context_ = nullptr;
};

std::string_view text_of(std::string_view s, const Span& sp) {
  return sp.set() ? s.substr(sp.begin, sp.end - sp.begin) : std::string_view();
}

std::string trim(std::string_view s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return std::string(s.substr(a, b - a));
}

// ---------------------------------------------------------------------------------------------
// Normalization

// The content of \boxed{...}/\fbox{...} groups from the right: "All" joins every one with ",";
// "Last" keeps the last one and the boxes just before it (closer than 10 characters, or than 70
// with "and", "or", "," or ";" between them). Unclosed: the rest of the text.
std::string extract_boxed_content(std::string_view text, BoxedMode mode) {
  static const Pattern separator(R"(\b(?:and|or)\b|,|;)", false);
  std::vector<std::string> results;
  size_t current = text.size(), max_pos = text.size();
  size_t later_box_start = std::string::npos;
  for (int guard = 0; guard < 1000; ++guard) {
    size_t bi = current == 0 ? std::string::npos : text.rfind("\\boxed", current - 1);
    size_t fi = current == 0 ? std::string::npos : text.rfind("\\fbox", current - 1);
    if (bi == std::string::npos && fi == std::string::npos) break;
    bool boxed = fi == std::string::npos || (bi != std::string::npos && bi > fi);
    size_t start = boxed ? bi : fi;
    size_t j = start + (boxed ? 6 : 5);
    while (j < max_pos && std::isspace(static_cast<unsigned char>(text[j]))) ++j;
    if (j >= max_pos) break;
    if (text[j] != '{') {
      if (results.empty()) results.emplace_back(text.substr(j));
      break;
    }
    size_t close = std::string::npos;
    int depth = 0;
    for (size_t k = j; k < max_pos; ++k) {
      if (text[k] == '{') ++depth;
      if (text[k] == '}' && --depth == 0) {
        close = k;
        break;
      }
    }
    if (close == std::string::npos) {
      if (results.empty()) results.emplace_back(text.substr(j));
      break;
    }
    std::string content = trim(text.substr(j + 1, close - j - 1));
    if (mode == BoxedMode::Last && later_box_start != std::string::npos) {
      std::string_view between = text.substr(close + 1, later_box_start - close - 1);
      bool near = between.size() < 10;
      bool listed = content != results.back() && between.size() < 70 && !separator.find_all(between).empty();
      if (!near && !listed) break;
    }
    if (results.empty() || results.back() != content) results.push_back(content);
    later_box_start = start;
    max_pos = start;
    current = start;
  }
  if (results.empty()) return std::string(text);
  std::string out;
  for (auto it = results.rbegin(); it != results.rend(); ++it) out += (out.empty() ? "" : ",") + *it;
  return out;
}

struct Replacement {
  const char* pattern;
  const char* with;
};

// Applied in one left-to-right pass, the first alternative that matches at a position winning.
const Replacement kReplacements[] = {
    {R"(\\math(?:rm|it|bf|sf|tt))", "\\text"},
    {R"(\\text(?:normal|bf|it|rm|sf|tt))", "\\text"},
    {R"(\\mbox)", "\\text"},
    {R"(\\[dtc]frac)", "\\frac"},
    {R"(\s\.(?=\d))", " 0."},
    {R"(\{\.(?=\d))", "{0."},
    {R"(~=)", "\\approx"},
    {R"(\s*\{\s*,\s*\})", ","},
    {R"((?<![a-zA-Z\\])(?:,?\s*(?:and|or))(?![a-zA-Z]))", ","},
    {R"(,?\s*\\text\{\s*(?:and|or)\s*\})", ","},
    {R"((?<!\\)\\\s)", " "},
    {R"(infinity)", "\\infty"},
    {R"(,?\\[lc]?dots)", " ..."},
    {R"(\s*\bpercentage\b)", "%"},
    {R"(\s*\bpercent\b)", "%"},
    {R"(\s*\bpct\b)", "%"},
    {R"(\\text\{\s*(?:percent|pct|percentage)\s*\})", "%"},
    {R"((?<![\\a-zA-Z])inf(?![a-zA-Z]))", "\\infty"},
    {R"((?<![\\a-zA-Z])sqrt(?=\s*[({]))", "\\sqrt"},
};

const Pattern& replacements_pattern() {
  static const Pattern p = [] {
    std::string all;
    for (const auto& r : kReplacements) all += (all.empty() ? "(" : "|(") + std::string(r.pattern) + ")";
    return Pattern(all, false);
  }();
  return p;
}

// Unit words dropped from the end of an answer ("12 cm", "5 dollars", "3 hours").
const char* const kUnits =
    "integer|point|feet|foot|digit|pound|meal|edge|student|children|child|ticket|multiple|degree|mph|kmph|kph|"
    "kmh|ft|sq m|deg|mile|monkey|prime|ratio|rd|gm|lb|lbs|tile|per|dm|gain|way|west|east|north|south|"
    "no change|men|soldier|pie|excess|st|inch|inches|noon|cent|by|gal|acre|rise|th|sq|mark|toy|coin|gallon|"
    "profit|yr|women|am|pm|hr|cu cm|square|rupee|round|cubic|cc|ohm|number|day|hour|minute|min|second|man|"
    "woman|sec|cube|mt|hectare|more|unit|cm|mm|km|kg|mg|ml|month|week|apple|liter|litre|loss|yard|year|"
    "increase|decrease|less|metre|meter|dollar|euro|yuan|people|person|page|book|cookie|candies|candy|"
    "box|bag|car|marble|egg|ounce|oz|time|m\\^2|cm\\^2|km\\^2|m\\^3|cm\\^3";

std::string normalize_impl(std::string_view in, BoxedMode boxed) {
  std::string s(in);
  if (boxed != BoxedMode::None && (s.find("\\boxed") != std::string::npos || s.find("\\fbox") != std::string::npos))
    s = extract_boxed_content(s, boxed);

  static const Pattern left_right(R"(\\m?(?:left|right)(?![a-zA-Z])\.?)", false);
  s = left_right.substitute(s, [](const auto&, std::string_view) { return std::string(); });
  static const Pattern remove(
      R"(\\mathrm\{th\}|\\!\s*|\\text\s*\{\s*\}|\\\$|\$|(?<!\\)["']|\\displaystyle|\\textstyle)", false);
  s = remove.substitute(s, [](const auto&, std::string_view) { return std::string(); });
  s = replacements_pattern().substitute(s, [](const std::vector<Span>& m, std::string_view) {
    for (size_t k = 1; k < m.size() && k <= std::size(kReplacements); ++k)
      if (m[k].set()) return std::string(kReplacements[k - 1].with);
    return std::string();
  });
  for (char& c : s)
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
  if (s.find("matrix") == std::string::npos) {
    static const Pattern double_backslash(R"(\\\\(?=[a-zA-Z]))", false);
    s = double_backslash.substitute(s, [](const auto&, std::string_view) { return std::string("\\"); });
  }

  // Units: a trailing \text{...} (with ^2; unlike latex2sympy, only a brace-balanced one, so
  // "\frac{1}{\text{e}}" stays whole), then unit words, twice.
  static const Pattern text_unit(R"((\\text\{[^{}]*\})(\^\d|\^\{\d\}|\{\^\d\})?\s*$)", false);
  {
    std::string t = trim(text_unit.substitute(s, [](const auto&, std::string_view) { return std::string(); }));
    if (!t.empty() && t != trim(s)) s = t;
  }
  static const Pattern unit_words(std::string(R"((\d|\}|\s)\s*(?:)") + kUnits +
                                      R"()(?:s|es)?(?:\^\d|²|³)?\s*$)",
                                  false);
  static const Pattern unit_letters(R"((\d)\s+(?:m|g|s|h|l|km|cm)(?:\^\d|²|³)?\s*$)", false);
  for (int round = 0; round < 2; ++round) {
    for (const Pattern* p : {&unit_words, &unit_letters}) {
      std::string t = p->substitute(s, [](const std::vector<Span>& m, std::string_view src) {
        return std::string(text_of(src, m[1]));
      });
      if (!trim(t).empty() && t != s) s = t;
    }
  }
  s = trim(s);
  if (!s.empty() && s[0] == '.') s = "0" + s;
  return s;
}

// Sentence punctuation written inside the math ("$\frac{1}{3}.$"): one trailing "." or ",",
// not an ellipsis.
std::string strip_trailing_punctuation(std::string_view in) {
  std::string s = trim(in);
  if (s.size() >= 2 && (s.back() == '.' || s.back() == ',') && s[s.size() - 2] != '.') {
    s.pop_back();
    s = trim(s);
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Extraction patterns

// One LaTeX environment; a branch-reset group gives every kind the one content group <p>c.
// Content runs are possessive so the lazy scan for the closer advances a run at a time.
std::string env_pattern(const std::string& p) {
  const std::string c = "(?<" + p + "c>";
  const std::string dd = R"((?:[^$]++|\$(?!\$))+?)";
  const std::string br = R"((?:[^\\]++|\\(?!\]))+?)";
  const std::string d = R"((?:[^\n$\\]++|\\\$|\\)+?)";
  const std::string pa = R"((?:[^\\\n]++|\\(?!\)))+?)";
  const std::string sb = R"([^\n\]\[]++)";
  const std::string fr = R"(-?\\frac\{-?\d+(?:[.,]\d+)?\}\{-?\d+(?:[.,]\d+)?\})";
  std::string alts = "(?|(?<!\\\\)\\$\\$" + c + dd + ")(?<!\\\\)\\$\\$" +
                     "|(?<!\\\\)\\\\\\[" + c + br + ")(?<!\\\\)\\\\\\]" +
                     "|(?<!\\\\|\\d)\\$" + c + d + ")(?<!\\\\)\\$" +
                     "|(?<!\\\\)\\\\\\(" + c + pa + ")(?<!\\\\)\\\\\\)" +
                     "|\\s\\[" + c + sb + ")\\]\\s" +
                     "|" + c + fr + "))";
  return "(?:" + alts + "\\s*(?<" + p + "pct>\\\\?%|[Pp]ercentage|[Pp]ercent|[Pp]ct)?)";
}

constexpr int kChain = 6;  // environments joined by ",", "and", "or"

std::string chain_pattern() {
  std::string out = env_pattern("e0_");
  for (int k = 1; k < kChain; ++k)
    out += "(?:\\s*(?:,?and|,?or|,)\\s*" + env_pattern("e" + std::to_string(k) + "_") + ")?";
  return out;
}

enum class CandKind { Latex, PlainBoxed, Expr };

struct Rule {
  int priority;
  CandKind kind;
  std::unique_ptr<Pattern> pattern;
  // group numbers
  std::vector<std::array<int, 2>> envs;  // per chained environment: content, pct
  int ex = -1, mw = -1, mn = -1, md = -1, pct = -1, exp = -1;
  std::array<int, 3> ints{-1, -1, -1}, decs{-1, -1, -1};
};

std::vector<Rule> build_rules(const ExtractConfig& config) {
  std::vector<Rule> rules;
  auto add_latex = [&](int priority, const std::string& pat) {
    Rule r;
    r.priority = priority;
    r.kind = CandKind::Latex;
    r.pattern = std::make_unique<Pattern>(pat, true);
    for (int k = 0; k < kChain; ++k) {
      std::array<int, 2> g{};
      std::string prefix = "e" + std::to_string(k) + "_";
      g[0] = r.pattern->group((prefix + "c").c_str());
      g[1] = r.pattern->group((prefix + "pct").c_str());
      r.envs.push_back(g);
    }
    rules.push_back(std::move(r));
  };
  if (config.latex) {
    const std::string chain = chain_pattern();
    add_latex(0, "(?i:final answer is):?\\s*" + chain + "\\.?\\s?I hope");
    add_latex(50, "(?i:final answer.{0,100}?)\\s+is:?\\s*" + chain);
    add_latex(100, "(?i:answer):.{0,50}?" + chain);
    add_latex(200, "(?i:answer).{0,50}?" + chain);
    add_latex(300, chain);  // its environments holding \boxed also make priority-0 candidates
  }
  if (config.expr) {
    const std::string mixed =
        R"((?<mw>[+-]?(?:[1-9]\d{0,2}(?: \d{3})+|\d+)) (?<mn>\d+)/(?<md>\d+)(?![\d/]|[.,]\d))";
    const std::string number = "(?<!\\d)(?:" + mixed +
                               R"(|(?<i1>-?[1-9]\d{0,2}(?:[ ,]\d{3})+)(?<d1>\.\d+)?)"
                               R"(|(?<i2>-?\d+)(?<d2>[.,]\d+)|(?<d3>\.\d+)|(?<i3>-?\d+))(?<exp>[eE][+-]?\d{1,4}(?![\d.]))?)"
                               R"((?<pct>\s*(?:%|[Pp]ercentage|[Pp]ercent|[Pp]ct))?)";
    const std::string ops = R"(+\-*×/^()÷)";
    const std::string chars = "[\\d.\\s" + ops + "]";
    const std::string expr = "(?<ex>-?\\(?-?\\d" + chars + "*[" + ops + "]" + chars + "+\\)?)";
    const std::string prefix = R"((?:^|\s|=)(?:\*\*)?)";
    const std::string suffix = R"((?:\*\*)?(?:\.|,|:|\s|\)|\$|$))";
    const std::string currency = "[$€£¥₹₽₪₩₫฿₦₱₺₴₿¢]?";
    const std::string expr_a = "(?:" + prefix + expr + suffix + ")";
    const std::string number_a = "(?:" + prefix + currency + number + ")";
    const std::string either = "(?:" + expr_a + "|" + number_a + ")";
    auto add_expr = [&](int priority, const std::string& pat) {
      Rule r;
      r.priority = priority;
      r.kind = CandKind::Expr;
      r.pattern = std::make_unique<Pattern>(pat, false);
      r.ex = r.pattern->group("ex");
      r.mw = r.pattern->group("mw");
      r.mn = r.pattern->group("mn");
      r.md = r.pattern->group("md");
      r.pct = r.pattern->group("pct");
      r.exp = r.pattern->group("exp");
      r.ints = {r.pattern->group("i1"), r.pattern->group("i2"), r.pattern->group("i3")};
      r.decs = {r.pattern->group("d1"), r.pattern->group("d2"), r.pattern->group("d3")};
      rules.push_back(std::move(r));
    };
    add_expr(0, "(?i:final answer is):?\\s*" + either + "\\.?\\s?I hope");
    add_expr(50, "(?i:final answer.{0,100}?)\\s+is:?" + either);
    add_expr(100, "(?i:answer):(?:.{0,100}=\\s*|.{0,50}?)" + either + "(?!\\s*=)");
    add_expr(200, "(?i:answer)(?:.{0,100}=\\s*|.{0,50}?)" + either + "(?!\\s*=)");
    add_expr(300, expr_a);
    add_expr(300, number_a);
  }
  return rules;
}

const std::vector<Rule>& rules_for(const ExtractConfig& config) {
  static const std::vector<Rule> both = build_rules({true, true});
  static const std::vector<Rule> latex = build_rules({true, false});
  static const std::vector<Rule> expr = build_rules({false, true});
  static const std::vector<Rule> none;
  if (config.latex && config.expr) return both;
  if (config.latex) return latex;
  if (config.expr) return expr;
  return none;
}

struct Candidate {
  int priority = 0;
  size_t begin = 0, end = 0;
  const Rule* rule = nullptr;  // null: the plain \boxed{...} candidate
  std::vector<Span> groups;
  size_t env_first = 0, env_last = kChain - 1;  // the chained environments used
};

struct Extracted {
  std::optional<Value> value;
  std::string text, fallback;
  std::vector<Span> failed_spans;  // LaTeX that did not parse
  std::vector<Span> value_spans;   // for Expr candidates
};

bool is_plain_number(std::string_view s) {
  if (s.empty()) return false;
  size_t k = s[0] == '-' ? 1 : 0;
  if (k >= s.size()) return false;
  bool digit = false, dot = false;
  for (; k < s.size(); ++k) {
    if (std::isdigit(static_cast<unsigned char>(s[k]))) {
      digit = true;
    } else if (s[k] == '.' && !dot) {
      dot = true;
    } else {
      return false;
    }
  }
  return digit;
}

Value percent_of(Value v) {
  if (v.kind != Value::Kind::Expr) return v;
  auto n = std::make_shared<Node>();
  n->op = Op::Percent;
  n->kids = {v.expr};
  v.expr = n;
  return v;
}

// One LaTeX environment's content: normalized, parsed, its text.
struct EnvResult {
  std::optional<Value> value;
  std::string normalized, text;
};

EnvResult parse_env(std::string_view content, bool percent, BoxedMode mode) {
  EnvResult r;
  r.normalized = normalize_impl(strip_trailing_punctuation(content), mode);
  r.normalized = strip_trailing_punctuation(r.normalized);
  r.value = parse_math(r.normalized, Syntax::Latex);
  if (percent && r.value) r.value = percent_of(std::move(*r.value));
  std::string shown = r.normalized;
  if (percent) shown = is_plain_number(shown) ? shown + "\\%" : "(" + shown + ")\\%";
  r.text = shown;
  return r;
}

void flatten_into(std::vector<Value>& out, Value v) {
  if (v.kind == Value::Kind::Set) {
    for (auto& x : v.items) out.push_back(std::move(x));
  } else {
    out.push_back(std::move(v));
  }
}

std::string latex_answer_text(const std::string& shown) {
  return is_plain_number(shown) ? shown : "$" + shown + "$";
}

Span group_of(const Candidate& c, int k) {
  return k > 0 && static_cast<size_t>(k) < c.groups.size() ? c.groups[k] : Span{};
}
Span env_content(const Candidate& c, size_t e) { return group_of(c, c.rule->envs[e][0]); }

Extracted extract_latex(std::string_view s, const Candidate& c) {
  Extracted out;
  std::vector<EnvResult> envs;
  if (!c.rule) {  // plain \boxed{...} to the last brace: the last box (and its neighbours)
    envs.push_back(parse_env(text_of(s, c.groups[0]), false, BoxedMode::Last));
    out.failed_spans.push_back(c.groups[0]);
  } else {
    for (size_t e = c.env_first; e <= c.env_last && e < c.rule->envs.size(); ++e) {
      Span content = env_content(c, e);
      if (!content.set()) continue;
      bool pct = group_of(c, c.rule->envs[e][1]).set();
      envs.push_back(parse_env(text_of(s, content), pct, BoxedMode::All));
      if (envs.size() == 1) out.failed_spans.push_back(content);
    }
  }
  if (envs.empty()) return out;
  out.fallback = envs[0].normalized;
  bool all = std::all_of(envs.begin(), envs.end(), [](const EnvResult& e) { return e.value.has_value(); });
  if (envs.size() > 1 && all) {
    Value set;
    set.kind = Value::Kind::Set;
    std::string text;
    for (auto& e : envs) {
      flatten_into(set.items, std::move(*e.value));
      text += (text.empty() ? "" : ", ") + e.text;
    }
    out.value = std::move(set);
    out.text = "$" + text + "$";
    out.fallback.clear();
    for (auto& e : envs) out.fallback += (out.fallback.empty() ? "" : " and ") + e.normalized;
  } else {
    out.value = std::move(envs[0].value);
    out.text = latex_answer_text(envs[0].text);
  }
  if (out.value) out.failed_spans.clear();
  return out;
}

// "4 4/9": 4 + 4/9 for a proper fraction; anything else is a number that equals nothing.
std::optional<Value> mixed_number(std::string_view whole, std::string_view num, std::string_view den) {
  std::string w;
  for (char ch : whole)
    if (ch != ' ') w += ch;
  bool negative = !w.empty() && w[0] == '-';
  if (!w.empty() && (w[0] == '-' || w[0] == '+')) w.erase(0, 1);
  if (w.empty() || w.size() > 18 || num.size() > 18 || den.size() > 18) return std::nullopt;
  auto num_node = [](std::string_view digits) {
    Num n;
    n.p = std::strtoll(std::string(digits).c_str(), nullptr, 10);
    n.d = static_cast<double>(n.p);
    auto node = std::make_shared<Node>();
    node->op = Op::Num;
    node->num = n;
    return node;
  };
  int64_t a = std::strtoll(std::string(num).c_str(), nullptr, 10), b = std::strtoll(std::string(den).c_str(), nullptr, 10);
  auto node = std::make_shared<Node>();
  if (b == 0 || a >= b) {
    node->op = Op::Invalid;
  } else {
    auto frac = std::make_shared<Node>();
    frac->op = Op::Div;
    frac->kids = {num_node(num), num_node(den)};
    node->op = Op::Add;
    node->kids = {num_node(w), frac};
  }
  Value v;
  v.expr = node;
  if (negative) {
    auto n = std::make_shared<Node>();
    n->op = Op::Neg;
    n->kids = {node};
    v.expr = n;
  }
  return v;
}

Extracted extract_expr(std::string_view s, const Candidate& c) {
  Extracted out;
  const Rule& r = *c.rule;
  auto grp = [&](int k) -> Span { return k > 0 && static_cast<size_t>(k) < c.groups.size() ? c.groups[k] : Span{}; };
  bool pct = grp(r.pct).set();
  std::string number;
  if (grp(r.mw).set()) {
    number = std::string(text_of(s, grp(r.mw))) + " " + std::string(text_of(s, grp(r.mn))) + "/" +
             std::string(text_of(s, grp(r.md)));
    out.value_spans = {grp(r.mw), grp(r.md)};
  } else {
    std::string integer, decimal;
    for (int k : r.ints)
      if (grp(k).set()) {
        integer = std::string(text_of(s, grp(k)));
        out.value_spans.push_back(grp(k));
        break;
      }
    for (int k : r.decs)
      if (grp(k).set()) {
        decimal = std::string(text_of(s, grp(k)));
        out.value_spans.push_back(grp(k));
        break;
      }
    if (!integer.empty() || !decimal.empty()) {
      std::string cleaned;
      for (char ch : integer)
        if (ch != ',' && ch != ' ') cleaned += ch;
      bool negative = !cleaned.empty() && cleaned[0] == '-';
      if (negative) cleaned.erase(0, 1);
      size_t nz = cleaned.find_first_not_of('0');
      cleaned = nz == std::string::npos ? "0" : cleaned.substr(nz);
      std::replace(decimal.begin(), decimal.end(), ',', '.');
      number = (negative ? "-" : "") + cleaned + decimal + std::string(text_of(s, grp(r.exp)));
    }
  }
  if (!number.empty()) {
    out.fallback = number;
    if (grp(r.mw).set()) {
      out.value = mixed_number(text_of(s, grp(r.mw)), text_of(s, grp(r.mn)), text_of(s, grp(r.md)));
    } else {
      out.value = parse_math(number, Syntax::Plain);
    }
    if (out.value && pct) out.value = percent_of(std::move(*out.value));
    out.text = pct ? number + "%" : number;
    return out;
  }
  Span ex = grp(r.ex);
  if (!ex.set()) return out;
  out.value_spans = {ex};
  std::string e;
  for (char ch : text_of(s, ex)) e += ch == '\n' ? ' ' : ch;
  e = trim(e);
  out.fallback = std::string(text_of(s, ex));
  out.value = parse_math(e, Syntax::Plain);
  out.text = e;
  return out;
}

// The environments of a plain chain that hold a \boxed{}: math_verify's priority-0 "LaTeX
// environment with \boxed" candidates, runs of consecutive such environments joined.
void add_boxed_environments(std::string_view text, const Candidate& chain, std::vector<Candidate>& out) {
  size_t e = 0;
  while (e < kChain) {
    Span sp = env_content(chain, e);
    if (!sp.set()) break;
    if (text.substr(sp.begin, sp.end - sp.begin).find("\\boxed") == std::string_view::npos) {
      ++e;
      continue;
    }
    size_t last = e;
    while (last + 1 < kChain) {
      Span next = env_content(chain, last + 1);
      if (!next.set() || text.substr(next.begin, next.end - next.begin).find("\\boxed") == std::string_view::npos) break;
      ++last;
    }
    Candidate c = chain;
    c.priority = 0;
    c.env_first = e;
    c.env_last = last;
    c.begin = env_content(chain, e).begin;
    Span tail = env_content(chain, last);
    bool chain_end = last + 1 >= kChain || !env_content(chain, last + 1).set();
    c.end = chain_end ? chain.end : tail.end + 1;
    out.push_back(std::move(c));
    e = last + 1;
  }
}

// "\\[" with no "\\]" after it, and "\\(" with no "\\)" after it on its line, can never open an
// environment; they are blanked (same length) so the environment patterns do not rescan the rest
// of the text from each of them.
std::string blank_unclosed_openers(std::string_view text) {
  std::string s(text);
  auto escaped = [&](size_t k) {  // s[k] is preceded by an odd number of backslashes
    size_t n = 0;
    while (k > n && s[k - 1 - n] == '\\') ++n;
    return n % 2 == 1;
  };
  bool closer_after = false;  // a "\\]" later in the text
  bool paren_closer = false;  // a "\\)" later on this line
  for (size_t k = s.size(); k-- > 1;) {
    if (s[k] == '\n') paren_closer = false;
    if (s[k - 1] != '\\' || escaped(k - 1)) continue;
    if (s[k] == ']') closer_after = true;
    if (s[k] == ')') paren_closer = true;
    if (s[k] == '[' && !closer_after) s[k - 1] = ' ';
    if (s[k] == '(' && !paren_closer) s[k - 1] = ' ';
  }
  return s;
}

constexpr size_t kMaxTries = 256;  // candidates tried per priority level

bool overlaps(const std::vector<Span>& a, const std::vector<Span>& b) {
  for (const auto& x : a)
    for (const auto& y : b)
      if (x.set() && y.set() && x.begin < y.end && x.end > y.begin) return true;
  return false;
}

}  // namespace

std::string normalize_latex(std::string_view latex, BoxedMode boxed) {
  try {
    return normalize_impl(latex, boxed);
  } catch (const std::exception&) {
    return std::string(latex);
  }
}

Answer parse_answer(std::string_view text, const ExtractConfig& config) {
  Answer answer;
  try {
    if (text.size() > kMaxScan) {
      size_t cut = text.size() - kMaxScan;
      while (cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) ++cut;
      text = text.substr(cut);
    }
    const std::string blanked = blank_unclosed_openers(text);
    text = blanked;
    std::vector<Candidate> all;
    for (const auto& rule : rules_for(config)) {
      for (auto& groups : rule.pattern->find_all(text)) {
        Candidate c;
        c.priority = rule.priority;
        c.rule = &rule;
        c.begin = groups[0].begin;
        c.end = groups[0].end;
        c.groups = std::move(groups);
        if (rule.kind == CandKind::Latex && rule.priority == 300) add_boxed_environments(text, c, all);
        all.push_back(std::move(c));
      }
    }
    if (config.latex) {  // \boxed{.+} (DOTALL): from the first \boxed{ to the last "}"
      size_t first = text.find("\\boxed{");
      size_t last = text.rfind('}');
      if (first != std::string_view::npos && last != std::string_view::npos && last > first + 7) {
        Candidate c;
        c.priority = 0;
        c.begin = first;
        c.end = last + 1;
        c.groups = {Span{first, last + 1}};
        all.push_back(std::move(c));
      }
    }
    std::vector<int> priorities;
    for (const auto& c : all) priorities.push_back(c.priority);
    std::sort(priorities.begin(), priorities.end());
    priorities.erase(std::unique(priorities.begin(), priorities.end()), priorities.end());
    std::vector<Span> failed;
    bool have_fallback = false;
    for (int priority : priorities) {
      std::vector<const Candidate*> group;
      for (const auto& c : all)
        if (c.priority == priority) group.push_back(&c);
      std::stable_sort(group.begin(), group.end(), [](const Candidate* a, const Candidate* b) {
        if (a->end != b->end) return a->end > b->end;
        return a->begin < b->begin;
      });
      if (group.size() > kMaxTries) group.resize(kMaxTries);  // the rightmost ones
      for (const Candidate* c : group) {
        bool is_expr = c->rule && c->rule->kind == CandKind::Expr;
        Extracted e;
        if (is_expr) {
          e = extract_expr(text, *c);
          if (!failed.empty() && overlaps(e.value_spans, failed)) continue;
        } else {
          e = extract_latex(text, *c);
          if (!e.value) failed.insert(failed.end(), e.failed_spans.begin(), e.failed_spans.end());
        }
        if (!have_fallback && !e.fallback.empty()) {
          answer.fallback = e.fallback;
          have_fallback = true;
        }
        if (e.value) {
          answer.value = std::move(e.value);
          answer.text = std::move(e.text);
          return answer;
        }
      }
    }
  } catch (const std::exception&) {
    answer.value.reset();
    answer.text.clear();
  }
  return answer;
}

Answer parse_whole(std::string_view text) {
  Answer answer;
  try {
    if (text.size() > kMaxInput) return answer;
    std::string t = trim(text);
    if (!t.empty() && t.find_first_not_of("0123456789,. +-") == std::string::npos) {
      // a plain number reads as math_verify's number pattern does ("1,22" is 1.22)
      if (auto v = parse_math(t, Syntax::Plain)) {
        answer.value = std::move(v);
        answer.text = answer.fallback = t;
        return answer;
      }
    }
    EnvResult r = parse_env(text, false, BoxedMode::All);
    answer.fallback = r.normalized;
    answer.value = std::move(r.value);
    if (answer.value) answer.text = latex_answer_text(r.text);
  } catch (const std::exception&) {
    answer.value.reset();
  }
  return answer;
}

bool verify(const Answer& gold, const Answer& pred, const CompareOptions& options) {
  if (gold.value && pred.value && values_equal(*gold.value, *pred.value, options)) return true;
  std::string g = trim(gold.fallback), p = trim(pred.fallback);
  return !g.empty() && g == p;
}

}  // namespace grpo::rollout::math
