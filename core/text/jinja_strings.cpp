// Python's str methods and Jinja's string helpers for the Jinja interpreter (see jinja.h):
// case mapping, strip/split/replace with Python's semantics on UTF-8 text, str.format for plain
// fields, and the bound methods `"text".method(...)` that templates call.
#include <algorithm>

#include <utf8proc.h>

#include "core/common/error.h"
#include "core/text/jinja_interp.h"
#include "core/text/unicode.h"

namespace grpo::text::jinja {
namespace {

bool is_cased(char32_t c) {
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

}  // namespace

// Each code point of `s` through a utf8proc case mapping.
static std::string map_case(std::string_view s, utf8proc_int32_t (*to)(utf8proc_int32_t)) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    size_t len;
    char32_t c = decode_utf8(s, i, len);
    i += len;
    append_utf8(out, static_cast<char32_t>(to(static_cast<utf8proc_int32_t>(c))));
  }
  return out;
}
std::string lower_str(std::string_view s) { return map_case(s, utf8proc_tolower); }
std::string upper_str(std::string_view s) { return map_case(s, utf8proc_toupper); }
// Python str.title(): a cased character after an uncased one starts a word.
std::string title_str(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (size_t i = 0; i < s.size();) {
    size_t len;
    char32_t c = decode_utf8(s, i, len);
    i += len;
    bool cased = is_cased(c);
    char32_t m = cased ? (prev_cased ? utf8proc_tolower(static_cast<utf8proc_int32_t>(c))
                                     : utf8proc_totitle(static_cast<utf8proc_int32_t>(c)))
                       : c;
    append_utf8(out, m);
    prev_cased = cased;
  }
  return out;
}
std::string capitalize_str(std::string_view s) {
  if (s.empty()) return "";
  size_t len;
  char32_t c = decode_utf8(s, 0, len);
  std::string out;
  append_utf8(out, static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c))));
  return out + lower_str(s.substr(len));
}

// Python str.strip/lstrip/rstrip with chars = None (whitespace) or a set of characters.
std::string strip_str(std::string_view s, const Value* chars, bool left, bool right) {
  std::vector<std::string_view> set;
  bool ws = !chars || chars->is_none() || chars->is_undefined();
  if (!ws) set = code_points(chars->as_string());
  auto strip_it = [&](std::string_view cp) {
    if (ws) {
      size_t len;
      return python_isspace(decode_utf8(cp, 0, len));
    }
    return std::find(set.begin(), set.end(), cp) != set.end();
  };
  auto cps = code_points(s);
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip_it(cps[b])) ++b;
  if (right)
    while (e > b && strip_it(cps[e - 1])) --e;
  std::string out;
  for (size_t k = b; k < e; ++k) out += cps[k];
  return out;
}

List split_str(Interpreter& in, const std::string& s, const Value& sep, int64_t maxsplit) {
  List out;
  if (sep.is_none() || sep.is_undefined()) {
    auto cps = code_points(s);
    size_t k = 0;
    auto space = [&](size_t i) {
      size_t len;
      return python_isspace(decode_utf8(cps[i], 0, len));
    };
    while (k < cps.size()) {
      while (k < cps.size() && space(k)) ++k;
      if (k >= cps.size()) break;
      std::string word;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
        for (; k < cps.size(); ++k) word += cps[k];
        // Python keeps trailing whitespace of the remainder only when maxsplit stops it.
        out.push_back(Value::string(word));
        break;
      }
      while (k < cps.size() && !space(k)) word += cps[k++];
      out.push_back(Value::string(word));
    }
    return out;
  }
  if (!sep.is_string()) in.fail("split(): sep must be str or None, not " + sep.type_name());
  const std::string& d = sep.as_string();
  if (d.empty()) in.fail("split(): empty separator");
  size_t start = 0;
  for (;;) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) break;
    size_t p = s.find(d, start);
    if (p == std::string::npos) break;
    out.push_back(Value::string(s.substr(start, p - start)));
    start = p + d.size();
  }
  out.push_back(Value::string(s.substr(start)));
  in.check_list(out.size());
  return out;
}

