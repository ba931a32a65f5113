// A split/replace pattern as tokenizer.json writes it: {"String": "..."} (literal) or
// {"Regex": "..."}. find_matches() returns the pieces of a string, each flagged match or not,
// exactly as Hugging Face's Pattern::find_matches does.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/text/json_where.h"
#include "core/text/regex.h"

namespace grpo::text {

struct Span {
  size_t start, end;
  bool match;
};

class Pattern {
public:
  // `j` is {"String": s} or {"Regex": r} (a bare string is taken as literal).
  Pattern(const json& j, const JsonWhere& where);
  explicit Pattern(std::string literal) : literal_(std::move(literal)) {}

  // Consecutive spans covering `s`; an empty `s` gives one empty non-match.
  void find_matches(std::string_view s, std::vector<Span>& out) const;
  // `s` with every match replaced by `content`.
  std::string replace_all(std::string_view s, std::string_view content) const;

private:
  void matches(std::string_view s, std::vector<std::pair<size_t, size_t>>& out) const;
  std::string literal_;
  std::unique_ptr<Regex> regex_;
};

}  // namespace grpo::text
