// Typed lookups in JSON that came from outside the process (a run's config.json written by an
// older version, another tool or a hand edit; a peer's answer): they never throw. An absent key,
// a value of the wrong type, or `j` not being an object gives the caller's fallback. Where a bad
// value must be an error instead (the trainer reading its config), the key table does the reading
// (core/grpo/config_table.h). nlohmann's json::value() throws type_error on a mistyped value, which
// reached users as "[json.exception.type_error.302] type must be string, but is number".
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace grpo {

// The value at `key`, or nullptr.
const nlohmann::json* json_field(const nlohmann::json& j, const char* key);
std::string json_string(const nlohmann::json& j, const char* key, const std::string& fallback = "");
// An integer (a number with no fractional part that fits int64: 1e3 counts, 1.5 and 2^63 do not).
int64_t json_integer(const nlohmann::json& j, const char* key, int64_t fallback = 0);
double json_number(const nlohmann::json& j, const char* key, double fallback);
bool json_bool(const nlohmann::json& j, const char* key, bool fallback);

}  // namespace grpo
