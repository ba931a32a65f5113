// Whole-file reads and atomic writes (write to a temporary sibling, fsync, rename), so a reader
// never sees a half-written file. Errors name the path and the OS reason.
#pragma once

#include <string>
#include <string_view>

namespace grpo {

std::string read_file(const std::string& path);
// Atomically replaces `path` with `data` (temp file in the same directory + fsync + rename).
void write_file_atomic(const std::string& path, std::string_view data);
bool file_exists(const std::string& path);
bool is_directory(const std::string& path);
// Joins two path pieces with exactly one '/'.
std::string path_join(const std::string& a, const std::string& b);

}  // namespace grpo