std::string replace_str(Interpreter& in, const std::string& s, const std::string& old, const std::string& rep,
                        int64_t count) {
  std::string out;
  int64_t done = 0;
  if (old.empty()) {  // Python inserts `rep` before every character and at the end
    auto cps = code_points(s);
    for (size_t k = 0; k <= cps.size(); ++k) {
      if (count < 0 || done < count) {
        out += rep;
        ++done;
      }
      if (k < cps.size()) out += cps[k];
      in.check_string(out.size());
    }
    return out;
  }
  size_t start = 0;
  for (;;) {
    size_t p = (count >= 0 && done >= count) ? std::string::npos : s.find(old, start);
    if (p == std::string::npos) break;
    out.append(s, start, p - start);
    out += rep;
    in.check_string(out.size());
    start = p + old.size();
    ++done;
  }
  out.append(s, start);
  return out;
}

static bool starts_or_ends(Interpreter& in, const std::string& s, const Value& what, bool start) {
  auto one = [&](const Value& v) {
    if (!v.is_string()) in.fail(std::string(start ? "startswith" : "endswith") + " first arg must be str or a tuple of str, not " + v.type_name());
    const std::string& p = v.as_string();
    return start ? s.starts_with(p) : s.ends_with(p);
  };
  if (what.is_list()) {
    for (const Value& v : what.as_list())
      if (one(v)) return true;
    return false;
  }
  return one(what);
}

// Positional-or-keyword argument k named `name`, or nullptr.
const Value* arg(const Args& a, size_t k, const char* name) {
  if (k < a.positional.size()) return &a.positional[k];
  for (const auto& [key, v] : a.keyword)
    if (key == name) return &v;
  return nullptr;
}
Value arg_or(const Args& a, size_t k, const char* name, Value fallback) {
  const Value* v = arg(a, k, name);
  return v ? *v : fallback;
}

Value bound(std::string name, std::function<Value(Interpreter&, Args&)> fn) {
  auto c = std::make_shared<Callable>();
  c->name = std::move(name);
  c->call = std::move(fn);
  return Value::callable(std::move(c));
}

// "%s".format(...) for {} {0} {name} without format specs.
static std::string format_str(Interpreter& in, const std::string& fmt, const Args& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (c == '{') {
      size_t end = fmt.find('}', i);
      if (end == std::string::npos) in.fail("format(): single '{' encountered in format string");
      std::string field = fmt.substr(i + 1, end - i - 1);
      if (field.find_first_of(":!") != std::string::npos) in.fail("format(): format specs are not supported");
      const Value* v = nullptr;
      if (field.empty()) v = auto_index < a.positional.size() ? &a.positional[auto_index++] : nullptr;
      else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
        if (field.size() > 9) in.fail("format(): field index too large");
        size_t k = std::stoul(field);
        v = k < a.positional.size() ? &a.positional[k] : nullptr;
      } else {
        for (const auto& [key, x] : a.keyword)
          if (key == field) v = &x;
      }
      if (!v) in.fail("format(): no argument for {" + field + "}");
      out += to_str(*v);
      i = end;
    } else {
      out += c;
    }
  }
  return out;
}

