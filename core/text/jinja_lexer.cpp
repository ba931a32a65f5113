// The Jinja lexer: see jinja_lexer.h. Follows Jinja2's lexer.py: data up to `{{`, `{%` or `{#`;
// `-` strips whitespace on that side, `+` keeps it; lstrip_blocks removes a block tag's
// indentation when it starts its line; trim_blocks removes the newline after a block tag.
#include "core/text/jinja_lexer.h"

#include <charconv>

#include "core/common/error.h"
#include "core/text/unicode.h"

namespace grpo::text::jinja {

std::string describe(const Token& t) {
  switch (t.type) {
    case Tok::Data: return "template data";
    case Tok::BlockBegin: return "'{%'";
    case Tok::BlockEnd: return "'%}'";
    case Tok::VarBegin: return "'{{'";
    case Tok::VarEnd: return "'}}'";
    case Tok::Name: return "'" + t.value + "'";
    case Tok::String: return "a string";
    case Tok::Int:
    case Tok::Float: return "a number";
    case Tok::Op: return "'" + t.value + "'";
    case Tok::Eof: return "the end of the template";
  }
  return "?";
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string rstrip_ws(std::string_view s) {
  size_t e = s.size();
  while (e > 0 && is_space(s[e - 1])) --e;
  return std::string(s.substr(0, e));
}

class Lexer {
public:
  Lexer(const std::string& src, const std::string& name, const Lines& lines)
      : src_(src), name_(name), lines_(lines) {}

  std::vector<Token> run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      size_t open = find_open(pos);
      std::string text = src_.substr(pos, open - pos);
      if (open == src_.size()) {
        push_data(std::move(text), pos);
        break;
      }
      char kind = src_[open + 1];  // '{', '%' or '#'
      char mod = open + 2 < src_.size() ? src_[open + 2] : '\0';
      bool has_mod = mod == '-' || mod == '+';
      if (mod == '-') {
        text = rstrip_ws(text);
      } else if (mod != '+' && kind != '{') {  // lstrip_blocks
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if ((l_pos > 0 || line_starting) &&
            std::all_of(text.begin() + static_cast<long>(l_pos), text.end(), [](char c) { return is_space(c); }))
          text.resize(l_pos);
      }
      push_data(std::move(text), pos);
      size_t p = open + 2 + (has_mod ? 1 : 0);
      if (kind == '#') {
        size_t end = src_.find("#}", p);
        if (end == std::string::npos) fail(open, "unclosed comment: expected '#}'");
        size_t after = end + 2;
        if (end > p && src_[end - 1] == '-') {
          while (after < src_.size() && is_space(src_[after])) ++after;
        } else if (!(end > p && src_[end - 1] == '+') && after < src_.size() && src_[after] == '\n') {
          ++after;  // trim_blocks
        }
        line_starting = after > 0 && src_[after - 1] == '\n';
        pos = after;
        continue;
      }
      bool block = kind == '%';
      tokens_.push_back({block ? Tok::BlockBegin : Tok::VarBegin, "", open});
      pos = lex_tag(p, block, open);
      line_starting = pos > 0 && src_[pos - 1] == '\n';
    }
    tokens_.push_back({Tok::Eof, "", src_.size()});
    return std::move(tokens_);
  }

private:
  [[noreturn]] void fail(size_t offset, const std::string& msg) {
    throw Error(name_ + " " + lines_.at(offset).str(), msg);
  }

