// The Jinja lexer (see jinja_parse.h): template text to tokens, applying Jinja2's whitespace
// control and transformers' trim_blocks/lstrip_blocks. Internal to jinja_lexer.cpp and
// jinja_parse.cpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/text/jinja_parse.h"

namespace grpo::text::jinja {

enum class Tok { Data, BlockBegin, BlockEnd, VarBegin, VarEnd, Name, String, Int, Float, Op, Eof };

struct Token {
  Tok type;
  std::string value;  // Data text, name, string contents, operator
  size_t offset = 0;
  int64_t ival = 0;
  double fval = 0;
};

// "'%}'", "a string", "the end of the template", ... for errors.
std::string describe(const Token& t);

// Line:column of byte offsets (columns count code points, from 1).
class Lines {
public:
  explicit Lines(const std::string& s) : s_(s) {
    starts_.push_back(0);
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i] == '\n') starts_.push_back(i + 1);
  }
  Pos at(size_t offset) const {
    auto it = std::upper_bound(starts_.begin(), starts_.end(), offset);
    size_t line = static_cast<size_t>(it - starts_.begin());
    size_t start = starts_[line - 1];
    size_t end = std::min(offset, s_.size());
    return {static_cast<int>(line), static_cast<int>(code_point_count(std::string_view(s_).substr(start, end - start))) + 1};
  }

private:
  const std::string& s_;
  std::vector<size_t> starts_;
};

// All tokens of `src` (newlines already normalized), ending with Tok::Eof. Throws grpo::Error
// naming `name` and line:col.
std::vector<Token> tokenize(const std::string& src, const std::string& name, const Lines& lines);

}  // namespace grpo::text::jinja
