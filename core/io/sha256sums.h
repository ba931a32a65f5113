// SHA-256 (FIPS 180-4) of bytes and files, and SHA256SUMS files in sha256sum's format
// ("<64 hex>  name", or "<64 hex> *name" in binary mode): what a published adapter version and a
// checkpoint carry so that a reader can tell a complete, intact directory from a torn or changed
// one. No Qt, no torch: the trainer writes these, workers and exports verify them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace grpo::io {

// Incremental SHA-256: update() any number of times, then hex() once.
class Sha256 {
public:
  Sha256();
  void update(const void* data, size_t n);
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::string hex();  // lowercase, 64 digits; the object is spent afterwards

private:
  void block(const unsigned char* p);
  uint32_t h_[8];
  unsigned char buf_[64];
  size_t used_ = 0;
  uint64_t bytes_ = 0;
};

std::string sha256_hex(std::string_view data);
// Hex SHA-256 of a file's bytes, streamed; grpo::Error naming the path when it cannot be read.
std::string sha256_file(const std::string& path);

// The name of the checksum file inside a directory.
inline constexpr const char* kSha256SumsFile = "SHA256SUMS";

struct Sha256Entry {
  std::string hex;   // 64 hex digits, lowercased
  std::string name;  // a plain file name inside the directory (no '/', not "." or "..")
};
// The lines of a SHA256SUMS text (blank lines skipped). A line that is not "<64 hex>  name" /
// "<64 hex> *name", or names something other than a plain file of the directory, is a
// grpo::Error naming `source`, the line and what was expected.
std::vector<Sha256Entry> parse_sha256sums(std::string_view text, const std::string& source);

// "sha256  name" lines for every regular file of `dir` except SHA256SUMS itself (sorted by name,
// as sha256sum writes them).
std::string sha256sums(const std::string& dir);
// Checks every line of dir/SHA256SUMS (read bounded by kMaxSha256SumsBytes); returns the names
// that are missing or do not match (empty = intact). No SHA256SUMS, or one that does not parse,
// gives {"SHA256SUMS"}.
std::vector<std::string> verify_sha256sums(const std::string& dir);

}  // namespace grpo::io
