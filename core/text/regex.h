// A compiled PCRE2 regular expression (UTF + UCP, JIT when available) standing in for the
// Oniguruma regexes Hugging Face tokenizers use in Split, Replace and ByteLevel.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace grpo::text {

class Regex {
public:
  // Throws grpo::Error naming `where` when the pattern does not compile.
  Regex(const std::string& pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Every non-overlapping match, left to right, as [start, end) byte offsets. `s` must be
  // valid UTF-8. After an empty match the search resumes one character later (as Oniguruma).
  void find_all(std::string_view s, std::vector<std::pair<size_t, size_t>>& out) const;
  const std::string& pattern() const { return pattern_; }

  // `s` with every regex metacharacter escaped, for literal (String) patterns.
  static std::string escape(std::string_view s);

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string pattern_;
};

}  // namespace grpo::text
