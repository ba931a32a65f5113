// The Jinja parser: see jinja_parse.h. The grammar and the precedence follow Jinja2's parser.py
// (condexpr < or < and < not < compare < + - < ~ < * / // % < ** < unary < postfix, filters and
// tests). Tokens come from jinja_lexer.cpp.
#include "core/text/jinja_parse.h"

#include "core/text/jinja_lexer.h"

#include <algorithm>
#include <charconv>

#include "core/common/error.h"
#include "core/text/unicode.h"

namespace grpo::text::jinja {
namespace {

class Parser {
public:
  Parser(std::vector<Token> tokens, const std::string& name, const Lines& lines, const Limits& limits)
      : t_(std::move(tokens)), name_(name), lines_(lines), limits_(limits) {}

  Program program() {
    Program p;
    p.body = body({}, "");
    return p;
  }

private:
  struct Guard {
    Parser& p;
    Guard(Parser& parser, size_t offset) : p(parser) {
      if (++p.depth_ > p.limits_.max_nesting)
        p.fail(offset, "nesting deeper than " + std::to_string(p.limits_.max_nesting) + " levels",
               "the limit on template nesting (Limits::max_nesting)");
    }
    ~Guard() { --p.depth_; }
  };

  [[noreturn]] void fail(size_t offset, const std::string& msg, const std::string& hint = {}) {
    throw Error(name_ + " " + lines_.at(offset).str(), msg, hint);
  }
  [[noreturn]] void expected(const std::string& what) {
    fail(cur().offset, "expected " + what + ", got " + describe(cur()));
  }

  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  Pos pos() const { return lines_.at(cur().offset); }
  bool is_op(const char* op) const { return cur().type == Tok::Op && cur().value == op; }
  bool is_name(const char* n) const { return cur().type == Tok::Name && cur().value == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    ++i_;
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    ++i_;
    return true;
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) expected(std::string("'") + op + "'");
  }
  std::string expect_name(const std::string& what = "a name") {
    if (cur().type != Tok::Name) expected(what);
    return t_[i_++].value;
  }
  void expect_block_end() {
    if (cur().type != Tok::BlockEnd) expected("'%}'");
    ++i_;
  }

  ExprPtr make(ExprKind k, Pos p) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->pos = p;
    return e;
  }

  // Sets a finished node's height; long operator chains (a+a+a+...) are deep trees too.
  ExprPtr seal(ExprPtr e) {
    int h = 0;
    for (const auto& x : e->items)
      if (x) h = std::max(h, x->height);
    for (const auto& a : e->args)
      if (a.value) h = std::max(h, a.value->height);
    e->height = h + 1;
    if (e->height > limits_.max_expression_height)
      fail(cur().offset, "expression nested deeper than " + std::to_string(limits_.max_expression_height) + " levels",
           "the limit on expression size (Limits::max_expression_height)");
    return e;
  }

  // ---- statements ----------------------------------------------------------------------

  // Nodes until `{% <one of ends> ...` (left unconsumed: the tag name is current) or the end.
  Body body(const std::vector<std::string>& ends, const std::string& opened) {
    Body out;
    for (;;) {
      const Token& t = cur();
      if (t.type == Tok::Eof) {
        if (!ends.empty()) fail(t.offset, "unexpected end of template: expected {% " + ends.front() + " %} to close " + opened);
        return out;
      }
      if (t.type == Tok::Data) {
        auto n = std::make_unique<Node>();
        n->kind = NodeKind::Text;
        n->pos = lines_.at(t.offset);
        n->text = t.value;
        out.push_back(std::move(n));
        ++i_;
      } else if (t.type == Tok::VarBegin) {
        auto n = std::make_unique<Node>();
        n->kind = NodeKind::Output;
        n->pos = lines_.at(t.offset);
        ++i_;
        n->exprs.push_back(tuple(true));
        if (cur().type != Tok::VarEnd) expected("'}}'");
        ++i_;
        out.push_back(std::move(n));
      } else if (t.type == Tok::BlockBegin) {
        const Token& tag = peek();
        if (tag.type == Tok::Name && std::find(ends.begin(), ends.end(), tag.value) != ends.end()) {
          ++i_;  // '{%'; the tag name stays current
          return out;
        }
        statement(out);
      } else {
        expected("template data or a tag");
      }
    }
  }

