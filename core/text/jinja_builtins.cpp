// Jinja's builtins as Jinja2 (3.1) and Python define them, for the subset chat templates use:
// attribute/item lookup, iteration, the filters, the tests, dict/list methods and the globals
// (str methods: jinja_strings.cpp). Each follows the Python function it stands for; comments note where we are stricter.
#include <algorithm>
#include <cmath>
#include <ctime>

#include <utf8proc.h>

#include "core/common/error.h"
#include "core/text/jinja_interp.h"
#include "core/text/unicode.h"

namespace grpo::text::jinja {

std::string soft_str(const Value& v) { return to_str(v); }

int64_t to_index(Interpreter& in, const Value& v, const char* what) {
  if (v.is_int() || v.is_bool()) return v.as_int();
  in.fail(std::string(what) + " must be an integer, got " + v.type_name());
}

namespace {

bool unsafe_method(const Value& obj, const std::string& m) {
  static const char* list_mut[] = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"};
  static const char* dict_mut[] = {"pop", "popitem", "setdefault", "update", "clear"};
  if (obj.is_list()) return std::find(std::begin(list_mut), std::end(list_mut), m) != std::end(list_mut);
  if (obj.is_dict()) return std::find(std::begin(dict_mut), std::end(dict_mut), m) != std::end(dict_mut);
  return false;
}

Value method(Interpreter& in, const Value& obj, const std::string& m) {
  (void)in;
  if (obj.is_string()) return string_method(in, obj.as_string(), m);
  if (unsafe_method(obj, m)) {
    std::string what = "access to attribute '" + m + "' of '" + obj.type_name() + "' object is unsafe";
    return bound(m, [what](Interpreter& in, Args&) -> Value { in.fail(what, "chat templates cannot modify lists or dicts; use namespace()"); });
  }
  if (obj.is_dict()) {
    if (m == "get")
      return bound(m, [obj](Interpreter& in, Args& a) {
        if (a.positional.empty() || a.positional.size() > 2) in.fail("get expected 1 or 2 arguments");
        const Value& key = a.positional[0];
        const Value* v = key.is_string() ? obj.as_dict().find(key.as_string()) : nullptr;
        return v ? *v : (a.positional.size() > 1 ? a.positional[1] : Value::none());
      });
    if (m == "items" || m == "keys" || m == "values")
      return bound(m, [obj, m](Interpreter&, Args&) {
        List out;
        for (const auto& [k, v] : obj.as_dict().items) {
          if (m == "items") out.push_back(Value::list({Value::string(k), v}, true));
          else out.push_back(m == "keys" ? Value::string(k) : v);
        }
        return Value::list(std::move(out));
      });
    if (m == "copy") return bound(m, [obj](Interpreter&, Args&) { return Value::dict(obj.as_dict()); });
  }
  if (obj.is_list()) {
    if (m == "count")
      return bound(m, [obj](Interpreter& in, Args& a) {
        if (a.positional.size() != 1) in.fail("count() takes exactly one argument");
        int64_t n = 0;
        for (const Value& v : obj.as_list()) n += equal(v, a.positional[0]);
        return Value::integer(n);
      });
    if (m == "index")
      return bound(m, [obj](Interpreter& in, Args& a) {
        if (a.positional.empty()) in.fail("index() takes at least 1 argument");
        const List& l = obj.as_list();
        for (size_t k = 0; k < l.size(); ++k)
          if (equal(l[k], a.positional[0])) return Value::integer(static_cast<int64_t>(k));
        in.fail(repr(a.positional[0]) + " is not in list");
      });
  }
  return Value();
}

std::string object_desc(const Value& v) {
  if (v.is_none()) return "None";
  return v.type_name() + " object";
}

}  // namespace

Value Interpreter::getattr(const Value& obj, const std::string& attr) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_namespace()) {
    if (const Value* v = obj.as_dict().find(attr)) return *v;
    return Value::undefined("'Namespace object' has no attribute '" + attr + "'");
  }
  Value m = method(*this, obj, attr);
  if (!m.is_undefined()) return m;
  if (obj.is_dict()) {
    if (const Value* v = obj.as_dict().find(attr)) return *v;
  }
  return Value::undefined("'" + object_desc(obj) + "' has no attribute '" + attr + "'");
}

