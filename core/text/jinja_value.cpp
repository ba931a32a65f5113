// Jinja values: see jinja_value.h. Printing follows CPython (str/repr of built-in types,
// json.dumps) byte for byte, since that is what transformers' Jinja2 renders.
#include "core/text/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <utf8proc.h>

#include "core/common/error.h"
#include "core/text/unicode.h"

namespace grpo::text::jinja {

Value Value::list(List items, bool tuple) {
  Value v(Kind::List);
  v.list_ = std::make_shared<const List>(std::move(items));
  v.tuple_ = tuple;
  return v;
}
Value Value::dict(Dict d) {
  Value v(Kind::Dict);
  v.dict_ = std::make_shared<Dict>(std::move(d));
  return v;
}
Value Value::namespace_(Dict d) {
  Value v(Kind::Namespace);
  v.dict_ = std::make_shared<Dict>(std::move(d));
  return v;
}
Value Value::callable(std::shared_ptr<const Callable> fn) {
  Value v(Kind::Callable);
  v.fn_ = std::move(fn);
  return v;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool:
    case Kind::Int: return int_ != 0;
    case Kind::Float: return float_ != 0;
    case Kind::String: return !str_.empty();
    case Kind::List: return !list_->empty();
    case Kind::Dict: return !dict_->items.empty();
    case Kind::Namespace:
    case Kind::Callable: return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return tuple_ ? "tuple" : "list";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    case Kind::Callable: return "function";
  }
  return "?";
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(const std::string& key, Value v) {
  for (auto& [k, old] : items) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  items.emplace_back(key, std::move(v));
}

bool equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::Undefined:
    case K::None: return true;
    case K::String: return a.as_string() == b.as_string();
    case K::List: {
      const List &x = a.as_list(), &y = b.as_list();
      if (x.size() != y.size() || a.is_tuple() != b.is_tuple()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equal(x[i], y[i])) return false;
      return true;
    }
    case K::Dict: {
      const Dict &x = a.as_dict(), &y = b.as_dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* w = y.find(k);
        if (!w || !equal(v, *w)) return false;
      }
      return true;
    }
    case K::Namespace: return &a.namespace_attrs() == &b.namespace_attrs();
    case K::Callable: return &a.as_callable() == &b.as_callable();
    default: return false;
  }
}

std::vector<std::string_view> code_points(std::string_view s) {
  std::vector<std::string_view> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t len = std::min(utf8_len(static_cast<unsigned char>(s[i])), s.size() - i);
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

size_t code_point_count(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool python_isspace(char32_t c) {
  // str.isspace(): bidirectional class WS, B or S, or category Zs.
  if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F) || c == 0x85) return true;
  if (c < 0x80) return false;
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  if (cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL || cat == UTF8PROC_CATEGORY_ZP) return true;
  return false;
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string s(buf, r.ptr);
  bool neg = s[0] == '-';
  if (neg) s.erase(0, 1);
  size_t e = s.find('e');
  int exp = std::stoi(s.substr(e + 1));
  std::string digits;
  for (char c : s.substr(0, e))
    if (c != '.') digits += c;
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exp < -4 || exp >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    std::string es = std::to_string(std::abs(exp));
    if (es.size() < 2) es = "0" + es;
    out += std::string("e") + (exp < 0 ? "-" : "+") + es;
  } else if (exp < 0) {
    out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  } else if (digits.size() <= static_cast<size_t>(exp) + 1) {
    out = digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, static_cast<size_t>(exp) + 1) + "." + digits.substr(static_cast<size_t>(exp) + 1);
  }
  return (neg ? "-" : "") + out;
}

namespace {

bool printable(char32_t c) {
  if (c < 0x20 || c == 0x7F) return false;
  if (c < 0x7F) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return false;
    default: return true;
  }
}

void hex(std::string& out, const char* prefix, uint32_t v, int width) {
  static const char* digits = "0123456789abcdef";
  out += prefix;
  for (int k = width - 1; k >= 0; --k) out += digits[(v >> (4 * k)) & 0xF];
}

std::string repr_string(std::string_view s) {
  char quote = '\'';
  if (s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos) quote = '"';
  std::string out(1, quote);
  for (size_t i = 0; i < s.size();) {
    size_t len;
    char32_t c = decode_utf8(s, i, len);
    std::string_view raw = s.substr(i, len);
    i += len;
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (printable(c)) out += raw;
    else if (c < 0x100) hex(out, "\\x", c, 2);
    else if (c < 0x10000) hex(out, "\\u", c, 4);
    else hex(out, "\\U", c, 8);
  }
  out += quote;
  return out;
}

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    size_t len;
    char32_t c = decode_utf8(s, i, len);
    std::string_view raw = s.substr(i, len);
    i += len;
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20 || (ensure_ascii && c > 0x7E)) {
      if (c >= 0x10000) {
        uint32_t v = c - 0x10000;
        hex(out, "\\u", 0xD800 + (v >> 10), 4);
        hex(out, "\\u", 0xDC00 + (v & 0x3FF), 4);
      } else {
        hex(out, "\\u", c, 4);
      }
    } else {
      out += raw;
    }
  }
  out += '"';
}