  void statement(Body& out) {
    size_t open = cur().offset;
    Guard g(*this, open);
    ++i_;  // {%
    if (cur().type != Tok::Name) expected("a tag name");
    std::string tag = t_[i_++].value;
    auto n = std::make_unique<Node>();
    n->pos = lines_.at(open);
    if (tag == "for") {
      for_stmt(*n);
    } else if (tag == "if") {
      if_stmt(*n);
    } else if (tag == "set") {
      set_stmt(*n);
    } else if (tag == "macro") {
      macro_stmt(*n);
    } else if (tag == "break" || tag == "continue") {
      n->kind = tag == "break" ? NodeKind::Break : NodeKind::Continue;
      expect_block_end();
    } else if (tag == "filter") {
      n->kind = NodeKind::FilterBlock;
      filter_chain(*n);
      expect_block_end();
      n->bodies.push_back(body({"endfilter"}, "{% filter %} at " + n->pos.str()));
      end_tag("endfilter");
    } else if (tag == "generation") {  // transformers' AssistantTracker extension: renders its body
      n->kind = NodeKind::FilterBlock;
      expect_block_end();
      n->bodies.push_back(body({"endgeneration"}, "{% generation %} at " + n->pos.str()));
      end_tag("endgeneration");
    } else if (tag == "call" || tag == "include" || tag == "import" || tag == "from" || tag == "extends" ||
               tag == "block" || tag == "raw" || tag == "with" || tag == "autoescape") {
      fail(open, "the tag '" + tag + "' is not supported in chat templates",
           "supported tags: for, if/elif/else, set, macro, filter, break, continue, generation");
    } else {
      fail(open, "unknown tag '" + tag + "'",
           "supported tags: for, if/elif/else, set, macro, filter, break, continue, generation");
    }
    out.push_back(std::move(n));
  }

  void end_tag(const char* name) {
    ++i_;  // the tag name (body() stopped on it)
    (void)name;
    expect_block_end();
  }

  void for_stmt(Node& n) {
    n.kind = NodeKind::For;
    bool paren = skip_op("(");
    do {
      n.targets.push_back(expect_name("a loop variable name"));
    } while (skip_op(","));
    if (paren) expect_op(")");
    if (!skip_name("in")) expected("'in'");
    n.exprs.push_back(tuple(false, {"if", "recursive"}));
    if (skip_name("if")) n.exprs.push_back(expression(true));
    else n.exprs.push_back(nullptr);
    if (is_name("recursive")) fail(cur().offset, "recursive loops are not supported");
    expect_block_end();
    const std::string opened = "{% for %} at " + n.pos.str();
    n.bodies.push_back(body({"endfor", "else"}, opened));
    if (cur().value == "else") {
      ++i_;
      expect_block_end();
      n.bodies.push_back(body({"endfor"}, opened));
    } else {
      n.bodies.emplace_back();
    }
    end_tag("endfor");
  }

  void if_stmt(Node& n) {
    n.kind = NodeKind::If;
    const std::string opened = "{% if %} at " + n.pos.str();
    n.exprs.push_back(tuple(false));
    expect_block_end();
    for (;;) {
      n.bodies.push_back(body({"endif", "elif", "else"}, opened));
      std::string tag = t_[i_++].value;
      if (tag == "elif") {
        n.exprs.push_back(tuple(false));
        expect_block_end();
      } else if (tag == "else") {
        expect_block_end();
        n.bodies.push_back(body({"endif"}, opened));
        end_tag("endif");
        return;
      } else {
        expect_block_end();
        return;
      }
    }
  }

  void set_stmt(Node& n) {
    n.kind = NodeKind::Set;
    std::string first = expect_name("a variable name");
    if (skip_op(".")) {  // {% set ns.attr = value %}
      auto obj = make(ExprKind::Name, n.pos);
      obj->name = first;
      n.text = expect_name("an attribute name");
      expect_op("=");
      n.exprs.push_back(tuple(true));
      n.exprs.push_back(std::move(obj));
      expect_block_end();
      return;
    }
    n.targets.push_back(first);
    while (skip_op(",")) n.targets.push_back(expect_name("a variable name"));
    if (skip_op("=")) {
      n.exprs.push_back(tuple(true));
      expect_block_end();
      return;
    }
    if (n.targets.size() != 1) expected("'='");
    n.kind = NodeKind::SetBlock;  // {% set x %}...{% endset %}, optionally {% set x | filter %}
    if (is_op("|")) filter_chain(n);
    expect_block_end();
    n.bodies.push_back(body({"endset"}, "{% set %} at " + n.pos.str()));
    end_tag("endset");
  }