Value string_method(Interpreter& in, const std::string& s, const std::string& m) {
  auto str = [s](auto f) { return [s, f](Interpreter& in, Args& a) -> Value { return f(in, s, a); }; };
  using A = Args;
  if (m == "strip" || m == "lstrip" || m == "rstrip")
    return bound(m, str([m](Interpreter&, const std::string& s, A& a) {
      return Value::string(strip_str(s, arg(a, 0, "chars"), m != "rstrip", m != "lstrip"));
    }));
  if (m == "upper") return bound(m, str([](Interpreter&, const std::string& s, A&) { return Value::string(upper_str(s)); }));
  if (m == "lower") return bound(m, str([](Interpreter&, const std::string& s, A&) { return Value::string(lower_str(s)); }));
  if (m == "title") return bound(m, str([](Interpreter&, const std::string& s, A&) { return Value::string(title_str(s)); }));
  if (m == "capitalize")
    return bound(m, str([](Interpreter&, const std::string& s, A&) { return Value::string(capitalize_str(s)); }));
  if (m == "split" || m == "rsplit")
    return bound(m, str([m](Interpreter& in, const std::string& s, A& a) {
      Value sep = arg_or(a, 0, "sep", Value::none());
      int64_t maxsplit = to_index(in, arg_or(a, 1, "maxsplit", Value::integer(-1)), "maxsplit");
      if (m == "rsplit" && maxsplit >= 0) in.fail("rsplit() with maxsplit is not supported");
      return Value::list(split_str(in, s, sep, maxsplit));
    }));
  if (m == "splitlines")
    return bound(m, str([](Interpreter&, const std::string& s, A&) {
      List out;
      size_t start = 0;
      while (start < s.size()) {
        size_t p = s.find_first_of("\n\r", start);
        if (p == std::string::npos) {
          out.push_back(Value::string(s.substr(start)));
          break;
        }
        out.push_back(Value::string(s.substr(start, p - start)));
        start = p + ((s[p] == '\r' && p + 1 < s.size() && s[p + 1] == '\n') ? 2 : 1);
      }
      return Value::list(std::move(out));
    }));
  if (m == "startswith" || m == "endswith")
    return bound(m, str([m](Interpreter& in, const std::string& s, A& a) {
      if (a.positional.empty()) in.fail(m + "() takes at least 1 argument (0 given)");
      return Value::boolean(starts_or_ends(in, s, a.positional[0], m == "startswith"));
    }));
  if (m == "replace")
    return bound(m, str([](Interpreter& in, const std::string& s, A& a) {
      if (a.positional.size() < 2 || !a.positional[0].is_string() || !a.positional[1].is_string())
        in.fail("replace() takes two str arguments");
      int64_t count = to_index(in, arg_or(a, 2, "count", Value::integer(-1)), "count");
      return Value::string(replace_str(in, s, a.positional[0].as_string(), a.positional[1].as_string(), count));
    }));
  if (m == "find" || m == "rfind" || m == "count" || m == "index" || m == "rindex")
    return bound(m, str([m](Interpreter& in, const std::string& s, A& a) {
      if (a.positional.empty() || !a.positional[0].is_string()) in.fail(m + "() takes a str argument");
      const std::string& sub = a.positional[0].as_string();
      if (m == "count") {
        if (sub.empty()) return Value::integer(static_cast<int64_t>(code_point_count(s)) + 1);
        int64_t n = 0;
        for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
        return Value::integer(n);
      }
      size_t p = (m == "find" || m == "index") ? s.find(sub) : s.rfind(sub);
      if (p == std::string::npos) {
        if (m == "index" || m == "rindex") in.fail("substring not found");
        return Value::integer(-1);
      }
      return Value::integer(static_cast<int64_t>(code_point_count(std::string_view(s).substr(0, p))));
    }));
  if (m == "join")
    return bound(m, str([](Interpreter& in, const std::string& s, A& a) {
      if (a.positional.empty()) in.fail("join() takes exactly one argument");
      std::string out;
      bool first = true;
      for (const Value& v : in.iterate(a.positional[0])) {
        if (!v.is_string()) in.fail("sequence item: expected str instance, " + v.type_name() + " found");
        if (!first) out += s;
        first = false;
        out += v.as_string();
        in.check_string(out.size());
      }
      return Value::string(std::move(out));
    }));
  if (m == "format")
    return bound(m, str([](Interpreter& in, const std::string& s, A& a) { return Value::string(format_str(in, s, a)); }));
  if (m == "isdigit" || m == "isalpha" || m == "isalnum" || m == "isspace" || m == "islower" || m == "isupper")
    return bound(m, str([m](Interpreter&, const std::string& s, A&) {
      if (s.empty()) return Value::boolean(false);
      bool any_cased = false;
      for (size_t i = 0; i < s.size();) {
        size_t len;
        char32_t c = decode_utf8(s, i, len);
        i += len;
        auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
        bool ok = true;
        if (m == "isdigit") ok = cat == UTF8PROC_CATEGORY_ND;
        else if (m == "isalpha") ok = cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
        else if (m == "isalnum") ok = (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) || is_numeric(c);
        else if (m == "isspace") ok = python_isspace(c);
        else if (m == "islower") {
          if (cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LT) ok = false;
          any_cased |= cat == UTF8PROC_CATEGORY_LL;
        } else {
          if (cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT) ok = false;
          any_cased |= cat == UTF8PROC_CATEGORY_LU;
        }
        if (!ok) return Value::boolean(false);
      }
      return Value::boolean((m == "islower" || m == "isupper") ? any_cased : true);
    }));
  return Value::undefined("'str object' has no attribute '" + m + "'");
}

}  // namespace grpo::text::jinja
