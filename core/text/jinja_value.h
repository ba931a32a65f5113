// The values a Jinja template computes with, modelled on the Python objects Jinja2 sees when
// transformers renders a chat template: undefined, None, bool, int, float, str, list (and
// tuple), dict (insertion-ordered, string keys), namespace, and callables (macros, builtins,
// bound methods). Strings are UTF-8; lengths, indexes and slices count code points as Python's
// str does. Lists and dicts are shared and immutable once built (ImmutableSandboxedEnvironment);
// a namespace is the one mutable object.
//
// Printing follows Python: str() for {{ output }} (None -> "None", True -> "True", lists and
// dicts as their repr), and json.dumps(ensure_ascii=False) for the tojson filter.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace grpo::text::jinja {

class Value;
struct Dict;
struct Callable;
using List = std::vector<Value>;

class Value {
public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };

  Value() = default;  // undefined
  static Value undefined(std::string hint = {}) {
    Value v;
    v.str_ = std::move(hint);
    return v;
  }
  static Value none() { return Value(Kind::None); }
  static Value boolean(bool b) {
    Value v(Kind::Bool);
    v.int_ = b;
    return v;
  }
  static Value integer(int64_t i) {
    Value v(Kind::Int);
    v.int_ = i;
    return v;
  }
  static Value floating(double f) {
    Value v(Kind::Float);
    v.float_ = f;
    return v;
  }
  static Value string(std::string s) {
    Value v(Kind::String);
    v.str_ = std::move(s);
    return v;
  }
  static Value list(List items, bool tuple = false);
  static Value dict(Dict d);
  static Value namespace_(Dict d);
  static Value callable(std::shared_ptr<const Callable> fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_tuple() const { return kind_ == Kind::List && tuple_; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_namespace() const { return kind_ == Kind::Namespace; }
  bool is_callable() const { return kind_ == Kind::Callable; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }  // Int or Bool
  double as_double() const { return kind_ == Kind::Float ? float_ : static_cast<double>(int_); }
  const std::string& as_string() const { return str_; }  // String; Undefined: the hint
  const List& as_list() const { return *list_; }
  const Dict& as_dict() const { return *dict_; }  // Dict or Namespace
  Dict& namespace_attrs() const { return *dict_; }
  const Callable& as_callable() const { return *fn_; }

  // Python truthiness.
  bool truthy() const;
  // Python type names for errors: "str", "int", "list", "dict", "NoneType", "undefined", ...
  std::string type_name() const;

private:
  explicit Value(Kind k) : kind_(k) {}
  Kind kind_ = Kind::Undefined;
  bool tuple_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  std::string str_;
  std::shared_ptr<const List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<const Callable> fn_;
};

// An insertion-ordered mapping with string keys (Python dicts keep insertion order).
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value v);  // replaces in place, else appends
};

// Arguments of a call: positional, then keyword (in source order).
struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

class Interpreter;
// A function a template can call. `name` appears in errors.
struct Callable {
  std::string name;
  std::function<Value(Interpreter&, Args&)> call;
};

// Python equality (1 == 1.0 == True; lists and dicts by value; undefined equals undefined).
bool equal(const Value& a, const Value& b);

// Python str(): what {{ value }} prints. repr(): strings quoted, as inside a list.
std::string to_str(const Value& v);
std::string repr(const Value& v);
std::string float_repr(double d);  // Python repr(float): 1.0, 0.1, 1e+16, inf, nan

// json.dumps(v, ensure_ascii, indent, separators, sort_keys) as Python writes it. Throws
// grpo::Error for values JSON cannot hold (undefined, callables); `depth_limit` bounds nesting.
struct JsonOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // indent string (an int n means n spaces)
  std::optional<std::pair<std::string, std::string>> separators;
  bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonOptions& options, int depth_limit = 256);

// JSON data (messages, kwargs) as Python's json.loads would give it to the template.
Value from_json(const nlohmann::ordered_json& j);
Value from_json(const nlohmann::json& j);

// Code-point helpers for Python str semantics on UTF-8 strings.
std::vector<std::string_view> code_points(std::string_view s);
size_t code_point_count(std::string_view s);
bool python_isspace(char32_t c);

}  // namespace grpo::text::jinja