  // `name(args) | name2 ...` of {% filter %} and {% set x | f %}: Filter exprs with no operand.
  void filter_chain(Node& n) {
    skip_op("|");
    do {
      auto f = make(ExprKind::Filter, pos());
      f->name = expect_name("a filter name");
      f->items.push_back(nullptr);
      if (is_op("(")) f->args = call_args();
      n.exprs.push_back(std::move(f));
    } while (skip_op("|"));
  }

  void macro_stmt(Node& n) {
    n.kind = NodeKind::Macro;
    n.text = expect_name("a macro name");
    expect_op("(");
    while (!is_op(")")) {
      if (!n.targets.empty()) expect_op(",");
      if (is_op(")")) break;
      n.targets.push_back(expect_name("a parameter name"));
      if (skip_op("=")) n.exprs.push_back(expression(true));
      else {
        if (!n.exprs.empty() && n.exprs.back()) fail(cur().offset, "non-default argument follows default argument");
        n.exprs.push_back(nullptr);
      }
    }
    expect_op(")");
    expect_block_end();
    n.bodies.push_back(body({"endmacro"}, "{% macro " + n.text + " %} at " + n.pos.str()));
    ++i_;
    if (cur().type == Tok::Name) ++i_;  // {% endmacro name %}
    expect_block_end();
  }

  // ---- expressions -----------------------------------------------------------------------

  bool tuple_end(const std::vector<std::string>& extra) const {
    if (cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || is_op(")")) return true;
    return cur().type == Tok::Name && std::find(extra.begin(), extra.end(), cur().value) != extra.end();
  }

  // Jinja's parse_tuple: `a`, or `a, b` (a tuple); explicit: inside parentheses.
  ExprPtr tuple(bool with_condexpr, const std::vector<std::string>& extra_end = {}, bool explicit_parens = false) {
    Pos p = pos();
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    for (;;) {
      if (!items.empty()) expect_op(",");
      if (tuple_end(extra_end)) break;
      items.push_back(expression(with_condexpr));
      if (is_op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) expected("an expression");
    }
    auto e = make(ExprKind::Tuple, p);
    e->items = std::move(items);
    return seal(std::move(e));
  }

  ExprPtr expression(bool with_condexpr) { return with_condexpr ? condexpr() : or_expr(); }

  ExprPtr condexpr() {
    Pos p = pos();
    ExprPtr e = or_expr();
    while (skip_name("if")) {
      auto c = make(ExprKind::Cond, p);
      ExprPtr test = or_expr();
      ExprPtr other = skip_name("else") ? condexpr() : nullptr;
      c->items.push_back(std::move(test));
      c->items.push_back(std::move(e));
      c->items.push_back(std::move(other));
      e = seal(std::move(c));
    }
    return e;
  }

  ExprPtr binary(ExprKind k, const std::string& op, ExprPtr a, ExprPtr b, Pos p) {
    auto e = make(k, p);
    e->name = op;
    e->items.push_back(std::move(a));
    e->items.push_back(std::move(b));
    return seal(std::move(e));
  }

