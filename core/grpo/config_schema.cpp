// The schema's shared wording and checks (config_schema.h): range text, the typed value checks
// every table uses, unknown-key hints and the --help-config listing.
#include "core/grpo/config_schema.h"
#include "core/grpo/config_schema_json.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/common/error.h"
#include "core/common/strings.h"

namespace grpo::grpo {
namespace {

using json = nlohmann::json;

std::string fmt(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  json j = v;
  if (v == std::floor(v) && std::fabs(v) < 1e15) j = static_cast<int64_t>(v);
  return j.dump();
}

std::string interval_text(const ConfigRange& r) {
  if (std::isinf(r.lo) && std::isinf(r.hi)) return "any number";
  if (std::isinf(r.hi)) return std::string(r.lo_open ? "> " : ">= ") + fmt(r.lo);
  if (std::isinf(r.lo)) return std::string(r.hi_open ? "< " : "<= ") + fmt(r.hi);
  return std::string(r.lo_open ? "(" : "[") + fmt(r.lo) + ", " + fmt(r.hi) + (r.hi_open ? ")" : "]");
}

std::string choices_text(const ConfigRange& r) {
  std::vector<std::string> quoted;
  for (const auto& c : r.choices) quoted.push_back("\"" + c + "\"");
  return "one of " + join(quoted, ", ");
}

[[noreturn]] void bad_value(const std::string& source, const ConfigKeyInfo& k, const json& v, const std::string& expected) {
  throw Error(source, "key \"" + k.name + "\": value " + v.dump() + " is not valid: expected " + expected);
}

double checked_number(const ConfigKeyInfo& k, const json& v, const std::string& source, bool integer) {
  const std::string range = k.range_text();
  if (!v.is_number() || (integer && !v.is_number_integer() &&
                         !(v.is_number_float() && v.get<double>() == std::floor(v.get<double>()))))
    bad_value(source, k, v, std::string(integer ? "an integer" : "a number") + (range.empty() ? "" : ", " + range));
  const double x = v.get<double>();
  if (!k.in_range(x)) bad_value(source, k, v, range);
  // An integer key holds an int64: 1e300 (a float with an integer value) must not reach the cast.
  constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53: every integer up to it is exact
  if (integer && std::fabs(x) > kMaxExactInteger) bad_value(source, k, v, "an integer of magnitude at most 2^53, " + range);
  return x;
}

}  // namespace

std::string ConfigKeyInfo::range_text() const {
  if (!range.choices.empty()) return choices_text(range);
  return numeric ? interval_text(range) : "";
}

bool ConfigKeyInfo::in_range(double x) const {
  return std::isfinite(x) && (range.lo_open ? x > range.lo : x >= range.lo) && (range.hi_open ? x < range.hi : x <= range.hi);
}

const ConfigKeyInfo* find_config_key(const std::vector<ConfigKeyInfo>& schema, const std::string& name, bool aliases) {
  for (const auto& k : schema)
    if (k.name == name) return &k;
  if (aliases)
    for (const auto& k : schema)
      if (std::find(k.aliases.begin(), k.aliases.end(), name) != k.aliases.end()) return &k;
  return nullptr;
}

std::vector<std::string> config_key_names(const std::vector<ConfigKeyInfo>& schema) {
  std::vector<std::string> names;
  for (const auto& k : schema) names.push_back(k.name);
  return names;
}

int64_t config_integer(const ConfigKeyInfo& k, const json& v, const std::string& source) {
  return static_cast<int64_t>(checked_number(k, v, source, true));
}

double config_number(const ConfigKeyInfo& k, const json& v, const std::string& source) {
  return checked_number(k, v, source, false);
}

bool config_bool(const ConfigKeyInfo& k, const json& v, const std::string& source) {
  if (!v.is_boolean()) bad_value(source, k, v, "true or false");
  return v.get<bool>();
}

std::string config_string(const ConfigKeyInfo& k, const json& v, const std::string& source) {
  const auto& choices = k.range.choices;
  if (!v.is_string()) bad_value(source, k, v, choices.empty() ? "a string" : k.range_text());
  auto s = v.get<std::string>();
  if (!choices.empty() && std::find(choices.begin(), choices.end(), s) == choices.end()) {
    const std::string near = nearest_name(s, choices);
    throw Error(source, "key \"" + k.name + "\": value \"" + s + "\" is not valid: expected " + k.range_text(),
                near.empty() ? "" : "did you mean \"" + near + "\"?");
  }
  return s;
}

std::vector<std::string> config_strings(const ConfigKeyInfo& k, const json& v, const std::string& source) {
  if (v.is_string()) return {v.get<std::string>()};
  if (!v.is_array()) bad_value(source, k, v, "a list of strings");
  std::vector<std::string> out;
  for (const auto& e : v) {
    if (!e.is_string()) bad_value(source, k, v, "a list of strings");
    out.push_back(e.get<std::string>());
  }
  return out;
}

std::vector<double> config_numbers(const ConfigKeyInfo& k, const json& v, const std::string& source) {
  if (!v.is_array()) bad_value(source, k, v, "a list of numbers");
  std::vector<double> out;
  for (const auto& e : v) {
    if (!e.is_number() || !k.in_range(e.get<double>())) {
      const std::string range = interval_text(k.range);
      bad_value(source, k, v, range == "any number" ? "a list of finite numbers" : "a list of numbers, each " + range);
    }
    out.push_back(e.get<double>());
  }
  return out;
}

void throw_unknown_config_key(const std::vector<ConfigKeyInfo>& schema, const std::string& key,
                              const std::string& source, const std::string& help) {
  const std::string near = nearest_name(key, config_key_names(schema));
  throw Error(source, "unknown key \"" + key + "\"",
              near.empty() ? "see `" + help + "` for the known keys" : "did you mean \"" + near + "\"?");
}

std::string format_config_help(const std::vector<ConfigKeyInfo>& schema, const std::string& title) {
  std::ostringstream out;
  out << title << "\n";
  std::vector<std::string> groups;
  for (const auto& k : schema)
    if (std::find(groups.begin(), groups.end(), k.group) == groups.end()) groups.push_back(k.group);
  for (const auto& g : groups) {
    out << "\n" << g << ":\n";
    for (const auto& k : schema) {
      if (k.group != g) continue;
      const std::string range = k.range_text();
      out << "  " << k.name << " (" << k.type;
      if (!range.empty() && range != "any number") out << ", " << range;
      out << "; default " << k.default_value.dump() << ")";
      if (k.retunable) out << " [retunable]";
      if (!k.aliases.empty()) out << " (also read as: " << join(k.aliases, ", ") << ")";
      out << "\n      " << k.doc << "\n";
    }
  }
  return out.str();
}

namespace {
nlohmann::json range_json(const ConfigKeyInfo& k) {
  auto bound = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::json r = {{"lo", bound(k.range.lo)}, {"hi", bound(k.range.hi)}, {"lo_open", k.range.lo_open},
                      {"hi_open", k.range.hi_open}, {"text", k.range_text()}};
  if (!k.range.choices.empty()) r["choices"] = k.range.choices;
  return r;
}
}  // namespace

nlohmann::json config_schema_json(const std::vector<ConfigKeyInfo>& keys) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& k : keys)
    out.push_back({{"name", k.name}, {"type", k.type}, {"group", k.group}, {"doc", k.doc},
                   {"default", k.default_value}, {"retunable", k.retunable}, {"form", k.on_form}, {"nullable", k.nullable}, {"numeric", k.numeric},
                   {"range", range_json(k)}});
  return out;
}

}  // namespace grpo::grpo