void json_value(std::string& out, const Value& v, const JsonOptions& o, int level, int limit) {
  if (level > limit) throw Error("tojson", "nesting deeper than " + std::to_string(limit) + " levels");
  const std::string item_sep = o.separators ? o.separators->first : (o.indent ? "," : ", ");
  const std::string key_sep = o.separators ? o.separators->second : ": ";
  auto newline = [&](int lv) {
    if (!o.indent) return;
    out += '\n';
    for (int k = 0; k < lv; ++k) out += *o.indent;
  };
  switch (v.kind()) {
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::Int: out += std::to_string(v.as_int()); return;
    case Value::Kind::Float: {
      double d = v.as_double();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : float_repr(d);
      return;
    }
    case Value::Kind::String: json_string(out, v.as_string(), o.ensure_ascii); return;
    case Value::Kind::List: {
      const List& l = v.as_list();
      if (l.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t k = 0; k < l.size(); ++k) {
        if (k) out += item_sep;
        newline(level + 1);
        json_value(out, l[k], o, level + 1, limit);
      }
      newline(level);
      out += ']';
      return;
    }
    case Value::Kind::Dict:
    case Value::Kind::Namespace: {
      if (v.is_namespace()) throw Error("tojson", "Object of type Namespace is not JSON serializable");
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.as_dict().items) items.push_back(&kv);
      if (o.sort_keys) std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      if (items.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += item_sep;
        newline(level + 1);
        json_string(out, items[k]->first, o.ensure_ascii);
        out += key_sep;
        json_value(out, items[k]->second, o, level + 1, limit);
      }
      newline(level);
      out += '}';
      return;
    }
    case Value::Kind::Undefined: throw Error("tojson", "Object of type Undefined is not JSON serializable");
    case Value::Kind::Callable: throw Error("tojson", "Object of type function is not JSON serializable");
  }
}

template <class J>
Value from_json_impl(const J& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value::boolean(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::integer(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      return u <= static_cast<uint64_t>(INT64_MAX) ? Value::integer(static_cast<int64_t>(u))
                                                   : Value::floating(static_cast<double>(u));
    }
    case nlohmann::json::value_t::number_float: return Value::floating(j.template get<double>());
    case nlohmann::json::value_t::string: return Value::string(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      List l;
      l.reserve(j.size());
      for (const auto& x : j) l.push_back(from_json_impl(x));
      return Value::list(std::move(l));
    }
    case nlohmann::json::value_t::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d.items.emplace_back(it.key(), from_json_impl(it.value()));
      return Value::dict(std::move(d));
    }
    default: return Value::none();
  }
}

}  // namespace

std::string repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::String: return repr_string(v.as_string());
    case Value::Kind::Undefined: return "Undefined";
    default: return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return "";
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return v.as_bool() ? "True" : "False";
    case Value::Kind::Int: return std::to_string(v.as_int());
    case Value::Kind::Float: return float_repr(v.as_double());
    case Value::Kind::String: return v.as_string();
    case Value::Kind::List: {
      const List& l = v.as_list();
      std::string out = v.is_tuple() ? "(" : "[";
      for (size_t k = 0; k < l.size(); ++k) {
        if (k) out += ", ";
        out += repr(l[k]);
      }
      if (v.is_tuple() && l.size() == 1) out += ",";
      return out + (v.is_tuple() ? ")" : "]");
    }
    case Value::Kind::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, x] : v.as_dict().items) {
        if (!first) out += ", ";
        first = false;
        out += repr_string(k) + ": " + repr(x);
      }
      return out + "}";
    }
    case Value::Kind::Namespace: return "<Namespace>";
    case Value::Kind::Callable: return "<function " + v.as_callable().name + ">";
  }
  return "";
}

std::string to_json(const Value& v, const JsonOptions& options, int depth_limit) {
  std::string out;
  json_value(out, v, options, 0, depth_limit);
  return out;
}

Value from_json(const nlohmann::ordered_json& j) { return from_json_impl(j); }
Value from_json(const nlohmann::json& j) { return from_json_impl(j); }

}  // namespace grpo::text::jinja
