// Unicode helpers for the tokenizer: UTF-8 decoding/encoding and validation, the character
// classes Rust's `char` methods use (is_whitespace, is_numeric, is_alphanumeric, punctuation),
// Unicode normal forms and lowercasing through utf8proc, and GPT-2's byte <-> char table.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace grpo::text {

// Decodes the code point starting at s[i] (s must be valid UTF-8); returns it and sets `len`.
char32_t decode_utf8(std::string_view s, size_t i, size_t& len);
// Appends the UTF-8 encoding of `cp` to `out`.
void append_utf8(std::string& out, char32_t cp);
// Byte length of the UTF-8 sequence that starts with `lead`.
inline size_t utf8_len(unsigned char lead) {
  return lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : 4;
}
// Index of the first invalid byte, or npos when `s` is valid UTF-8.
size_t find_invalid_utf8(std::string_view s);
// Bytes of `s` as UTF-8, invalid sequences replaced by U+FFFD (like Rust's from_utf8_lossy).
std::string utf8_lossy(std::string_view s);

// Rust char::is_whitespace (the White_Space property).
bool is_whitespace(char32_t c);
// Rust char::is_numeric (general categories Nd, Nl, No).
bool is_numeric(char32_t c);
// Rust char::is_alphabetic || is_numeric (approximated by categories L*, N*, plus marks Mn/Mc).
bool is_alphanumeric(char32_t c);
// ASCII punctuation or general category P* (HF's is_punc).
bool is_punctuation(char32_t c);

enum class NormalForm { NFC, NFD, NFKC, NFKD };
std::string normalize_unicode(std::string_view s, NormalForm form);
// Rust's str.chars().flat_map(char::to_lowercase): per-character full lowercase mapping.
std::string lowercase(std::string_view s);

// GPT-2's bytes_to_unicode(): every byte gets a printable character.
struct ByteLevelTable {
  std::array<std::string, 256> byte_to_utf8;  // byte -> its char, UTF-8 encoded
  std::array<int, 512> char_to_byte;           // code point (< 512) -> byte, or -1
  static const ByteLevelTable& get();
};

}  // namespace grpo::text
