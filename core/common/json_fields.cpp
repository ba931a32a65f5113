#include "core/common/json_fields.h"

#include <cmath>

namespace grpo {

const nlohmann::json* json_field(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string json_string(const nlohmann::json& j, const char* key, const std::string& fallback) {
  const nlohmann::json* v = json_field(j, key);
  return v && v->is_string() ? v->get<std::string>() : fallback;
}

int64_t json_integer(const nlohmann::json& j, const char* key, int64_t fallback) {
  const nlohmann::json* v = json_field(j, key);
  if (!v) return fallback;
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    return u <= static_cast<uint64_t>(INT64_MAX) ? static_cast<int64_t>(u) : fallback;
  }
  if (v->is_number_integer()) return v->get<int64_t>();
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18) return static_cast<int64_t>(d);
  }
  return fallback;
}

double json_number(const nlohmann::json& j, const char* key, double fallback) {
  const nlohmann::json* v = json_field(j, key);
  return v && v->is_number() ? v->get<double>() : fallback;
}

bool json_bool(const nlohmann::json& j, const char* key, bool fallback) {
  const nlohmann::json* v = json_field(j, key);
  return v && v->is_boolean() ? v->get<bool>() : fallback;
}

}  // namespace grpo
