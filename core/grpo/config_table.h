// ConfigTable<C>: the key table of a config struct C. Each row names a member of C, what it may
// hold, a one-line doc, whether a live run may change it and whether the app's setup form shows it;
// rows sit under their group. The
// table makes the schema (config_schema.h; defaults read from C{}, never restated) and does the
// typed work: apply a JSON object all or nothing, read every key back. TrainConfig
// (core/grpo/config.cpp) and SftConfig (core/run/sft_config.cpp) are both tables of this kind.
#pragma once

#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/error.h"
#include "core/grpo/config_schema.h"

namespace grpo::grpo {

template <class C>
class ConfigTable {
public:
  using json = nlohmann::json;
  using Member = std::variant<int64_t C::*, double C::*, bool C::*, std::string C::*, std::vector<std::string> C::*,
                              std::vector<double> C::*, json C::*, std::optional<double> C::*>;
  struct Row {
    const char* name;
    Member member;
    ConfigRange range;
    const char* doc;
    unsigned flags = 0;                       // kRetunable | kOnForm (config_schema.h)
    const char* type = nullptr;               // overrides the member's type word (JSON members)
    std::vector<std::string> aliases = {};    // TRL / PEFT spellings of the same key
  };
  struct Group {
    const char* name;
    std::vector<Row> rows;
  };

  explicit ConfigTable(const std::vector<Group>& groups) {
    const C defaults{};
    for (const auto& g : groups) {
      for (const auto& r : g.rows) {
        ConfigKeyInfo k;
        k.name = r.name;
        k.group = g.name;
        k.doc = r.doc;
        k.retunable = (r.flags & kRetunable) != 0;
        k.on_form = (r.flags & kOnForm) != 0;
        k.range = r.range;
        k.aliases = r.aliases;
        std::visit(
            [&](auto m) {
              using V = std::remove_cvref_t<decltype(defaults.*m)>;
              k.numeric = std::is_same_v<V, int64_t> || std::is_same_v<V, double> ||
                          std::is_same_v<V, std::optional<double>> || std::is_same_v<V, std::vector<double>>;
              k.type = r.type ? r.type : type_word<V>();
              k.nullable = std::is_same_v<V, std::optional<double>>;
            },
            r.member);
        members_.push_back(r.member);
        schema_.push_back(std::move(k));
        schema_.back().default_value = get(defaults, schema_.size() - 1);
      }
    }
  }

  const std::vector<ConfigKeyInfo>& schema() const { return schema_; }
  // The row of `name`, or -1.
  int index(const std::string& name) const {
    for (size_t i = 0; i < schema_.size(); ++i)
      if (schema_[i].name == name) return static_cast<int>(i);
    return -1;
  }

  // Sets key i from `v`, checking its type and range; throws naming `source`, the key and value.
  void set(C& c, size_t i, const json& v, const std::string& source) const {
    const ConfigKeyInfo& k = schema_[i];
    std::visit(
        [&](auto m) {
          using V = std::remove_cvref_t<decltype(c.*m)>;
          if constexpr (std::is_same_v<V, int64_t>) c.*m = config_integer(k, v, source);
          else if constexpr (std::is_same_v<V, double>) c.*m = config_number(k, v, source);
          else if constexpr (std::is_same_v<V, std::optional<double>>)
            c.*m = v.is_null() ? std::nullopt : std::optional<double>(config_number(k, v, source));
          else if constexpr (std::is_same_v<V, bool>) c.*m = config_bool(k, v, source);
          else if constexpr (std::is_same_v<V, std::string>) c.*m = config_string(k, v, source);
          else if constexpr (std::is_same_v<V, std::vector<std::string>>) c.*m = config_strings(k, v, source);
          else if constexpr (std::is_same_v<V, std::vector<double>>) c.*m = config_numbers(k, v, source);
          else c.*m = v;  // structured value: the struct's validate() checks it
        },
        members_[i]);
  }

  json get(const C& c, size_t i) const {
    return std::visit(
        [&](auto m) -> json {
          using V = std::remove_cvref_t<decltype(c.*m)>;
          if constexpr (std::is_same_v<V, std::optional<double>>) return (c.*m) ? json(*(c.*m)) : json(nullptr);
          else return json(c.*m);
        },
        members_[i]);
  }

  json to_json(const C& c) const {
    json j = json::object();
    for (size_t i = 0; i < schema_.size(); ++i) j[schema_[i].name] = get(c, i);
    return j;
  }

  // Applies every key of `j` (an object) over `c`, all or nothing. An unknown key names the
  // nearest known one, else points at `help` (e.g. "grpo train --help-config").
  void apply(C& c, const json& j, const std::string& source, const std::string& help) const {
    if (!j.is_object())
      throw Error(source, std::string("expected a JSON/YAML object of settings, got ") + j.type_name());
    C next = c;
    for (const auto& [key, value] : j.items()) {
      const int i = index(key);
      if (i < 0) throw_unknown_config_key(schema_, key, source, help);
      set(next, static_cast<size_t>(i), value, source);
    }
    c = std::move(next);
  }

private:
  template <class V>
  static const char* type_word() {
    if constexpr (std::is_same_v<V, int64_t>) return "integer";
    else if constexpr (std::is_same_v<V, double>) return "number";
    else if constexpr (std::is_same_v<V, std::optional<double>>) return "number or null";
    else if constexpr (std::is_same_v<V, bool>) return "boolean";
    else if constexpr (std::is_same_v<V, std::string>) return "string";
    else if constexpr (std::is_same_v<V, std::vector<std::string>>) return "list of strings";
    else if constexpr (std::is_same_v<V, std::vector<double>>) return "list of numbers";
    else return "JSON";
  }

  std::vector<ConfigKeyInfo> schema_;
  std::vector<Member> members_;
};

}  // namespace grpo::grpo
