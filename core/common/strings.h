// Small string helpers shared by every layer: joining, splitting, nearest-name suggestions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace grpo {

std::vector<std::string> split(std::string_view s, char sep);
std::string join(const std::vector<std::string>& parts, std::string_view sep);
std::string trim(std::string_view s);
bool starts_with(std::string_view s, std::string_view prefix);
bool ends_with(std::string_view s, std::string_view suffix);
// Well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
bool is_valid_utf8(std::string_view s);

// Levenshtein distance, for "did you mean" hints.
size_t edit_distance(std::string_view a, std::string_view b);
// The candidate closest to `name`, or "" if none is reasonably close.
std::string nearest_name(std::string_view name, const std::vector<std::string>& candidates);

// Human-readable sizes: 1536 -> "1.5 KiB"; 25e6 -> "25.0M".
std::string format_bytes(double bytes);
std::string format_count(double n);

}  // namespace grpo
