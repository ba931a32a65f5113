// Error helpers for tokenizer-file parsing: see json_where.h.
#include "core/text/json_where.h"

#include "core/common/error.h"
#include "core/common/strings.h"

namespace grpo::text {

void throw_unsupported(const JsonWhere& where, std::string_view what, const std::string& value,
                       const std::vector<std::string>& supported) {
  std::string hint = "supported " + std::string(what) + " types: " + join(supported, ", ");
  std::string near = nearest_name(value, supported);
  if (!near.empty()) hint += " (did you mean \"" + near + "\"?)";
  throw Error(where.file, where.path + ": unsupported " + std::string(what) + " type \"" + value + "\"",
              hint);
}

void throw_bad(const JsonWhere& where, const std::string& message) {
  throw Error(where.file, where.path + ": " + message, "is this a Hugging Face tokenizer.json?");
}

const json& require(const json& obj, std::string_view key, const JsonWhere& where) {
  if (!obj.is_object()) throw_bad(where, "expected an object");
  auto it = obj.find(key);
  if (it == obj.end()) throw_bad(where.at(key), "missing field");
  return *it;
}

std::string get_string(const json& obj, std::string_view key, const JsonWhere& where,
                       const std::string& fallback) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_string()) throw_bad(where.at(key), "expected a string, got " + it->dump());
  return it->get<std::string>();
}

bool get_bool(const json& obj, std::string_view key, const JsonWhere& where, bool fallback) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw_bad(where.at(key), "expected true or false, got " + it->dump());
  return it->get<bool>();
}

std::string get_type(const json& obj, const JsonWhere& where) {
  const json& t = require(obj, "type", where);
  if (!t.is_string()) throw_bad(where.at("type"), "expected a string");
  return t.get<std::string>();
}

}  // namespace grpo::text
