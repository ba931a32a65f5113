// The Jinja evaluator: statements and expressions over jinja::Value (see jinja.h). Scoping
// follows Jinja2: a for loop has its own scope (assignments inside it do not leak out; a
// namespace carries state across), if blocks do not, a macro call runs in a fresh scope above
// the one it was defined in. Filters, tests, methods and globals live in jinja_builtins.cpp.
#include "core/text/jinja.h"

#include <cmath>

#include "core/common/error.h"
#include "core/text/jinja_interp.h"

namespace grpo::text::jinja {

Template::Template(const std::string& source, std::string name, Limits limits)
    : name_(std::move(name)), limits_(limits),
      program_(std::make_shared<const Program>(parse(source, name_, limits_))) {}

std::string Template::render(const Dict& context) const {
  Interpreter in(name_, limits_);
  return in.run(*program_, context);
}

const Value* Scope::find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return &it->second;
  }
  return nullptr;
}

std::string Interpreter::run(const Program& program, const Dict& context) {
  auto globals = std::make_shared<Scope>();
  add_globals(*globals);
  auto root = std::make_shared<Scope>();
  root->parent = globals;
  for (const auto& [k, v] : context.items) root->vars[k] = v;
  std::string out;
  exec(program.body, root, out);
  return out;
}

void Interpreter::fail(const std::string& message, const std::string& hint) const {
  throw Error(name_ + " " + pos_.str(), message, hint);
}

void Interpreter::fail_undefined(const Value& u) const {
  fail(u.as_string().empty() ? "undefined value used" : u.as_string());
}

void Interpreter::check_string(size_t bytes) const {
  if (bytes > limits_.max_output_bytes)
    fail("output of " + std::to_string(bytes) + " bytes exceeds the limit of " + std::to_string(limits_.max_output_bytes) +
             " bytes",
         "the limit on rendered text (Limits::max_output_bytes)");
}

void Interpreter::check_list(size_t items) const {
  if (items > limits_.max_list_items)
    fail("a list of " + std::to_string(items) + " items exceeds the limit of " + std::to_string(limits_.max_list_items),
         "the limit on list sizes (Limits::max_list_items)");
}

void Interpreter::count_iterations(int64_t n) {
  iterations_ += n;
  if (iterations_ > limits_.max_loop_iterations)
    fail("more than " + std::to_string(limits_.max_loop_iterations) + " loop iterations",
         "the limit on loop iterations per render (Limits::max_loop_iterations)");
}

void Interpreter::append(std::string& out, std::string_view text) const {
  check_string(out.size() + text.size());
  out += text;
}

