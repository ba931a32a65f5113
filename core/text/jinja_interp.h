// The Jinja evaluator's internals, shared by jinja.cpp (statements and expressions) and
// jinja_builtins.cpp (filters, tests, methods and globals). Not a public header.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/text/jinja_parse.h"
#include "core/text/jinja_value.h"

namespace grpo::text::jinja {

struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
  const Value* find(const std::string& name) const;
};

class Interpreter {
public:
  Interpreter(const std::string& name, const Limits& limits) : name_(name), limits_(limits) {}

  std::string run(const Program& program, const Dict& context);

  // For builtins.
  [[noreturn]] void fail(const std::string& message, const std::string& hint = {}) const;
  [[noreturn]] void fail_undefined(const Value& undefined) const;  // the undefined's message
  const Limits& limits() const { return limits_; }
  void check_string(size_t bytes) const;
  void check_list(size_t items) const;
  void count_iterations(int64_t n);

  Value call(const Value& fn, Args& args);
  Value getattr(const Value& obj, const std::string& attr);
  Value getitem(const Value& obj, const Value& key);
  Value filter(const std::string& name, const Value& v, Args& args);
  bool test(const std::string& name, const Value& v, Args& args);
  List iterate(const Value& v);  // the items a for loop visits
  Value eval_binary(const std::string& op, const Value& a, const Value& b);
  Value percent_format_value(const Value& v, Args& a);

private:
  enum class Flow { Normal, Break, Continue };
  Flow exec(const Body& body, const std::shared_ptr<Scope>& scope, std::string& out);
  Flow exec_node(const Node& n, const std::shared_ptr<Scope>& scope, std::string& out);
  void exec_for(const Node& n, const std::shared_ptr<Scope>& scope, std::string& out);
  void define_macro(const Node& n, const std::shared_ptr<Scope>& scope);
  Value eval(const Expr& e, const std::shared_ptr<Scope>& scope);
  bool eval_compare(const std::string& op, const Value& a, const Value& b);
  Args eval_args(const std::vector<Arg>& args, const std::shared_ptr<Scope>& scope);
  void append(std::string& out, std::string_view text) const;

  const std::string& name_;
  const Limits& limits_;
  Pos pos_;
  int64_t iterations_ = 0;
  int call_depth_ = 0;
  int depth_ = 0;  // nested exec_node/eval frames (bounds the C++ stack)
  struct DepthGuard {
    Interpreter& in;
    explicit DepthGuard(Interpreter& i) : in(i) {
      if (++in.depth_ > in.limits_.max_render_depth) {
        --in.depth_;
        in.fail("rendering nested deeper than " + std::to_string(in.limits_.max_render_depth) + " levels (recursion?)",
                "the limit on render depth (Limits::max_render_depth)");
      }
    }
    ~DepthGuard() { --in.depth_; }
  };
};

// Globals every template sees (range, namespace, dict, raise_exception, strftime_now).
void add_globals(Scope& scope);

// Python-style helpers shared by jinja.cpp, jinja_builtins.cpp and jinja_strings.cpp.
std::string soft_str(const Value& v);
std::string lower_str(std::string_view s);
std::string upper_str(std::string_view s);
std::string title_str(std::string_view s);       // str.title()
std::string capitalize_str(std::string_view s);  // str.capitalize()
// str.strip/lstrip/rstrip: chars null/None/undefined = whitespace, else the set of its characters.
std::string strip_str(std::string_view s, const Value* chars, bool left, bool right);
List split_str(Interpreter& in, const std::string& s, const Value& sep, int64_t maxsplit);
std::string replace_str(Interpreter& in, const std::string& s, const std::string& old, const std::string& rep, int64_t count);
// Argument k (positional) or named `name` (keyword), or nullptr; arg_or with a fallback.
const Value* arg(const Args& a, size_t k, const char* name);
Value arg_or(const Args& a, size_t k, const char* name, Value fallback);
Value bound(std::string name, std::function<Value(Interpreter&, Args&)> fn);  // a callable value
Value string_method(Interpreter& in, const std::string& s, const std::string& m);  // "x".m, or undefined
int64_t to_index(Interpreter& in, const Value& v, const char* what);
bool less_than(Interpreter& in, const Value& a, const Value& b, bool case_sensitive = true);

}  // namespace grpo::text::jinja