Value Interpreter::getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_dict() || obj.is_namespace()) {
    if (key.is_string()) {
      if (const Value* v = obj.as_dict().find(key.as_string())) return *v;
      if (obj.is_dict()) {
        Value m = method(*this, obj, key.as_string());
        if (!m.is_undefined()) return m;
      }
      return Value::undefined("'" + object_desc(obj) + "' has no attribute '" + key.as_string() + "'");
    }
    return Value::undefined("'" + object_desc(obj) + "' has no element " + repr(key));
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.as_int();
    if (obj.is_list()) {
      const List& l = obj.as_list();
      int64_t n = static_cast<int64_t>(l.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return l[static_cast<size_t>(i)];
    } else {
      auto cps = code_points(obj.as_string());
      int64_t n = static_cast<int64_t>(cps.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return Value::string(std::string(cps[static_cast<size_t>(i)]));
    }
    return Value::undefined("'" + object_desc(obj) + "' has no element " + std::to_string(key.as_int()));
  }
  if (key.is_string()) return getattr(obj, key.as_string());
  return Value::undefined("'" + object_desc(obj) + "' has no element " + repr(key));
}

List Interpreter::iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::List: return v.as_list();
    case Value::Kind::Dict: {
      List keys;
      for (const auto& kv : v.as_dict().items) keys.push_back(Value::string(kv.first));
      return keys;
    }
    case Value::Kind::String: {
      List chars;
      for (auto cp : code_points(v.as_string())) chars.push_back(Value::string(std::string(cp)));
      return chars;
    }
    default: fail("'" + v.type_name() + "' object is not iterable");
  }
}