  ExprPtr or_expr() {
    Pos p = pos();
    ExprPtr e = and_expr();
    while (skip_name("or")) e = binary(ExprKind::Or, "or", std::move(e), and_expr(), p);
    return e;
  }
  ExprPtr and_expr() {
    Pos p = pos();
    ExprPtr e = not_expr();
    while (skip_name("and")) e = binary(ExprKind::And, "and", std::move(e), not_expr(), p);
    return e;
  }
  ExprPtr not_expr() {
    if (is_name("not")) {
      Guard g(*this, cur().offset);
      auto e = make(ExprKind::Not, pos());
      ++i_;
      e->items.push_back(not_expr());
      return seal(std::move(e));
    }
    return compare();
  }
  ExprPtr compare() {
    Pos p = pos();
    ExprPtr first = math1();
    std::vector<std::string> ops;
    std::vector<ExprPtr> items;
    for (;;) {
      std::string op;
      if (cur().type == Tok::Op && (cur().value == "==" || cur().value == "!=" || cur().value == "<" ||
                                    cur().value == "<=" || cur().value == ">" || cur().value == ">=")) {
        op = cur().value;
        ++i_;
      } else if (is_name("in")) {
        op = "in";
        ++i_;
      } else if (is_name("not") && peek().type == Tok::Name && peek().value == "in") {
        op = "not in";
        i_ += 2;
      } else {
        break;
      }
      ops.push_back(op);
      items.push_back(math1());
    }
    if (ops.empty()) return first;
    auto e = make(ExprKind::Compare, p);
    e->items.push_back(std::move(first));
    for (auto& x : items) e->items.push_back(std::move(x));
    e->ops = std::move(ops);
    return seal(std::move(e));
  }
  ExprPtr math1() {
    Pos p = pos();
    ExprPtr e = concat();
    while (is_op("+") || is_op("-")) {
      std::string op = t_[i_++].value;
      e = binary(ExprKind::Binary, op, std::move(e), concat(), p);
    }
    return e;
  }
  ExprPtr concat() {
    Pos p = pos();
    ExprPtr e = math2();
    while (skip_op("~")) e = binary(ExprKind::Binary, "~", std::move(e), math2(), p);
    return e;
  }
  ExprPtr math2() {
    Pos p = pos();
    ExprPtr e = power();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = t_[i_++].value;
      e = binary(ExprKind::Binary, op, std::move(e), power(), p);
    }
    return e;
  }
  ExprPtr power() {
    Pos p = pos();
    ExprPtr e = unary(true);
    while (skip_op("**")) e = binary(ExprKind::Binary, "**", std::move(e), unary(true), p);
    return e;
  }
  ExprPtr unary(bool with_filter) {
    Guard g(*this, cur().offset);
    Pos p = pos();
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      e = make(is_op("-") ? ExprKind::Neg : ExprKind::Pos, p);
      ++i_;
      e->items.push_back(unary(false));
      e = seal(std::move(e));
    } else {
      e = primary();
    }
    e = postfix(std::move(e));
    if (with_filter) e = filter_expr(std::move(e));
    return e;
  }

  ExprPtr primary() {
    const Token& t = cur();
    Pos p = pos();
    if (t.type == Tok::Name) {
      ++i_;
      if (t.value == "true" || t.value == "True" || t.value == "false" || t.value == "False") {
        auto e = make(ExprKind::Const, p);
        e->constant = Value::boolean(t.value[0] == 't' || t.value[0] == 'T');
        return e;
      }
      if (t.value == "none" || t.value == "None") {
        auto e = make(ExprKind::Const, p);
        e->constant = Value::none();
        return e;
      }
      auto e = make(ExprKind::Name, p);
      e->name = t.value;
      return e;
    }
    if (t.type == Tok::String) {
      std::string s;
      while (cur().type == Tok::String) s += t_[i_++].value;
      auto e = make(ExprKind::Const, p);
      e->constant = Value::string(std::move(s));
      return e;
    }
    if (t.type == Tok::Int || t.type == Tok::Float) {
      ++i_;
      auto e = make(ExprKind::Const, p);
      e->constant = t.type == Tok::Int ? Value::integer(t.ival) : Value::floating(t.fval);
      return e;
    }
    if (skip_op("(")) {
      ExprPtr e = tuple(true, {}, true);
      expect_op(")");
      return e;
    }
    if (skip_op("[")) {
      auto e = make(ExprKind::List, p);
      while (!is_op("]")) {
        if (!e->items.empty()) expect_op(",");
        if (is_op("]")) break;
        e->items.push_back(expression(true));
      }
      expect_op("]");
      return seal(std::move(e));
    }
    if (skip_op("{")) {
      auto e = make(ExprKind::Dict, p);
      while (!is_op("}")) {
        if (!e->items.empty()) expect_op(",");
        if (is_op("}")) break;
        e->items.push_back(expression(true));
        expect_op(":");
        e->items.push_back(expression(true));
      }
      expect_op("}");
      return seal(std::move(e));
    }
    expected("an expression");
  }

  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      Pos p = e->pos;  // errors point at the start of the whole expression
      if (skip_op(".")) {
        if (cur().type == Tok::Int) {
          auto g = make(ExprKind::Getitem, p);
          auto k = make(ExprKind::Const, p);
          k->constant = Value::integer(t_[i_++].ival);
          g->items.push_back(std::move(e));
          g->items.push_back(std::move(k));
          e = seal(std::move(g));
        } else {
          auto g = make(ExprKind::Getattr, p);
          g->name = expect_name("an attribute name");
          g->items.push_back(std::move(e));
          e = seal(std::move(g));
        }
      } else if (skip_op("[")) {
        std::vector<ExprPtr> subs;
        while (!is_op("]")) {
          if (!subs.empty()) expect_op(",");
          if (is_op("]")) break;
          subs.push_back(subscribed());
        }
        expect_op("]");
        if (subs.empty()) fail(cur().offset, "expected a subscript");
        auto g = make(ExprKind::Getitem, p);
        g->items.push_back(std::move(e));
        if (subs.size() == 1) {
          g->items.push_back(std::move(subs[0]));
        } else {
          auto tup = make(ExprKind::Tuple, p);
          tup->items = std::move(subs);
          g->items.push_back(seal(std::move(tup)));
        }
        e = seal(std::move(g));
      } else if (is_op("(")) {
        auto c = make(ExprKind::Call, p);
        c->args = call_args();
        c->items.push_back(std::move(e));
        e = seal(std::move(c));
      } else {
        return e;
      }
    }
  }

  ExprPtr subscribed() {
    Pos p = pos();
    ExprPtr start;
    if (!is_op(":")) {
      start = expression(true);
      if (!is_op(":")) return start;
    }
    ++i_;  // ':'
    auto s = make(ExprKind::Slice, p);
    s->items.push_back(std::move(start));
    s->items.push_back(is_op("]") || is_op(",") || is_op(":") ? nullptr : expression(true));
    if (skip_op(":")) s->items.push_back(is_op("]") || is_op(",") ? nullptr : expression(true));
    else s->items.push_back(nullptr);
    return seal(std::move(s));
  }

  std::vector<Arg> call_args() {
    expect_op("(");
    std::vector<Arg> args;
    bool keyword = false;
    while (!is_op(")")) {
      if (!args.empty()) expect_op(",");
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) fail(cur().offset, "argument unpacking (*args, **kwargs) is not supported");
      Arg a;
      if (cur().type == Tok::Name && peek().type == Tok::Op && peek().value == "=") {
        a.name = t_[i_].value;
        i_ += 2;
        keyword = true;
      } else if (keyword) {
        fail(cur().offset, "positional argument follows keyword argument");
      }
      a.value = expression(true);
      args.push_back(std::move(a));
    }
    expect_op(")");
    return args;
  }

  ExprPtr filter_expr(ExprPtr e) {
    for (;;) {
      Pos p = pos();
      if (skip_op("|")) {
        auto f = make(ExprKind::Filter, p);
        f->name = expect_name("a filter name");
        while (skip_op(".")) f->name += "." + expect_name("a filter name");
        if (is_op("(")) f->args = call_args();
        f->items.push_back(std::move(e));
        e = seal(std::move(f));
      } else if (skip_name("is")) {
        bool negated = skip_name("not");
        auto t = make(ExprKind::Test, p);
        t->name = expect_name("a test name");
        while (skip_op(".")) t->name += "." + expect_name("a test name");
        if (is_op("(")) {
          t->args = call_args();
        } else if ((cur().type == Tok::Name || cur().type == Tok::String || cur().type == Tok::Int ||
                    cur().type == Tok::Float || is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
          if (is_name("is")) fail(cur().offset, "you cannot chain multiple tests with is");
          Arg a;
          a.value = postfix(primary());
          t->args.push_back(std::move(a));
        }
        t->items.push_back(std::move(e));
        e = seal(std::move(t));
        if (negated) {
          auto n = make(ExprKind::Not, p);
          n->items.push_back(std::move(e));
          e = seal(std::move(n));
        }
      } else if (is_op("(")) {
        auto c = make(ExprKind::Call, p);
        c->args = call_args();
        c->items.push_back(std::move(e));
        e = seal(std::move(c));
      } else {
        return e;
      }
    }
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  const std::string& name_;
  const Lines& lines_;
  const Limits& limits_;
};

}  // namespace

Program parse(const std::string& source, const std::string& name, const Limits& limits) {
  if (source.size() > limits.max_template_bytes) {
    throw Error(name, "template of " + std::to_string(source.size()) + " bytes exceeds the limit of " +
                          std::to_string(limits.max_template_bytes) + " bytes");
  }
  if (size_t bad = find_invalid_utf8(source); bad != std::string::npos) {
    throw Error(name, "template is not valid UTF-8 (byte " + std::to_string(bad) + ")");
  }
  // Jinja2 normalizes newlines to \n and drops one trailing newline (keep_trailing_newline=False).
  std::string src;
  src.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      src += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      src += source[i];
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();
  Lines lines(src);
  Parser parser(tokenize(src, name, lines), name, lines, limits);
  return parser.program();
}

}  // namespace grpo::text::jinja