  size_t find_open(size_t pos) const {
    for (size_t i = pos; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return src_.size();
  }

  void push_data(std::string text, size_t offset) {
    if (!text.empty()) tokens_.push_back({Tok::Data, std::move(text), offset});
  }

  // Lexes the inside of a tag from p; returns the position after its end (and stripping).
  size_t lex_tag(size_t p, bool block, size_t open) {
    int depth = 0;
    const std::string end = block ? "%}" : "}}";
    for (;;) {
      while (p < src_.size() && is_space(src_[p])) ++p;
      if (p >= src_.size()) fail(open, std::string("unexpected end of template: expected '") + end + "'");
      if (depth == 0) {
        char m = src_[p];
        bool strip = m == '-' && src_.compare(p + 1, 2, end) == 0;
        bool keep = block && m == '+' && src_.compare(p + 1, 2, end) == 0;
        if (strip || keep || src_.compare(p, 2, end) == 0) {
          tokens_.push_back({block ? Tok::BlockEnd : Tok::VarEnd, "", p});
          size_t after = p + 2 + ((strip || keep) ? 1 : 0);
          if (strip) {
            while (after < src_.size() && is_space(src_[after])) ++after;
          } else if (block && !keep && after < src_.size() && src_[after] == '\n') {
            ++after;  // trim_blocks
          }
          return after;
        }
      }
      char c = src_[p];
      size_t start = p;
      if (is_name_start(c)) {
        while (p < src_.size() && (is_name_start(src_[p]) || is_digit(src_[p]))) ++p;
        tokens_.push_back({Tok::Name, src_.substr(start, p - start), start});
      } else if (is_digit(c)) {
        p = lex_number(p);
      } else if (c == '\'' || c == '"') {
        p = lex_string(p);
      } else {
        static const char* ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "[", "]", "(",
                                    ")", "{", "}", "<", ">", "=", ".", ":", "|", ",", ";"};
        std::string op;
        for (const char* o : ops) {
          if (src_.compare(p, std::char_traits<char>::length(o), o) == 0) {
            op = o;
            break;
          }
        }
        if (op.empty()) {
          size_t len;
          char32_t cp = decode_utf8(src_, p, len);
          std::string ch = src_.substr(p, len);
          fail(p, "unexpected character '" + ch + "' (U+" + std::to_string(static_cast<uint32_t>(cp)) + ") in a tag");
        }
        if (op == "(" || op == "[" || op == "{") ++depth;
        if (op == ")" || op == "]" || op == "}") {
          if (depth == 0) fail(p, "unexpected '" + op + "'");
          --depth;
        }
        tokens_.push_back({Tok::Op, op, start});
        p += op.size();
      }
    }
  }

  size_t lex_number(size_t p) {
    size_t start = p;
    std::string digits;
    auto take_digits = [&] {
      while (p < src_.size() && (is_digit(src_[p]) || (src_[p] == '_' && p + 1 < src_.size() && is_digit(src_[p + 1])))) {
        if (src_[p] != '_') digits += src_[p];
        ++p;
      }
    };
    take_digits();
    bool is_float = false;
    if (p + 1 < src_.size() && src_[p] == '.' && is_digit(src_[p + 1])) {
      is_float = true;
      digits += '.';
      ++p;
      take_digits();
    }
    if (p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
      size_t q = p + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && is_digit(src_[q])) {
        is_float = true;
        digits += 'e';
        digits += src_.substr(p + 1, q - p - 1);
        p = q;
        take_digits();
      }
    }
    Token t{is_float ? Tok::Float : Tok::Int, digits, start};
    if (is_float) {
      auto r = std::from_chars(digits.data(), digits.data() + digits.size(), t.fval);
      if (r.ec != std::errc()) fail(start, "bad number " + digits);
    } else {
      auto r = std::from_chars(digits.data(), digits.data() + digits.size(), t.ival);
      if (r.ec != std::errc()) fail(start, "integer " + digits + " is too large (limit: 64-bit)");
    }
    tokens_.push_back(std::move(t));
    return p;
  }

  size_t lex_string(size_t p) {
    const char quote = src_[p];
    size_t start = p++;
    std::string out;
    for (;;) {
      if (p >= src_.size()) fail(start, "unterminated string literal");
      char c = src_[p++];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (p >= src_.size()) fail(start, "unterminated string literal");
      char e = src_[p++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case 'a': out += '\a'; break;
        case '0': out += '\0'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\n': break;  // line continuation
        case 'x':
        case 'u':
        case 'U': {
          size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (p + n > src_.size()) fail(p - 2, std::string("truncated \\") + e + " escape");
          uint32_t cp = 0;
          auto r = std::from_chars(src_.data() + p, src_.data() + p + n, cp, 16);
          if (r.ptr != src_.data() + p + n || cp > 0x10FFFF) fail(p - 2, std::string("bad \\") + e + " escape");
          append_utf8(out, static_cast<char32_t>(cp));
          p += n;
          break;
        }
        default:  // Python keeps unknown escapes as they are
          out += '\\';
          out += e;
      }
    }
    tokens_.push_back({Tok::String, std::move(out), start});
    return p;
  }

  const std::string& src_;
  const std::string& name_;
  const Lines& lines_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& src, const std::string& name, const Lines& lines) {
  return Lexer(src, name, lines).run();
}

}  // namespace grpo::text::jinja