Interpreter::Flow Interpreter::exec(const Body& body, const std::shared_ptr<Scope>& scope, std::string& out) {
  for (const auto& n : body) {
    Flow f = exec_node(*n, scope, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

namespace {

// `{% set a, b = value %}` and `{% for a, b in ... %}`: Python's unpacking.
void bind_targets(Interpreter& in, Scope& scope, const std::vector<std::string>& targets, const Value& v) {
  if (targets.size() == 1) {
    scope.vars[targets[0]] = v;
    return;
  }
  List items = in.iterate(v);
  if (items.size() != targets.size()) {
    in.fail(std::string(items.size() < targets.size() ? "not enough" : "too many") + " values to unpack (expected " +
            std::to_string(targets.size()) + ", got " + std::to_string(items.size()) + ")");
  }
  for (size_t k = 0; k < targets.size(); ++k) scope.vars[targets[k]] = items[k];
}

Value apply_filters(Interpreter& in, const std::vector<ExprPtr>& filters, Value v,
                    const std::function<Args(const std::vector<Arg>&)>& eval_args) {
  for (const auto& f : filters) {
    Args a = eval_args(f->args);
    v = in.filter(f->name, v, a);
  }
  return v;
}

}  // namespace

Interpreter::Flow Interpreter::exec_node(const Node& n, const std::shared_ptr<Scope>& scope, std::string& out) {
  DepthGuard guard(*this);
  pos_ = n.pos;
  switch (n.kind) {
    case NodeKind::Text: append(out, n.text); return Flow::Normal;
    case NodeKind::Output: {
      Value v = eval(*n.exprs[0], scope);
      append(out, to_str(v));
      return Flow::Normal;
    }
    case NodeKind::If: {
      for (size_t k = 0; k < n.exprs.size(); ++k) {
        if (eval(*n.exprs[k], scope).truthy()) return exec(n.bodies[k], scope, out);
      }
      if (n.bodies.size() > n.exprs.size()) return exec(n.bodies.back(), scope, out);
      return Flow::Normal;
    }
    case NodeKind::For: exec_for(n, scope, out); return Flow::Normal;
    case NodeKind::Set: {
      Value v = eval(*n.exprs[0], scope);
      if (!n.text.empty()) {
        Value obj = eval(*n.exprs[1], scope);
        pos_ = n.pos;
        if (!obj.is_namespace()) fail("cannot assign attribute on non-namespace object (" + obj.type_name() + ")");
        obj.namespace_attrs().set(n.text, std::move(v));
      } else {
        bind_targets(*this, *scope, n.targets, v);
      }
      return Flow::Normal;
    }
    case NodeKind::SetBlock: {
      std::string text;
      Flow f = exec(n.bodies[0], scope, text);
      (void)f;
      Value v = apply_filters(*this, n.exprs, Value::string(std::move(text)),
                              [&](const std::vector<Arg>& a) { return eval_args(a, scope); });
      scope->vars[n.targets[0]] = std::move(v);
      return Flow::Normal;
    }
    case NodeKind::FilterBlock: {
      std::string text;
      Flow f = exec(n.bodies[0], scope, text);
      Value v = apply_filters(*this, n.exprs, Value::string(std::move(text)),
                              [&](const std::vector<Arg>& a) { return eval_args(a, scope); });
      append(out, to_str(v));
      return f;
    }
    case NodeKind::Macro: define_macro(n, scope); return Flow::Normal;
    case NodeKind::Break: return Flow::Break;
    case NodeKind::Continue: return Flow::Continue;
  }
  return Flow::Normal;
}

void Interpreter::exec_for(const Node& n, const std::shared_ptr<Scope>& scope, std::string& out) {
  Value seq = eval(*n.exprs[0], scope);
  pos_ = n.pos;
  List all = iterate(seq);
  auto loop_scope = std::make_shared<Scope>();
  loop_scope->parent = scope;
  List items;
  if (n.exprs[1]) {
    for (const Value& v : all) {
      count_iterations(1);
      bind_targets(*this, *loop_scope, n.targets, v);
      if (eval(*n.exprs[1], loop_scope).truthy()) items.push_back(v);
    }
  } else {
    items = std::move(all);
  }
  const int64_t length = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < length; ++i) {
    pos_ = n.pos;
    count_iterations(1);
    Dict loop;
    loop.items = {{"index", Value::integer(i + 1)},
                  {"index0", Value::integer(i)},
                  {"revindex", Value::integer(length - i)},
                  {"revindex0", Value::integer(length - i - 1)},
                  {"first", Value::boolean(i == 0)},
                  {"last", Value::boolean(i == length - 1)},
                  {"length", Value::integer(length)},
                  {"depth", Value::integer(1)},
                  {"depth0", Value::integer(0)},
                  {"previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item")},
                  {"nextitem", i + 1 < length ? items[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item")}};
    auto cycle = std::make_shared<Callable>();
    cycle->name = "loop.cycle";
    cycle->call = [i](Interpreter& in, Args& a) {
      if (a.positional.empty()) in.fail("no items for cycling given");
      return a.positional[static_cast<size_t>(i) % a.positional.size()];
    };
    loop.items.emplace_back("cycle", Value::callable(std::move(cycle)));
    loop_scope->vars["loop"] = Value::dict(std::move(loop));
    bind_targets(*this, *loop_scope, n.targets, items[static_cast<size_t>(i)]);
    if (exec(n.bodies[0], loop_scope, out) == Flow::Break) break;
  }
  if (items.empty()) exec(n.bodies[1], scope, out);
}

void Interpreter::define_macro(const Node& n, const std::shared_ptr<Scope>& scope) {
  auto fn = std::make_shared<Callable>();
  fn->name = n.text;
  const Node* node = &n;
  std::weak_ptr<Scope> defined_in = scope;  // no cycle: the scope holds the macro
  fn->call = [node, defined_in](Interpreter& in, Args& args) -> Value {
    auto parent = defined_in.lock();
    if (!parent) in.fail("macro '" + node->text + "' called outside the scope it was defined in");
    if (in.call_depth_ >= in.limits_.max_call_depth)
      in.fail("macro calls nested deeper than " + std::to_string(in.limits_.max_call_depth) + " (recursion?)",
              "the limit on macro call depth (Limits::max_call_depth)");
    auto local = std::make_shared<Scope>();
    local->parent = parent;
    const auto& params = node->targets;
    List varargs;
    for (size_t k = 0; k < args.positional.size(); ++k) {
      if (k < params.size()) local->vars[params[k]] = args.positional[k];
      else varargs.push_back(args.positional[k]);
    }
    Dict kwargs;
    for (auto& [key, v] : args.keyword) {
      auto it = std::find(params.begin(), params.end(), key);
      if (it == params.end()) {
        kwargs.set(key, v);
      } else {
        if (local->vars.count(key)) in.fail("macro '" + node->text + "' got multiple values for argument '" + key + "'");
        local->vars[key] = v;
      }
    }
    for (size_t k = 0; k < params.size(); ++k) {
      if (local->vars.count(params[k])) continue;
      if (node->exprs[k]) local->vars[params[k]] = in.eval(*node->exprs[k], local);
      else local->vars[params[k]] = Value::undefined("parameter '" + params[k] + "' was not provided");
    }
    local->vars["varargs"] = Value::list(std::move(varargs));
    local->vars["kwargs"] = Value::dict(std::move(kwargs));
    Pos saved = in.pos_;
    ++in.call_depth_;
    std::string text;
    try {
      in.exec(node->bodies[0], local, text);
    } catch (...) {
      --in.call_depth_;
      throw;
    }
    --in.call_depth_;
    in.pos_ = saved;
    return Value::string(std::move(text));
  };
  scope->vars[n.text] = Value::callable(std::move(fn));
}

Args Interpreter::eval_args(const std::vector<Arg>& args, const std::shared_ptr<Scope>& scope) {
  Args out;
  for (const Arg& a : args) {
    Value v = eval(*a.value, scope);
    if (a.name.empty()) out.positional.push_back(std::move(v));
    else out.keyword.emplace_back(a.name, std::move(v));
  }
  return out;
}

Value Interpreter::eval(const Expr& e, const std::shared_ptr<Scope>& scope) {
  DepthGuard guard(*this);
  pos_ = e.pos;
  switch (e.kind) {
    case ExprKind::Const: return e.constant;
    case ExprKind::Name: {
      if (const Value* v = scope->find(e.name)) return *v;
      return Value::undefined("'" + e.name + "' is undefined");
    }
    case ExprKind::List:
    case ExprKind::Tuple: {
      List l;
      for (const auto& x : e.items) l.push_back(eval(*x, scope));
      return Value::list(std::move(l), e.kind == ExprKind::Tuple);
    }
    case ExprKind::Dict: {
      Dict d;
      for (size_t k = 0; k + 1 < e.items.size(); k += 2) {
        Value key = eval(*e.items[k], scope);
        if (!key.is_string()) fail("dict keys must be strings here, got " + key.type_name());
        d.set(key.as_string(), eval(*e.items[k + 1], scope));
      }
      return Value::dict(std::move(d));
    }
    case ExprKind::Getattr: {
      Value obj = eval(*e.items[0], scope);
      pos_ = e.pos;
      return getattr(obj, e.name);
    }
    case ExprKind::Getitem: {
      Value obj = eval(*e.items[0], scope);
      const Expr& key = *e.items[1];
      if (key.kind == ExprKind::Slice) {
        Value parts[3];
        for (int k = 0; k < 3; ++k)
          parts[k] = key.items[static_cast<size_t>(k)] ? eval(*key.items[static_cast<size_t>(k)], scope) : Value::none();
        pos_ = e.pos;
        Args a;
        a.positional = {parts[0], parts[1], parts[2]};
        return filter("__slice__", obj, a);
      }
      Value k = eval(key, scope);
      pos_ = e.pos;
      return getitem(obj, k);
    }
    case ExprKind::Slice: fail("a slice is only allowed inside [ ]");
    case ExprKind::Call: {
      Value fn = eval(*e.items[0], scope);
      Args a = eval_args(e.args, scope);
      pos_ = e.pos;
      return call(fn, a);
    }
    case ExprKind::Filter: {
      Value v = eval(*e.items[0], scope);
      Args a = eval_args(e.args, scope);
      pos_ = e.pos;
      return filter(e.name, v, a);
    }
    case ExprKind::Test: {
      Value v = eval(*e.items[0], scope);
      Args a = eval_args(e.args, scope);
      pos_ = e.pos;
      return Value::boolean(test(e.name, v, a));
    }
    case ExprKind::Neg:
    case ExprKind::Pos: {
      Value v = eval(*e.items[0], scope);
      pos_ = e.pos;
      if (v.is_undefined()) fail_undefined(v);
      if (!v.is_number()) fail("bad operand type for unary " + std::string(e.kind == ExprKind::Neg ? "-" : "+") + ": '" + v.type_name() + "'");
      if (e.kind == ExprKind::Pos) return v.is_bool() ? Value::integer(v.as_int()) : v;
      if (v.is_float()) return Value::floating(-v.as_double());
      if (v.as_int() == INT64_MIN) fail("integer overflow");
      return Value::integer(-v.as_int());
    }
    case ExprKind::Not: return Value::boolean(!eval(*e.items[0], scope).truthy());
    case ExprKind::And: {
      Value a = eval(*e.items[0], scope);
      return a.truthy() ? eval(*e.items[1], scope) : a;
    }
    case ExprKind::Or: {
      Value a = eval(*e.items[0], scope);
      return a.truthy() ? a : eval(*e.items[1], scope);
    }
    case ExprKind::Binary: {
      Value a = eval(*e.items[0], scope);
      Value b = eval(*e.items[1], scope);
      pos_ = e.pos;
      return eval_binary(e.name, a, b);
    }
    case ExprKind::Compare: {
      Value left = eval(*e.items[0], scope);
      for (size_t k = 0; k < e.ops.size(); ++k) {
        Value right = eval(*e.items[k + 1], scope);
        pos_ = e.pos;
        if (!eval_compare(e.ops[k], left, right)) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case ExprKind::Cond: {
      if (eval(*e.items[0], scope).truthy()) return eval(*e.items[1], scope);
      if (e.items[2]) return eval(*e.items[2], scope);
      return Value::undefined("the inline if expression evaluated to false and no else section was defined");
    }
  }
  return Value();
}

namespace {

template <class Op>
int64_t checked(Interpreter& in, Op op) {
  int64_t r = 0;
  if (op(r)) in.fail("integer overflow (results are limited to 64 bits)");
  return r;
}

double python_mod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

Value repeat(Interpreter& in, const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    in.check_string(s.size() * static_cast<size_t>(n));
    std::string out;
    for (int64_t k = 0; k < n; ++k) out += s;
    return Value::string(std::move(out));
  }
  const List& l = seq.as_list();
  in.check_list(l.size() * static_cast<size_t>(n));
  List out;
  for (int64_t k = 0; k < n; ++k) out.insert(out.end(), l.begin(), l.end());
  return Value::list(std::move(out), seq.is_tuple());
}

// "%s" % value: printf-style formatting for %s, %d, %i, %r and %%.
Value percent_format(Interpreter& in, const std::string& fmt, const Value& args) {
  List values = args.is_tuple() ? args.as_list() : List{args};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) in.fail("incomplete format");
    char c = fmt[i];
    if (c == '%') {
      out += '%';
      continue;
    }
    if (next >= values.size()) in.fail("not enough arguments for format string");
    const Value& v = values[next++];
    if (c == 's') out += to_str(v);
    else if (c == 'r') out += repr(v);
    else if (c == 'd' || c == 'i') {
      if (!v.is_number()) in.fail("%d format: a real number is required, not " + v.type_name());
      out += std::to_string(v.is_float() ? static_cast<int64_t>(v.as_double()) : v.as_int());
    } else {
      in.fail(std::string("unsupported format character '") + c + "'");
    }
  }
  if (next < values.size()) in.fail("not all arguments converted during string formatting");
  return Value::string(std::move(out));
}

}  // namespace

Value Interpreter::eval_binary(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = to_str(a) + to_str(b);
    check_string(s.size());
    return Value::string(std::move(s));
  }
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  auto unsupported = [&]() -> Value {
    fail("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
  };
  if (a.is_number() && b.is_number()) {
    bool fl = a.is_float() || b.is_float();
    int64_t x = a.as_int(), y = b.as_int();
    double p = a.as_double(), q = b.as_double();
    if (op == "+") return fl ? Value::floating(p + q) : Value::integer(checked(*this, [&](int64_t& r) { return __builtin_add_overflow(x, y, &r); }));
    if (op == "-") return fl ? Value::floating(p - q) : Value::integer(checked(*this, [&](int64_t& r) { return __builtin_sub_overflow(x, y, &r); }));
    if (op == "*") return fl ? Value::floating(p * q) : Value::integer(checked(*this, [&](int64_t& r) { return __builtin_mul_overflow(x, y, &r); }));
    if (op == "/") {
      if (q == 0) fail("division by zero");
      return Value::floating(p / q);
    }
    if (op == "//" || op == "%") {
      if (q == 0) fail(op == "//" ? "integer division or modulo by zero" : "modulo by zero");
      if (fl) return Value::floating(op == "//" ? std::floor(p / q) : python_mod(p, q));
      if (x == INT64_MIN && y == -1) fail("integer overflow");
      int64_t d = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        --d;
        m += y;
      }
      return Value::integer(op == "//" ? d : m);
    }
    if (op == "**") {
      if (!fl && y >= 0) {
        int64_t result = 1;
        for (int64_t k = 0; k < y; ++k) {
          result = checked(*this, [&](int64_t& r) { return __builtin_mul_overflow(result, x, &r); });
          if (result == 0 || result == 1) break;
        }
        return Value::integer(result);
      }
      if (p == 0 && q < 0) fail("0.0 cannot be raised to a negative power");
      return Value::floating(std::pow(p, q));
    }
    return unsupported();
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      check_string(a.as_string().size() + b.as_string().size());
      return Value::string(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      List l = a.as_list();
      l.insert(l.end(), b.as_list().begin(), b.as_list().end());
      check_list(l.size());
      return Value::list(std::move(l), a.is_tuple());
    }
    if (a.is_string() || b.is_string())
      fail("can only concatenate str (not \"" + (a.is_string() ? b : a).type_name() + "\") to str",
           "use ~ to join values as text");
    return unsupported();
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(*this, a, b.as_int());
    if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(*this, b, a.as_int());
    return unsupported();
  }
  if (op == "%" && a.is_string()) return percent_format(*this, a.as_string(), b);
  return unsupported();
}

bool Interpreter::eval_compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return equal(a, b);
  if (op == "!=") return !equal(a, b);
  if (op == "in" || op == "not in") {
    Args none;
    Args with;
    with.positional.push_back(b);
    bool found = test("in", a, with);
    return op == "in" ? found : !found;
  }
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (op == "<") return less_than(*this, a, b);
  if (op == ">") return less_than(*this, b, a);
  if (op == "<=") return !less_than(*this, b, a);
  if (op == ">=") return !less_than(*this, a, b);
  fail("unknown comparison " + op);
}

Value Interpreter::call(const Value& fn, Args& args) {
  if (fn.is_undefined()) fail_undefined(fn);
  if (!fn.is_callable()) fail("'" + fn.type_name() + "' object is not callable");
  return fn.as_callable().call(*this, args);
}

}  // namespace grpo::text::jinja
