// The config schema as plain data: one ConfigKeyInfo per key (type, range, default, whether a
// live run may change it, group, one-line doc). The tables themselves live beside their config
// structs (TrainConfig: core/grpo/config.cpp; SftConfig: core/run/sft_config.cpp), built with
// ConfigTable (config_table.h); everything that needs a fact about a key (validation, `--set`,
// `--help-config`, the app's forms and retune dialog, TRL key import) reads it from here.
// No torch, no Qt: the app's torch-free layers include this header.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace grpo::grpo {

inline constexpr double kUnbounded = std::numeric_limits<double>::infinity();

// What a key may hold: a numeric interval (either end may be open or unbounded) or a set of
// allowed strings.
struct ConfigRange {
  double lo = -kUnbounded, hi = kUnbounded;
  bool lo_open = false, hi_open = false;
  std::vector<std::string> choices = {};
};
inline ConfigRange closed(double lo, double hi) { return {lo, hi}; }                 // [lo, hi]
inline ConfigRange left_open(double lo, double hi) { return {lo, hi, true, false}; }  // (lo, hi]
inline ConfigRange right_open(double lo, double hi) { return {lo, hi, false, true}; } // [lo, hi)
inline ConfigRange at_least(double lo) { return {lo}; }                               // >= lo
inline ConfigRange above(double lo) { return {lo, kUnbounded, true}; }                // > lo
inline ConfigRange one_of(std::vector<std::string> choices) { return {-kUnbounded, kUnbounded, false, false, std::move(choices)}; }

// A key table row's flags (ConfigTable::Row::flags).
inline constexpr unsigned kRetunable = 1;  // ConfigKeyInfo::retunable
inline constexpr unsigned kOnForm = 2;     // ConfigKeyInfo::on_form

struct ConfigKeyInfo {
  std::string name;
  std::string type;                 // "integer", "number", "number or null", "boolean", "string",
                                    // "list of strings", "list of numbers", or the row's own words
  std::string group;                // "generation", "GRPO loss", ...
  std::string doc;                  // one line
  nlohmann::json default_value;     // the config struct's default, as to_json() writes it
  bool retunable = false;           // a live run may change it (the engine's retune)
  bool on_form = false;             // the app's setup form shows it (a field generated from this row)
  bool nullable = false;            // null is a value of its own (epsilon_high: null = epsilon)
  bool numeric = false;             // integer, number or list of numbers: the interval applies
  ConfigRange range;
  std::vector<std::string> aliases; // other spellings read as this key (TRL / PEFT names)

  // What the key may hold, worded as its errors word it ("[0, 1]", "> 0", "one of \"a\", \"b\"");
  // "" for keys without a range (free strings, lists of strings, flags, objects).
  std::string range_text() const;
  bool in_range(double x) const;
};

// The row named `name` (or one of its aliases when `aliases` is true), or nullptr.
const ConfigKeyInfo* find_config_key(const std::vector<ConfigKeyInfo>& schema, const std::string& name,
                                     bool aliases = false);
std::vector<std::string> config_key_names(const std::vector<ConfigKeyInfo>& schema);

// Value checks shared by every table. Each returns the value or throws grpo::Error naming
// `source`, the key, the value and what is allowed.
int64_t config_integer(const ConfigKeyInfo& k, const nlohmann::json& v, const std::string& source);
double config_number(const ConfigKeyInfo& k, const nlohmann::json& v, const std::string& source);
bool config_bool(const ConfigKeyInfo& k, const nlohmann::json& v, const std::string& source);
std::string config_string(const ConfigKeyInfo& k, const nlohmann::json& v, const std::string& source);
std::vector<std::string> config_strings(const ConfigKeyInfo& k, const nlohmann::json& v, const std::string& source);
std::vector<double> config_numbers(const ConfigKeyInfo& k, const nlohmann::json& v, const std::string& source);
// An unknown key: throws naming `source`, the key and the nearest known one (else `help`).
[[noreturn]] void throw_unknown_config_key(const std::vector<ConfigKeyInfo>& schema, const std::string& key,
                                           const std::string& source, const std::string& help);

// `--help-config`: every key under its group, with type, range, default, a "retunable" mark,
// its aliases and its doc. `title` is the first line.
std::string format_config_help(const std::vector<ConfigKeyInfo>& schema, const std::string& title);

// `--set KEY=VALUE` (repeatable): {"KEY": VALUE, ...} with each VALUE read as a YAML scalar or
// flow value (1e-5, true, null, [q_proj, v_proj], {enable_thinking: false}, or JSON), else as
// the text itself; a later assignment of a key wins. Throws naming the assignment without "=".
nlohmann::json parse_set_options(const std::vector<std::string>& assignments);

}  // namespace grpo::grpo
