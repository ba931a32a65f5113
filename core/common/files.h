// Whole-file reads and atomic writes (write to a temporary sibling, fsync, rename), so a reader
// never sees a half-written file. Errors name the path and the OS reason.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace grpo {

std::string read_file(const std::string& path);
// The same, refusing a file larger than `max_bytes` (checked with fstat before reading, and
// while reading) with an error naming the limit: for small files that come from outside.
std::string read_file(const std::string& path, size_t max_bytes);
// Atomically replaces `path` with `data` (temp file in the same directory + fsync + rename, then
// an fsync of the directory, so the rename itself survives a power cut).
void write_file_atomic(const std::string& path, std::string_view data);
// fsync(2) of a directory (after a rename into it); errors name the directory.
void fsync_directory(const std::string& dir);
bool file_exists(const std::string& path);
bool is_directory(const std::string& path);
// A SHA256SUMS file lists a handful of files (an adapter version, a checkpoint): 64 KiB is ample,
// and a peer's 8 GiB one is refused before it is read.
inline constexpr size_t kMaxSha256SumsBytes = 64 * 1024;
// Joins two path pieces with exactly one '/'.
std::string path_join(const std::string& a, const std::string& b);

}  // namespace grpo
