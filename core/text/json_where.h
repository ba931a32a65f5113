// Where a value sits in a tokenizer file, for errors: the file and a JSON path such as
// `pre_tokenizer.pretokenizers[1].type`. Every component factory takes one.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace grpo::text {

using json = nlohmann::json;

struct JsonWhere {
  std::string file;
  std::string path;

  JsonWhere at(std::string_view key) const {
    return {file, path.empty() ? std::string(key) : path + "." + std::string(key)};
  }
  JsonWhere at(size_t index) const { return {file, path + "[" + std::to_string(index) + "]"}; }
};

// Throws grpo::Error: "<file>: <path>.type: unsupported <what> type "X"", hint lists `supported`.
[[noreturn]] void throw_unsupported(const JsonWhere& where, std::string_view what,
                                    const std::string& value,
                                    const std::vector<std::string>& supported);
// Throws grpo::Error for a malformed value at `where`.
[[noreturn]] void throw_bad(const JsonWhere& where, const std::string& message);

// Typed field access with errors that name the path.
const json& require(const json& obj, std::string_view key, const JsonWhere& where);
std::string get_string(const json& obj, std::string_view key, const JsonWhere& where,
                       const std::string& fallback);
bool get_bool(const json& obj, std::string_view key, const JsonWhere& where, bool fallback);
// The component's "type" field (required string).
std::string get_type(const json& obj, const JsonWhere& where);

}  // namespace grpo::text
