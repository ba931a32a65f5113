// Unicode helpers: see unicode.h. Character classes come from utf8proc's general categories.
#include "core/text/unicode.h"

#include <cstdlib>
#include <utf8proc.h>

namespace grpo::text {

char32_t decode_utf8(std::string_view s, size_t i, size_t& len) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
  unsigned char c = p[0];
  if (c < 0x80) { len = 1; return c; }
  if ((c >> 5) == 0x6) { len = 2; return ((c & 0x1F) << 6) | (p[1] & 0x3F); }
  if ((c >> 4) == 0xE) {
    len = 3;
    return ((c & 0x0F) << 12) | ((p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  }
  len = 4;
  return ((c & 0x07) << 18) | ((p[1] & 0x3F) << 12) | ((p[2] & 0x3F) << 6) | (p[3] & 0x3F);
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Length of the valid UTF-8 sequence at s[i], or 0 when it is invalid (overlong, surrogate,
// beyond U+10FFFF, truncated).
static size_t valid_sequence_len(std::string_view s, size_t i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size();
  unsigned char c = p[i];
  if (c < 0x80) return 1;
  auto cont = [&](size_t k) { return i + k < n && (p[i + k] & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && p[i + 1] < 0xA0) return 0;
    if (c == 0xED && p[i + 1] >= 0xA0) return 0;
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && p[i + 1] < 0x90) return 0;
    if (c == 0xF4 && p[i + 1] >= 0x90) return 0;
    return 4;
  }
  return 0;
}

size_t find_invalid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) { ++i; continue; }
    size_t len = valid_sequence_len(s, i);
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

std::string utf8_lossy(std::string_view s) {
  if (find_invalid_utf8(s) == std::string_view::npos) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    size_t len = valid_sequence_len(s, i);
    if (len > 0) {
      out.append(s.substr(i, len));
      i += len;
      continue;
    }
    // Like Rust: one U+FFFD per maximal invalid prefix of a would-be sequence.
    out += "\xEF\xBF\xBD";
    size_t want = (p[i] >= 0xC2 && p[i] <= 0xF4) ? utf8_len(p[i]) : 1;
    size_t j = i + 1;
    for (; j < s.size() && j < i + want && (p[j] & 0xC0) == 0x80; ++j) {
      // Stop at the first continuation byte that cannot belong to this lead byte.
      if (j == i + 1 && ((p[i] == 0xE0 && p[j] < 0xA0) || (p[i] == 0xED && p[j] >= 0xA0) ||
                         (p[i] == 0xF0 && p[j] < 0x90) || (p[i] == 0xF4 && p[j] >= 0x90)))
        break;
    }
    i = j;
  }
  return out;
}

bool is_whitespace(char32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
  if (c < 0x85) return false;
  switch (c) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

static utf8proc_category_t category(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

bool is_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  auto cat = category(c);
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL ||
         cat == UTF8PROC_CATEGORY_NO;
}

bool is_alphanumeric(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
  auto cat = category(c);
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
         (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO) ||
         cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC;
}

bool is_punctuation(char32_t c) {
  if (c < 0x80) {
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E);
  }
  auto cat = category(c);
  return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

std::string normalize_unicode(std::string_view s, NormalForm form) {
  bool ascii = true;
  for (unsigned char ch : s) {
    if (ch >= 0x80) { ascii = false; break; }
  }
  if (ascii) return std::string(s);  // ASCII is invariant under every normal form
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::NFC: options |= UTF8PROC_COMPOSE; break;
    case NormalForm::NFD: options |= UTF8PROC_DECOMPOSE; break;
    case NormalForm::NFKC: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalForm::NFKD: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* out = nullptr;
  auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                        static_cast<utf8proc_ssize_t>(s.size()), &out,
                        static_cast<utf8proc_option_t>(options));
  if (n < 0) return std::string(s);  // only on invalid input, which callers rule out
  std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

std::string lowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t len;
    char32_t c = decode_utf8(s, i, len);
    i += len;
    if (c < 0x80) {
      out.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c));
    } else if (c == 0x130) {  // İ lowercases to i + combining dot above (SpecialCasing)
      out += "i\xCC\x87";
    } else {
      append_utf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
    }
  }
  return out;
}

const ByteLevelTable& ByteLevelTable::get() {
  static const ByteLevelTable table = [] {
    ByteLevelTable t;
    t.char_to_byte.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      char32_t cp = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      append_utf8(t.byte_to_utf8[b], cp);
      t.char_to_byte[cp] = b;
    }
    return t;
  }();
  return table;
}

}  // namespace grpo::text