bool less_than(Interpreter& in, const Value& a, const Value& b, bool case_sensitive) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) {
    if (case_sensitive) return a.as_string() < b.as_string();
    return lower_str(a.as_string()) < lower_str(b.as_string());
  }
  if (a.is_list() && b.is_list()) {
    const List &x = a.as_list(), &y = b.as_list();
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (equal(x[k], y[k])) continue;
      return less_than(in, x[k], y[k], case_sensitive);
    }
    return x.size() < y.size();
  }
  in.fail("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

namespace {

// Jinja's environment.getitem over a dotted attribute path ("function.name", "0").
Value attribute_path(Interpreter& in, const Value& item, const Value& path) {
  if (path.is_int()) return in.getitem(item, path);
  if (!path.is_string()) in.fail("attribute must be a string or integer, got " + path.type_name());
  Value v = item;
  const std::string& p = path.as_string();
  size_t start = 0;
  for (;;) {
    size_t dot = p.find('.', start);
    std::string part = p.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && part.size() <= 18 &&
                  std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (v.is_undefined()) return v;
    v = in.getitem(v, digits ? Value::integer(std::stoll(part)) : Value::string(part));
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

Value slice(Interpreter& in, const Value& obj, Args& a) {
  if (obj.is_undefined()) in.fail_undefined(obj);
  if (!obj.is_list() && !obj.is_string()) in.fail("'" + obj.type_name() + "' object is not subscriptable");
  auto get = [&](size_t k) -> std::optional<int64_t> {
    const Value& v = a.positional[k];
    if (v.is_none()) return std::nullopt;
    return to_index(in, v, "slice indices");
  };
  std::optional<int64_t> start = get(0), stop = get(1), step_o = get(2);
  int64_t step = step_o.value_or(1);
  if (step == 0) in.fail("slice step cannot be zero");
  std::vector<std::string_view> cps;
  int64_t n = 0;
  if (obj.is_string()) {
    cps = code_points(obj.as_string());
    n = static_cast<int64_t>(cps.size());
  } else {
    n = static_cast<int64_t>(obj.as_list().size());
  }
  auto clamp = [&](std::optional<int64_t> v, int64_t def, bool is_start) -> int64_t {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) x += n;
    if (step > 0) return std::clamp<int64_t>(x, 0, n);
    (void)is_start;
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  int64_t b = clamp(start, step > 0 ? 0 : n - 1, true);
  int64_t e = clamp(stop, step > 0 ? n : -1, false);
  std::vector<size_t> idx;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step) idx.push_back(static_cast<size_t>(i));
  if (obj.is_string()) {
    std::string out;
    for (size_t i : idx) out += cps[i];
    return Value::string(std::move(out));
  }
  List out;
  for (size_t i : idx) out.push_back(obj.as_list()[i]);
  return Value::list(std::move(out), obj.is_tuple());
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// The mapping that namespace(...) and dict(...) build: positional mappings merged in order, then
// the keyword arguments.
Dict mapping_from_args(Interpreter& in, Args& a, const char* callee) {
  Dict d;
  for (const Value& p : a.positional) {
    if (!p.is_dict()) in.fail(std::string(callee) + "() positional argument must be a mapping, got " + p.type_name());
    for (const auto& [k, v] : p.as_dict().items) d.set(k, v);
  }
  for (const auto& [k, v] : a.keyword) d.set(k, v);
  return d;
}

Value sorted(Interpreter& in, List l, bool reverse, bool case_sensitive, const Value* attribute) {
  auto key = [&](const Value& v) { return attribute && !attribute->is_none() ? attribute_path(in, v, *attribute) : v; };
  std::stable_sort(l.begin(), l.end(), [&](const Value& x, const Value& y) {
    Value kx = key(x), ky = key(y);
    return reverse ? less_than(in, ky, kx, case_sensitive) : less_than(in, kx, ky, case_sensitive);
  });
  return Value::list(std::move(l));
}

}  // namespace

Value Interpreter::filter(const std::string& name, const Value& v, Args& a) {
  const Value* a0 = arg(a, 0, "");
  if (name == "__slice__") return slice(*this, v, a);
  if (name == "safe") return v;
  if (name == "tojson") {  // transformers: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
    JsonOptions o;
    if (const Value* x = arg(a, 0, "ensure_ascii")) o.ensure_ascii = x->truthy();
    if (const Value* x = arg(a, 1, "indent"); x && !x->is_none()) {
      if (x->is_string()) o.indent = x->as_string();
      else o.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(to_index(*this, *x, "indent"), 0, 64)), ' ');
    }
    if (const Value* x = arg(a, 2, "separators"); x && !x->is_none()) {
      if (!x->is_list() || x->as_list().size() != 2 || !x->as_list()[0].is_string() || !x->as_list()[1].is_string())
        fail("tojson: separators must be a pair of strings");
      o.separators = std::make_pair(x->as_list()[0].as_string(), x->as_list()[1].as_string());
    }
    if (const Value* x = arg(a, 3, "sort_keys")) o.sort_keys = x->truthy();
    try {
      std::string s = to_json(v, o, limits_.max_nesting * 4);
      check_string(s.size());
      return Value::string(std::move(s));
    } catch (const Error& e) {
      fail("tojson: " + e.message());
    }
  }
  if (name == "default" || name == "d") {
    Value def = arg_or(a, 0, "default_value", Value::string(""));
    bool boolean = arg_or(a, 1, "boolean", Value::boolean(false)).truthy();
    return (v.is_undefined() || (boolean && !v.truthy())) ? def : v;
  }
  if (name == "length" || name == "count") {
    if (v.is_string()) return Value::integer(static_cast<int64_t>(code_point_count(v.as_string())));
    if (v.is_list()) return Value::integer(static_cast<int64_t>(v.as_list().size()));
    if (v.is_dict()) return Value::integer(static_cast<int64_t>(v.as_dict().items.size()));
    if (v.is_undefined()) return Value::integer(0);
    fail("object of type '" + v.type_name() + "' has no len()");
  }
  if (name == "string") return Value::string(to_str(v));
  if (name == "trim") return Value::string(strip_str(to_str(v), arg(a, 0, "chars"), true, true));
  if (name == "upper") return Value::string(upper_str(to_str(v)));
  if (name == "lower") return Value::string(lower_str(to_str(v)));
  if (name == "title") return Value::string(title_str(to_str(v)));
  if (name == "capitalize") return Value::string(capitalize_str(to_str(v)));
  if (name == "escape" || name == "e") return Value::string(html_escape(to_str(v)));
  if (name == "replace") {
    if (a.positional.size() < 2) fail("replace filter takes old and new strings");
    const Value* c = arg(a, 2, "count");
    int64_t count = (!c || c->is_none()) ? -1 : to_index(*this, *c, "count");
    return Value::string(replace_str(*this, to_str(v), to_str(a.positional[0]), to_str(a.positional[1]), count));
  }
  if (name == "indent") {
    Value width = arg_or(a, 0, "width", Value::integer(4));
    bool first = arg_or(a, 1, "first", Value::boolean(false)).truthy();
    bool blank = arg_or(a, 2, "blank", Value::boolean(false)).truthy();
    std::string pad = width.is_string() ? width.as_string() : std::string(static_cast<size_t>(std::clamp<int64_t>(to_index(*this, width, "width"), 0, 1024)), ' ');
    std::string s = to_str(v), out;
    size_t start = 0, line = 0;
    for (;;) {
      size_t nl = s.find('\n', start);
      std::string ln = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
      if ((line > 0 || first) && (blank || !ln.empty())) out += pad;
      out += ln;
      check_string(out.size());
      if (nl == std::string::npos) break;
      out += '\n';
      start = nl + 1;
      ++line;
    }
    return Value::string(std::move(out));
  }
  if (name == "format") return percent_format_value(v, a);
  if (name == "first" || name == "last") {
    List l = iterate(v);
    if (l.empty()) return Value::undefined("No first item, sequence was empty.");
    return name == "first" ? l.front() : l.back();
  }
  if (name == "list") return Value::list(iterate(v));
  if (name == "reverse") {
    if (v.is_string()) {
      auto cps = code_points(v.as_string());
      std::string out;
      for (size_t k = cps.size(); k-- > 0;) out += cps[k];
      return Value::string(std::move(out));
    }
    List l = iterate(v);
    std::reverse(l.begin(), l.end());
    return Value::list(std::move(l));
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::list({});
    if (!v.is_dict()) fail("items filter: expected a mapping, got " + v.type_name());
    List out;
    for (const auto& [k, x] : v.as_dict().items) out.push_back(Value::list({Value::string(k), x}, true));
    return Value::list(std::move(out));
  }
  if (name == "dictsort") {
    if (!v.is_dict()) fail("dictsort: expected a mapping, got " + v.type_name());
    bool cs = arg_or(a, 0, "case_sensitive", Value::boolean(false)).truthy();
    std::string by = to_str(arg_or(a, 1, "by", Value::string("key")));
    bool rev = arg_or(a, 2, "reverse", Value::boolean(false)).truthy();
    List items;
    for (const auto& [k, x] : v.as_dict().items) items.push_back(Value::list({Value::string(k), x}, true));
    Value attr = Value::integer(by == "value" ? 1 : 0);
    return sorted(*this, std::move(items), rev, cs, &attr);
  }
  if (name == "join") {
    Value sep = arg_or(a, 0, "d", Value::string(""));
    const Value* attr = arg(a, 1, "attribute");
    std::string out;
    bool firstv = true;
    for (const Value& x : iterate(v)) {
      if (!firstv) out += to_str(sep);
      firstv = false;
      out += to_str(attr ? attribute_path(*this, x, *attr) : x);
      check_string(out.size());
    }
    return Value::string(std::move(out));
  }
  if (name == "map") {
    List out;
    const Value* attr = arg(a, SIZE_MAX, "attribute");
    if (attr) {
      const Value* def = arg(a, SIZE_MAX, "default");
      for (const Value& x : iterate(v)) {
        Value y = attribute_path(*this, x, *attr);
        out.push_back(y.is_undefined() && def ? *def : y);
      }
      return Value::list(std::move(out));
    }
    if (a.positional.empty() || !a.positional[0].is_string()) fail("map: expected a filter name or attribute=");
    std::string f = a.positional[0].as_string();
    Args rest;
    rest.positional.assign(a.positional.begin() + 1, a.positional.end());
    rest.keyword = a.keyword;
    for (const Value& x : iterate(v)) out.push_back(filter(f, x, rest));
    return Value::list(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    bool attr_mode = name.ends_with("attr");
    bool keep = name.starts_with("select");
    size_t k = 0;
    Value attr;
    if (attr_mode) {
      if (a.positional.empty()) fail(name + ": expected an attribute name");
      attr = a.positional[k++];
    }
    std::string test_name;
    if (k < a.positional.size()) test_name = to_str(a.positional[k++]);
    Args rest;
    rest.positional.assign(a.positional.begin() + static_cast<long>(std::min(k, a.positional.size())), a.positional.end());
    List out;
    for (const Value& x : iterate(v)) {
      Value subject = attr_mode ? attribute_path(*this, x, attr) : x;
      bool ok = test_name.empty() ? subject.truthy() : test(test_name, subject, rest);
      if (ok == keep) out.push_back(x);
    }
    return Value::list(std::move(out));
  }
  if (name == "sort") {
    bool rev = arg_or(a, 0, "reverse", Value::boolean(false)).truthy();
    bool cs = arg_or(a, 1, "case_sensitive", Value::boolean(false)).truthy();
    return sorted(*this, iterate(v), rev, cs, arg(a, 2, "attribute"));
  }
  if (name == "unique") {
    bool cs = arg_or(a, 0, "case_sensitive", Value::boolean(false)).truthy();
    const Value* attr = arg(a, 1, "attribute");
    List out, keys;
    for (const Value& x : iterate(v)) {
      Value key = attr ? attribute_path(*this, x, *attr) : x;
      if (!cs && key.is_string()) key = Value::string(lower_str(key.as_string()));
      if (std::none_of(keys.begin(), keys.end(), [&](const Value& y) { return equal(y, key); })) {
        keys.push_back(key);
        out.push_back(x);
      }
    }
    return Value::list(std::move(out));
  }
  if (name == "min" || name == "max") {
    List l = iterate(v);
    if (l.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    bool cs = arg_or(a, 0, "case_sensitive", Value::boolean(false)).truthy();
    const Value* attr = arg(a, 1, "attribute");
    Value best = l[0];
    for (size_t k = 1; k < l.size(); ++k) {
      Value x = attr ? attribute_path(*this, l[k], *attr) : l[k];
      Value y = attr ? attribute_path(*this, best, *attr) : best;
      if (name == "min" ? less_than(*this, x, y, cs) : less_than(*this, y, x, cs)) best = l[k];
    }
    return best;
  }
  if (name == "sum") {
    const Value* attr = arg(a, 0, "attribute");
    Value total = arg_or(a, 1, "start", Value::integer(0));
    for (const Value& x : iterate(v)) total = eval_binary("+", total, attr ? attribute_path(*this, x, *attr) : x);
    return total;
  }
  if (name == "abs") {
    if (v.is_float()) return Value::floating(std::fabs(v.as_double()));
    if (v.is_int() || v.is_bool()) {
      if (v.as_int() == INT64_MIN) fail("integer overflow");
      return Value::integer(std::llabs(v.as_int()));
    }
    fail("bad operand type for abs(): '" + v.type_name() + "'");
  }
  if (name == "int") {
    Value def = arg_or(a, 0, "default", Value::integer(0));
    if (v.is_int() || v.is_bool()) return Value::integer(v.as_int());
    if (v.is_float()) return std::isfinite(v.as_double()) && std::fabs(v.as_double()) < 9.2e18 ? Value::integer(static_cast<int64_t>(v.as_double())) : def;
    if (v.is_string()) {
      std::string s = strip_str(v.as_string(), nullptr, true, true);
      int base = static_cast<int>(to_index(*this, arg_or(a, 1, "base", Value::integer(10)), "base"));
      try {
        size_t used = 0;
        long long x = std::stoll(s, &used, base);
        if (used == s.size()) return Value::integer(x);
        double d = std::stod(s, &used);
        if (used == s.size() && std::isfinite(d) && std::fabs(d) < 9.2e18) return Value::integer(static_cast<int64_t>(d));
      } catch (const std::exception&) {
      }
      return def;
    }
    return def;
  }
  if (name == "float") {
    Value def = arg_or(a, 0, "default", Value::floating(0.0));
    if (v.is_number()) return Value::floating(v.as_double());
    if (v.is_string()) {
      try {
        std::string s = strip_str(v.as_string(), nullptr, true, true);
        size_t used = 0;
        double d = std::stod(s, &used);
        if (used == s.size()) return Value::floating(d);
      } catch (const std::exception&) {
      }
    }
    return def;
  }
  if (name == "round") {
    int64_t precision = to_index(*this, arg_or(a, 0, "precision", Value::integer(0)), "precision");
    std::string method_name = to_str(arg_or(a, 1, "method", Value::string("common")));
    if (!v.is_number()) fail("round: expected a number, got " + v.type_name());
    double scale = std::pow(10.0, static_cast<double>(precision));
    double x = v.as_double() * scale;
    double r = method_name == "floor" ? std::floor(x) : method_name == "ceil" ? std::ceil(x) : std::nearbyint(x);
    if (method_name != "common" && method_name != "floor" && method_name != "ceil")
      fail("round: method must be 'common', 'ceil' or 'floor'");
    return Value::floating(r / scale);
  }
  if (name == "attr") return a0 ? getattr(v, to_str(*a0)) : Value();
  if (name == "wordcount") return Value::integer(static_cast<int64_t>(split_str(*this, to_str(v), Value::none(), -1).size()));
  if (name == "center") {
    int64_t width = to_index(*this, arg_or(a, 0, "width", Value::integer(80)), "width");
    std::string s = to_str(v);
    int64_t n = static_cast<int64_t>(code_point_count(s));
    if (width <= n) return Value::string(s);
    check_string(static_cast<size_t>(width));
    int64_t total = width - n, left = total / 2 + (total & width & 1);
    return Value::string(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(total - left), ' '));
  }
  fail("no filter named '" + name + "'", "supported filters: abs, capitalize, center, count, d, default, dictsort, "
                                         "e, escape, first, float, format, indent, int, items, join, last, length, list, lower, map, "
                                         "max, min, reject, rejectattr, replace, reverse, round, safe, select, selectattr, sort, "
                                         "string, sum, title, tojson, trim, unique, upper, wordcount");
}

Value Interpreter::percent_format_value(const Value& v, Args& a) {
  if (!v.is_string()) fail("format filter: expected a string");
  Value args = a.positional.size() == 1 ? a.positional[0] : Value::list(a.positional, true);
  if (a.positional.size() == 1 && !a.positional[0].is_tuple()) args = Value::list({a.positional[0]}, true);
  return eval_binary("%", v, args);
}

bool Interpreter::test(const std::string& name, const Value& v, Args& a) {
  const Value* x = arg(a, 0, "");
  auto need = [&]() -> const Value& {
    if (!x) fail("test '" + name + "' needs an argument");
    return *x;
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "sequence") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "callable") return v.is_callable();
  if (name == "escaped") return false;
  if (name == "lower") return v.is_string() && lower_str(v.as_string()) == v.as_string();
  if (name == "upper") return v.is_string() && upper_str(v.as_string()) == v.as_string();
  if (name == "odd" || name == "even") {
    int64_t i = to_index(*this, v, name.c_str());
    return ((i % 2) != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    int64_t d = to_index(*this, need(), "divisibleby");
    if (d == 0) fail("integer division or modulo by zero");
    return to_index(*this, v, "divisibleby") % d == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return equal(v, need());
  if (name == "ne" || name == "!=") return !equal(v, need());
  if (name == "sameas") {
    const Value& y = need();
    if (v.is_none() || v.is_bool() || y.is_none() || y.is_bool()) return v.kind() == y.kind() && equal(v, y);
    return equal(v, y) && v.kind() == y.kind();
  }
  if (name == "lt" || name == "lessthan" || name == "<") return less_than(*this, v, need());
  if (name == "gt" || name == "greaterthan" || name == ">") return less_than(*this, need(), v);
  if (name == "le" || name == "<=") return !less_than(*this, need(), v);
  if (name == "ge" || name == ">=") return !less_than(*this, v, need());
  if (name == "in") {
    const Value& seq = need();
    if (seq.is_undefined()) return false;
    if (seq.is_string()) {
      if (v.is_undefined()) fail_undefined(v);
      if (!v.is_string()) fail("'in <string>' requires string as left operand, not " + v.type_name());
      return seq.as_string().find(v.as_string()) != std::string::npos;
    }
    if (seq.is_list()) {
      for (const Value& y : seq.as_list())
        if (equal(v, y)) return true;
      return false;
    }
    if (seq.is_dict()) return v.is_string() && seq.as_dict().find(v.as_string()) != nullptr;
    fail("argument of type '" + seq.type_name() + "' is not iterable");
  }
  fail("no test named '" + name + "'", "supported tests: boolean, callable, defined, divisibleby, eq, equalto, even, "
                                       "false, float, ge, gt, in, integer, iterable, le, lower, lt, mapping, ne, none, number, "
                                       "odd, sameas, sequence, string, true, undefined, upper");
}

void add_globals(Scope& scope) {
  scope.vars["range"] = bound("range", [](Interpreter& in, Args& a) {
    if (a.positional.empty() || a.positional.size() > 3) in.fail("range expected 1 to 3 arguments");
    int64_t start = 0, stop, step = 1;
    if (a.positional.size() == 1) {
      stop = to_index(in, a.positional[0], "range()");
    } else {
      start = to_index(in, a.positional[0], "range()");
      stop = to_index(in, a.positional[1], "range()");
      if (a.positional.size() == 3) step = to_index(in, a.positional[2], "range()");
    }
    if (step == 0) in.fail("range() arg 3 must not be zero");
    double count = std::max(0.0, std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step)));
    in.check_list(static_cast<size_t>(std::min(count, 1e18)));
    List out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(Value::integer(i));
    return Value::list(std::move(out));
  });
  scope.vars["namespace"] = bound("namespace", [](Interpreter& in, Args& a) {
    return Value::namespace_(mapping_from_args(in, a, "namespace"));
  });
  scope.vars["dict"] = bound("dict", [](Interpreter& in, Args& a) { return Value::dict(mapping_from_args(in, a, "dict")); });
  scope.vars["raise_exception"] = bound("raise_exception", [](Interpreter& in, Args& a) -> Value {
    in.fail(a.positional.empty() ? std::string("raise_exception() called") : to_str(a.positional[0]),
            "the chat template refused this conversation");
  });
  scope.vars["strftime_now"] = bound("strftime_now", [](Interpreter& in, Args& a) {
    if (a.positional.empty() || !a.positional[0].is_string()) in.fail("strftime_now(format) takes a format string");
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[256];
    size_t n = std::strftime(buf, sizeof buf, a.positional[0].as_string().c_str(), &tm);
    return Value::string(std::string(buf, n));
  });
}

}  // namespace grpo::text::jinja
