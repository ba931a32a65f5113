// A small RAII wrapper over PCRE2 (8-bit, UTF + UCP) for the rewards: compile once, search or
// full-match many times. Subjects may hold invalid UTF-8 (a completion cut mid-character); the
// pattern is compiled with PCRE2_MATCH_INVALID_UTF so such text simply does not match there.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace grpo::rollout {

struct RegexMatch {
  size_t begin = 0, end = 0;  // byte offsets of the whole match in the subject
};

class Regex {
public:
  // Throws grpo::Error naming `context`, the pattern, and the offset of a syntax error.
  Regex(const std::string& pattern, const std::string& context = "regex", bool dotall = false);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // The first match at or after byte `start`, if any.
  std::optional<RegexMatch> search(std::string_view subject, size_t start = 0) const;
  // Every non-overlapping match, left to right.
  std::vector<RegexMatch> find_all(std::string_view subject) const;
  // True when the pattern matches the whole subject (anchored at both ends).
  bool full_match(std::string_view subject) const;
  const std::string& pattern() const { return pattern_; }

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string pattern_;
};

}  // namespace grpo::rollout
