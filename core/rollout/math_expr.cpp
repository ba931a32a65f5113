// Math-answer parser, evaluator and comparator (see math_expr.h).
#include "core/rollout/math_expr.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

namespace grpo::rollout::math {

namespace {

using Kind = Num::Kind;
using VKind = Value::Kind;

constexpr int kMaxDepth = 256;        // parser recursion (about 10 frames per nesting level)
constexpr int kMaxSteps = 200000;     // parser calls per input
constexpr size_t kMaxItems = 64;      // elements of a list, set, tuple or matrix
constexpr int kMaxPlusMinus = 4;      // \pm signs expanded (2^4 variants)
constexpr int64_t kBig = int64_t(1) << 62;

// ---------------------------------------------------------------------------------------------
// Numbers

Num real(double d, Kind kind = Kind::Real) {
  Num n;
  n.kind = kind;
  n.exact = false;
  n.d = d;
  return n;
}

// p/q reduced, or an inexact Rational when it does not fit in 62 bits.
Num rational(__int128 p, __int128 q) {
  if (q < 0) {
    p = -p;
    q = -q;
  }
  __int128 a = p < 0 ? -p : p, b = q;
  while (b) {
    __int128 t = a % b;
    a = b;
    b = t;
  }
  if (a > 1) {
    p /= a;
    q /= a;
  }
  Num n;
  n.kind = Kind::Rational;
  if (p > kBig || p < -kBig || q > kBig) {
    n.exact = false;
    n.d = static_cast<double>(static_cast<long double>(p) / static_cast<long double>(q));
    return n;
  }
  n.exact = true;
  n.p = static_cast<int64_t>(p);
  n.q = static_cast<int64_t>(q);
  n.d = static_cast<double>(n.p) / static_cast<double>(n.q);
  return n;
}

Num integer(int64_t v) { return rational(v, 1); }

Kind join(Kind a, Kind b) { return std::max(a, b); }
bool is_rat(const Num& n) { return n.kind == Kind::Rational && n.exact; }
bool is_int(const Num& n) { return is_rat(n) && n.q == 1; }

std::optional<Num> checked(Num n) {
  if (!std::isfinite(n.d)) return std::nullopt;
  return n;
}

std::optional<Num> add(const Num& a, const Num& b) {
  if (is_rat(a) && is_rat(b)) return rational(__int128(a.p) * b.q + __int128(b.p) * a.q, __int128(a.q) * b.q);
  Num r = real(a.d + b.d, join(a.kind, b.kind));
  return checked(r);
}
Num neg(const Num& a) {
  Num r = a;
  r.p = -a.p;
  r.d = -a.d;
  return r;
}
std::optional<Num> mul(const Num& a, const Num& b) {
  if (is_rat(a) && is_rat(b)) return rational(__int128(a.p) * b.p, __int128(a.q) * b.q);
  return checked(real(a.d * b.d, join(a.kind, b.kind)));
}
std::optional<Num> div(const Num& a, const Num& b) {
  if (b.d == 0.0) return std::nullopt;
  if (is_rat(a) && is_rat(b)) return rational(__int128(a.p) * b.q, __int128(a.q) * b.p);
  return checked(real(a.d / b.d, join(a.kind, b.kind)));
}

// Exact integer k-th root of v >= 0, if v is a perfect k-th power.
std::optional<int64_t> exact_root(int64_t v, int k) {
  if (v < 0) return std::nullopt;
  if (v < 2) return v;
  auto r = static_cast<int64_t>(std::llround(std::pow(static_cast<double>(v), 1.0 / k)));
  for (int64_t c = std::max<int64_t>(0, r - 1); c <= r + 1; ++c) {
    __int128 acc = 1;
    bool over = false;
    for (int i = 0; i < k && !over; ++i) {
      acc *= c;
      if (acc > kBig) over = true;
    }
    if (!over && acc == v) return c;
  }
  return std::nullopt;
}

std::optional<Num> power(const Num& base, const Num& ex) {
  if (is_int(ex)) {
    int64_t n = ex.p;
    if (is_rat(base)) {
      if (base.p == 0) {
        if (n < 0) return std::nullopt;
        return integer(n == 0 ? 1 : 0);
      }
      if (base.p == base.q) return integer(1);
      if (base.p == -base.q) return integer(n % 2 == 0 ? 1 : -1);
      if (n >= -64 && n <= 64) {
        int64_t m = n < 0 ? -n : n;
        Num acc = integer(1);
        for (int64_t i = 0; i < m; ++i) {
          auto next = mul(acc, base);
          if (!next) return std::nullopt;
          acc = *next;
          if (!acc.exact) break;
        }
        if (acc.exact) return n < 0 ? div(integer(1), acc) : std::optional<Num>(acc);
      }
    }
    if (std::fabs(static_cast<double>(n)) > 1e6 && std::fabs(base.d) > 1.0) return std::nullopt;
    return checked(real(std::pow(base.d, static_cast<double>(n)), base.kind == Kind::Rational ? Kind::Rational : base.kind));
  }
  if (is_rat(ex) && is_rat(base) && ex.q <= 16 && ex.p >= -64 && ex.p <= 64) {
    if (base.p >= 0) {
      auto rp = exact_root(base.p, static_cast<int>(ex.q));
      auto rq = exact_root(base.q, static_cast<int>(ex.q));
      if (rp && rq) return power(rational(*rp, *rq), integer(ex.p));
    } else if (ex.q % 2 == 1) {  // odd root of a negative number: the real root
      auto pos = power(neg(base), ex);
      if (!pos) return std::nullopt;
      return ex.p % 2 == 0 ? pos : std::optional<Num>(neg(*pos));
    }
  }
  if (base.d < 0.0) return std::nullopt;  // complex
  if (std::fabs(ex.d) > 1e6 && base.d > 1.0) return std::nullopt;
  Kind k = join(base.kind, ex.kind);
  if (k == Kind::Rational) k = Kind::Real;  // 2^{1/2}: irrational
  return checked(real(std::pow(base.d, ex.d), k));
}

// ---------------------------------------------------------------------------------------------
// Nodes

NodePtr mk(Op op, std::vector<NodePtr> kids = {}) {
  auto n = std::make_shared<Node>();
  n->op = op;
  n->kids = std::move(kids);
  return n;
}
NodePtr mk_num(Num v) {
  auto n = std::make_shared<Node>();
  n->op = Op::Num;
  n->num = v;
  return n;
}
NodePtr mk_sym(std::string name, bool text = false) {
  auto n = std::make_shared<Node>();
  n->op = Op::Sym;
  n->name = std::move(name);
  n->text = text;
  return n;
}
NodePtr mk_func(std::string name, std::vector<NodePtr> kids) {
  auto n = std::make_shared<Node>();
  n->op = Op::Func;
  n->name = std::move(name);
  n->kids = std::move(kids);
  return n;
}
NodePtr mk_div(NodePtr a, NodePtr b, bool frac = false) {
  auto n = std::make_shared<Node>();
  n->op = Op::Div;
  n->kids = {std::move(a), std::move(b)};
  if (frac) n->name = "frac";
  return n;
}

Value expr_value(NodePtr e) {
  Value v;
  v.kind = VKind::Expr;
  v.expr = std::move(e);
  return v;
}
Value list_value(VKind kind, std::vector<Value> items) {
  Value v;
  v.kind = kind;
  v.items = std::move(items);
  return v;
}
Value relation(Rel rel, Value lhs, Value rhs) {
  Value v;
  v.kind = VKind::Relation;
  v.rel = rel;
  v.items = {std::move(lhs), std::move(rhs)};
  return v;
}
Value interval(Value a, Value b, bool left_open, bool right_open) {
  Value v = list_value(VKind::Interval, {std::move(a), std::move(b)});
  v.left_open = left_open;
  v.right_open = right_open;
  return v;
}

bool has_pm(const Node& n) {
  if (n.op == Op::Func && n.name == "pm") return true;
  for (const auto& k : n.kids)
    if (has_pm(*k)) return true;
  return false;
}
int count_pm(const Node& n) {
  int c = n.op == Op::Func && n.name == "pm" ? 1 : 0;
  for (const auto& k : n.kids) c += count_pm(*k);
  return c;
}
// `n` with its \pm signs chosen by the bits of `signs` (consumed in tree order).
NodePtr choose_pm(const NodePtr& n, unsigned signs, int& index) {
  if (n->op == Op::Func && n->name == "pm") {
    bool minus = (signs >> index++) & 1u;
    NodePtr a = choose_pm(n->kids[0], signs, index), b = choose_pm(n->kids[1], signs, index);
    return mk(Op::Add, {a, minus ? mk(Op::Neg, {b}) : b});
  }
  if (n->kids.empty()) return n;
  auto copy = std::make_shared<Node>(*n);
  for (auto& k : copy->kids) k = choose_pm(k, signs, index);
  return copy;
}
// A parse that gives up: the text is not an answer this reader understands (or is too large).
struct ParseFail {};

// "1 \pm \sqrt{5}" -> both variants; anything else -> itself. More than kMaxPlusMinus signs is not
// an answer: 2^k variants (and a shift past 31 bits).
std::vector<Value> expand_pm(const Value& v) {
  if (v.kind != VKind::Expr || !has_pm(*v.expr)) return {v};
  const int k = count_pm(*v.expr);
  if (k > kMaxPlusMinus) throw ParseFail{};
  std::vector<Value> out;
  for (unsigned s = 0; s < (1u << k); ++s) {
    int index = 0;
    out.push_back(expr_value(choose_pm(v.expr, s, index)));
  }
  return out;
}
Value pm_to_set(Value v) {
  if (v.kind != VKind::Expr || !has_pm(*v.expr)) return v;
  return list_value(VKind::Set, expand_pm(v));
}

// ---------------------------------------------------------------------------------------------
// Parser


bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

const char* const kGreek[] = {"alpha",  "beta",    "gamma",  "delta", "epsilon", "varepsilon", "zeta",   "eta",
                              "theta",  "vartheta", "iota",  "kappa", "lambda",  "mu",         "nu",     "xi",
                              "rho",    "varrho",  "sigma",  "varsigma", "tau",  "upsilon",    "phi",    "varphi",
                              "chi",    "psi",     "omega",  "Gamma", "Delta",   "Theta",      "Lambda", "Xi",
                              "Sigma",  "Upsilon", "Phi",    "Psi",   "Omega",   "Pi",         "ell"};
const char* const kFunctions[] = {"sin",  "cos",  "tan",  "sec",    "csc",    "cot",    "arcsin", "arccos",
                                  "arctan", "arcsec", "arccsc", "arccot", "sinh", "cosh", "tanh", "coth",
                                  "ln",   "log",  "lg",   "exp"};
const char* const kTextCmds[] = {"text",    "textbf", "textit",  "textrm", "textnormal", "textsf", "texttt",
                                 "mathrm",  "mathbf", "mathit",  "mathsf", "mathtt",     "mbox",   "boldsymbol",
                                 "bm",      "mathcal", "mathbb", "mathscr", "mathfrak",  "operatorname", "hbox"};
// Commands that only space or size things: skipped like whitespace.
const char* const kSkipCmds[] = {"quad",   "qquad",  "enspace", "thinspace", "medspace", "thickspace", "negthinspace",
                                 "displaystyle", "textstyle", "scriptstyle", "limits", "nolimits", "left", "right",
                                 "mleft",  "mright", "big", "Big", "bigg", "Bigg", "bigl", "bigr", "Bigl", "Bigr",
                                 "biggl",  "biggr",  "Biggl", "Biggr", "bigm", "Bigm", "hfill", "hspace*"};

template <size_t N>
bool in_list(std::string_view name, const char* const (&list)[N]) {
  for (const char* s : list)
    if (name == s) return true;
  return false;
}

class Parser {
public:
  Parser(std::string_view s, Syntax syntax) : s_(s), syn_(syntax) {}

  Value parse_all() {
    skip_ws();
    if (at_end()) fail();
    Value v = parse_list();
    skip_ws();
    if (!at_end()) fail();
    return v;
  }

private:
  std::string_view s_;
  size_t i_ = 0;
  Syntax syn_;
  int depth_ = 0;
  int steps_ = 0;
  int abs_depth_ = 0;

  [[noreturn]] static void fail() { throw ParseFail{}; }

  struct Guard {
    Parser& p;
    explicit Guard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxDepth || ++p.steps_ > kMaxSteps) fail();
    }
    ~Guard() { --p.depth_; }
  };

  bool at_end() const { return i_ >= s_.size(); }
  char cur() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  char at(size_t k) const { return k < s_.size() ? s_[k] : '\0'; }
  bool looking_at(std::string_view lit) const { return s_.substr(i_, lit.size()) == lit; }

  // The command name at i_ (after the backslash): letters, or one other character.
  std::string_view cmd_at(size_t k) const {
    if (at(k) != '\\') return {};
    size_t j = k + 1;
    if (j >= s_.size()) return {};
    if (!is_alpha(s_[j])) return s_.substr(j, 1);
    size_t e = j;
    while (e < s_.size() && is_alpha(s_[e])) ++e;
    return s_.substr(j, e - j);
  }

  void skip_ws() {
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '~') {
        ++i_;
        continue;
      }
      if (c != '\\') return;
      std::string_view name = cmd_at(i_);
      if (name == "," || name == ";" || name == ":" || name == "!" || name == " " || name == "$") {
        i_ += 2;
        continue;
      }
      if (!name.empty() && is_alpha(name[0]) && !in_list(name, kSkipCmds)) {
        // "\quadx" lexes as \quad x in latex2sympy
        bool quad = false;
        for (std::string_view q : {"qquad", "quad"}) {
          if (name.size() > q.size() && name.substr(0, q.size()) == q) {
            i_ += 1 + q.size();
            quad = true;
            break;
          }
        }
        if (quad) continue;
      }
      if (name.empty() || !is_alpha(name[0]) || !in_list(name, kSkipCmds)) return;
      i_ += 1 + name.size();
      if ((name == "left" || name == "right" || name == "mleft" || name == "mright") && cur() == '.') ++i_;
    }
  }

  // Consumes `lit` (after whitespace) if present; a command literal must not run into letters.
  bool eat(std::string_view lit) {
    skip_ws();
    if (!looking_at(lit)) return false;
    if (lit.size() > 1 && lit[0] == '\\' && is_alpha(lit.back()) && is_alpha(at(i_ + lit.size()))) return false;
    i_ += lit.size();
    return true;
  }
  bool eat_cmd(std::string_view name) {
    skip_ws();
    if (cmd_at(i_) != name) return false;
    i_ += 1 + name.size();
    return true;
  }
  void expect(std::string_view lit) {
    if (!eat(lit)) fail();
  }

  // ---- lists, sets, relations ----

  // Items separated by ',' or ';'. Top-level rules of latex2sympy: one item is itself;
  // "x = 1, 2" assigns the set; ';' groups make tuples.
  Value parse_list() {
    Guard g(*this);
    std::vector<std::vector<Value>> groups(1);
    while (true) {
      groups.back().push_back(parse_set_expr());
      if (groups.size() * groups.back().size() > kMaxItems) fail();
      skip_ws();
      if (eat(",")) continue;
      if (eat(";")) {
        groups.emplace_back();
        continue;
      }
      break;
    }
    if (groups.size() == 1) {
      auto& items = groups[0];
      if (items.size() == 1) return pm_to_set(std::move(items[0]));
      const Value& first = items[0];
      bool rest_plain = std::all_of(items.begin() + 1, items.end(), [](const Value& v) {
        return v.kind != VKind::Relation && v.kind != VKind::And;
      });
      if (first.kind == VKind::Relation && first.rel == Rel::Eq && rest_plain && only_symbols(first.items[0])) {
        std::vector<Value> rhs = expand_pm(first.items[1]);
        for (size_t k = 1; k < items.size(); ++k)
          for (auto& e : expand_pm(items[k])) rhs.push_back(std::move(e));
        return relation(Rel::Eq, first.items[0], list_value(VKind::Set, std::move(rhs)));
      }
      return list_value(VKind::Set, flatten(std::move(items)));
    }
    bool singles = std::all_of(groups.begin(), groups.end(), [](const auto& g) { return g.size() == 1; });
    std::vector<Value> out;
    for (auto& grp : groups) {
      if (grp.empty()) fail();
      if (singles) {
        for (auto& e : expand_pm(grp[0])) out.push_back(std::move(e));
      } else {
        out.push_back(list_value(VKind::Tuple, std::move(grp)));
      }
    }
    return list_value(VKind::Set, std::move(out));
  }

  static std::vector<Value> flatten(std::vector<Value> items) {
    std::vector<Value> out;
    for (auto& v : items)
      for (auto& e : expand_pm(v)) out.push_back(std::move(e));
    return out;
  }

  Value parse_set_expr() {
    Guard g(*this);
    Value v = parse_relation();
    while (eat_cmd("cup") || eat("∪")) {
      Value w = parse_relation();
      v = make_union(std::move(v), std::move(w));
    }
    skip_ws();
    std::string_view c = cmd_at(i_);
    if (c == "cap" || c == "setminus" || c == "times" || looking_at("∩")) fail();
    return v;
  }

  static Value make_union(Value a, Value b) {
    std::vector<Value> parts;
    for (Value* v : {&a, &b}) {
      if (v->kind == VKind::Union) {
        for (auto& x : v->items) parts.push_back(std::move(x));
      } else if (v->kind == VKind::Interval || v->kind == VKind::Set) {
        parts.push_back(std::move(*v));
      } else if (v->kind == VKind::Tuple) {
        parts.push_back(list_value(VKind::Set, std::move(v->items)));
      } else {
        fail();
      }
    }
    return list_value(VKind::Union, std::move(parts));
  }

  enum class RelTok { None, Eq, Ne, Lt, Le, Gt, Ge, Approx, In };

  RelTok read_rel() {
    skip_ws();
    struct Lit {
      const char* text;
      RelTok tok;
    };
    static const Lit lits[] = {{"<=", RelTok::Le},     {">=", RelTok::Ge},       {"!=", RelTok::Ne},
                               {"==", RelTok::Eq},     {"≤", RelTok::Le},       {"≥", RelTok::Ge},
                               {"≠", RelTok::Ne},      {"≈", RelTok::Approx},   {"∈", RelTok::In},
                               {"<", RelTok::Lt},      {">", RelTok::Gt},       {"=", RelTok::Eq}};
    for (const auto& l : lits) {
      if (looking_at(l.text)) {
        i_ += std::strlen(l.text);
        return l.tok;
      }
    }
    std::string_view c = cmd_at(i_);
    RelTok t = RelTok::None;
    if (c == "le" || c == "leq" || c == "leqslant") t = RelTok::Le;
    else if (c == "ge" || c == "geq" || c == "geqslant") t = RelTok::Ge;
    else if (c == "lt") t = RelTok::Lt;
    else if (c == "gt") t = RelTok::Gt;
    else if (c == "ne" || c == "neq") t = RelTok::Ne;
    else if (c == "equiv") t = RelTok::Eq;
    else if (c == "approx" || c == "simeq" || c == "sim") t = RelTok::Approx;
    else if (c == "in") t = RelTok::In;
    else if (c == "notin" || c == "subset" || c == "subseteq" || c == "to" || c == "rightarrow" ||
             c == "Rightarrow" || c == "implies" || c == "iff" || c == "mid" || c == "perp" || c == "parallel")
      fail();
    if (t != RelTok::None) i_ += 1 + c.size();
    return t;
  }

  Value parse_relation() {
    Guard g(*this);
    Value cur = parse_additive();
    while (true) {
      size_t save = i_;
      RelTok t = read_rel();
      if (t == RelTok::None) {
        i_ = save;
        break;
      }
      Value rhs = pm_to_set(parse_additive());
      if (t == RelTok::In)  // x \in A \cup B
        while (eat_cmd("cup") || eat("∪")) rhs = make_union(std::move(rhs), parse_additive());
      if (t == RelTok::Approx) {  // x \approx 3 -> 3; 1/3 \approx 0.33 -> 1/3
        if (only_symbols(cur)) cur = std::move(rhs);
        continue;
      }
      Rel r = t == RelTok::Ne   ? Rel::Ne
              : t == RelTok::Lt ? Rel::Lt
              : t == RelTok::Le ? Rel::Le
              : t == RelTok::Gt ? Rel::Gt
              : t == RelTok::Ge ? Rel::Ge
                                : Rel::Eq;  // =, \equiv, \in (read as equality, as latex2sympy does)
      if (cur.kind == VKind::And) {
        Value prev = cur.items.back().items[1];
        cur.items.push_back(relation(r, std::move(prev), std::move(rhs)));
      } else if (cur.kind == VKind::Relation) {
        Value prev = cur.items[1];
        Value link = relation(r, std::move(prev), std::move(rhs));
        cur = list_value(VKind::And, {std::move(cur), std::move(link)});
      } else {
        cur = relation(r, pm_to_set(std::move(cur)), std::move(rhs));
      }
      if (cur.kind == VKind::And && cur.items.size() > kMaxItems) fail();
    }
    return cur;
  }

  // ---- arithmetic ----

  static NodePtr need_expr(const Value& v) {
    if (v.kind != VKind::Expr) fail();
    return v.expr;
  }

  // Matrix arithmetic, element by element ("A + B", "A B", "2A"); nothing when neither side is
  // a matrix.
  static std::optional<Value> matrix_op(char op, const Value& a, const Value& b) {
    bool am = a.kind == VKind::Matrix, bm = b.kind == VKind::Matrix;
    if (!am && !bm) return std::nullopt;
    Value out;
    out.kind = VKind::Matrix;
    if (op == '+' || op == '-') {
      if (!am || !bm || a.rows != b.rows || a.cols != b.cols) fail();
      out.rows = a.rows;
      out.cols = a.cols;
      for (size_t k = 0; k < a.items.size(); ++k) {
        NodePtr y = op == '+' ? b.items[k].expr : mk(Op::Neg, {b.items[k].expr});
        out.items.push_back(expr_value(mk(Op::Add, {a.items[k].expr, y})));
      }
      return out;
    }
    if (op != '*') fail();
    if (am && bm) {
      if (a.cols != b.rows || a.rows * b.cols > kMaxItems) fail();
      out.rows = a.rows;
      out.cols = b.cols;
      for (size_t r = 0; r < a.rows; ++r)
        for (size_t c = 0; c < b.cols; ++c) {
          std::vector<NodePtr> terms;
          for (size_t k = 0; k < a.cols; ++k)
            terms.push_back(mk(Op::Mul, {a.items[r * a.cols + k].expr, b.items[k * b.cols + c].expr}));
          out.items.push_back(expr_value(terms.size() == 1 ? terms[0] : mk(Op::Add, std::move(terms))));
        }
      return out;
    }
    const Value& m = am ? a : b;
    NodePtr k = need_expr(am ? b : a);
    out.rows = m.rows;
    out.cols = m.cols;
    for (const auto& e : m.items) out.items.push_back(expr_value(mk(Op::Mul, {k, e.expr})));
    return out;
  }

  // a op b, extending a's n-ary node when it is the chain being built (a + b + c is one Add).
  static NodePtr append(Op op, const NodePtr& a, const NodePtr& b, bool extend) {
    if (extend && a->op == op) {
      auto n = std::make_shared<Node>(*a);
      n->kids.push_back(b);
      return n;
    }
    return mk(op, {a, b});
  }

  Value parse_additive() {
    Guard g(*this);
    Value left = parse_term();
    bool sum_open = false;
    while (true) {
      skip_ws();
      if (at_end()) break;
      bool plus = false, minus = false, pm = false;
      if (cur() == '+') {
        plus = true;
        ++i_;
      } else if (cur() == '-' && at(i_ + 1) != '>') {
        minus = true;
        ++i_;
      } else if (looking_at("−")) {
        minus = true;
        i_ += std::strlen("−");
      } else if (looking_at("±")) {
        pm = true;
        i_ += std::strlen("±");
      } else if (looking_at("∓")) {
        pm = true;
        i_ += std::strlen("∓");
      } else if (cmd_at(i_) == "pm" || cmd_at(i_) == "mp") {
        pm = true;
        i_ += 3;
      } else {
        break;
      }
      Value right = parse_term();
      if (!pm)
        if (auto m = matrix_op(plus ? '+' : '-', left, right)) {
          left = std::move(*m);
          continue;
        }
      NodePtr a = need_expr(left), b = need_expr(right);
      if (pm) {
        left = expr_value(mk_func("pm", {a, b}));
      } else {
        NodePtr term = minus ? mk(Op::Neg, {b}) : b;
        left = expr_value(append(Op::Add, a, term, sum_open));
        sum_open = true;
      }
    }
    return left;
  }

  Value parse_term() {
    Guard g(*this);
    Value left = parse_unary();
    bool product_open = false;
    while (true) {
      skip_ws();
      if (at_end()) break;
      bool is_mul = false, is_div = false;
      std::string_view c = cmd_at(i_);
      if (cur() == '*' && at(i_ + 1) != '*') {
        is_mul = true;
        ++i_;
      } else if (c == "cdot" || c == "times" || c == "ast") {
        is_mul = true;
        i_ += 1 + c.size();
      } else if (looking_at("×") || looking_at("·") || looking_at("⋅")) {
        is_mul = true;
        i_ += looking_at("×") || looking_at("·") ? 2 : 3;
      } else if (cur() == '/') {
        is_div = true;
        ++i_;
      } else if (c == "div" || c == "over") {
        is_div = true;
        i_ += 1 + c.size();
      } else if (looking_at("÷")) {
        is_div = true;
        i_ += 2;
      } else if (cur() == ':' && syn_ == Syntax::Latex && at(i_ + 1) != '=') {
        is_div = true;
        ++i_;
      } else {
        break;
      }
      Value right = parse_unary();
      if (is_mul)
        if (auto m = matrix_op('*', left, right)) {
          left = std::move(*m);
          continue;
        }
      NodePtr a = need_expr(left), b = need_expr(right);
      left = expr_value(is_mul ? append(Op::Mul, a, b, product_open) : mk_div(a, b));
      product_open = is_mul;
      (void)is_div;
    }
    return left;
  }

  Value parse_unary() {
    Guard g(*this);
    skip_ws();
    if (cur() == '-' || looking_at("−")) {
      i_ += cur() == '-' ? 1 : std::strlen("−");
      return expr_value(mk(Op::Neg, {need_expr(parse_unary())}));
    }
    if (cur() == '+') {
      ++i_;
      return parse_unary();
    }
    if (cmd_at(i_) == "pm" || cmd_at(i_) == "mp" || looking_at("±")) {
      i_ += looking_at("±") ? 2 : 3;
      return expr_value(mk_func("pm", {mk_num(integer(0)), need_expr(parse_unary())}));
    }
    return parse_implicit();
  }

  // Juxtaposed factors ("2x", "2\sqrt{2}", "\pi r^2", "(x+1)(x-1)"); "2\frac{1}{2}" is a mixed
  // number (2 + 1/2), as latex2sympy reads it.
  Value parse_implicit() {
    Guard g(*this);
    Value v = parse_postfix();
    if (syn_ != Syntax::Latex) return v;
    bool first_is_int = v.kind == VKind::Expr && v.expr->op == Op::Num && is_int(v.expr->num) && v.expr->num.p >= 0;
    bool first = true;
    while (starts_primary()) {
      Value w = parse_postfix();
      if (auto m = matrix_op('*', v, w)) {
        v = std::move(*m);
        first = false;
        continue;
      }
      NodePtr a = need_expr(v), b = need_expr(w);
      if (first && first_is_int && is_int_frac(*b)) {
        v = expr_value(mk(Op::Add, {a, b}));
      } else {
        v = expr_value(append(Op::Mul, a, b, !first));
      }
      first = false;
    }
    return v;
  }

  static bool is_int_frac(const Node& n) {
    return n.op == Op::Div && n.name == "frac" && n.kids[0]->op == Op::Num && is_int(n.kids[0]->num) &&
           n.kids[1]->op == Op::Num && is_int(n.kids[1]->num);
  }

  bool starts_primary() {
    skip_ws();
    if (at_end()) return false;
    char c = cur();
    if (is_digit(c) || is_alpha(c) || c == '(' || c == '{') return true;
    if (c == '.' && is_digit(at(i_ + 1))) return true;
    if (c == '|') return abs_depth_ == 0;
    if (looking_at("π") || looking_at("√") || looking_at("∞")) return true;
    if (c != '\\') return false;
    std::string_view name = cmd_at(i_);
    if (name.empty()) return false;
    if (name == "{" || name == "(") return true;
    if (!is_alpha(name[0])) return false;
    static const char* const primaries[] = {"frac", "dfrac", "tfrac", "cfrac", "sqrt", "binom", "dbinom", "tbinom",
                                            "pi",   "infty", "boxed", "fbox",  "lfloor", "lceil", "lvert", "vert",
                                            "lbrace", "begin", "emptyset", "varnothing"};
    return in_list(name, primaries) || in_list(name, kGreek) || in_list(name, kFunctions) ||
           in_list(name, kTextCmds);
  }

  bool at_degree() {
    skip_ws();
    for (std::string_view d : {"^\\circ", "^{\\circ}", "^\\degree", "^{\\degree}", "^°", "^{°}", "°", "\\degree",
                               "\\circ"}) {
      if (looking_at(d) && !is_alpha(at(i_ + d.size()))) {
        i_ += d.size();
        return true;
      }
    }
    return false;
  }

  Value parse_postfix() {
    Guard g(*this);
    Value v = parse_power();
    while (true) {
      skip_ws();
      if (at_degree()) continue;  // convert_degrees=False: 90^\circ is 90
      if (cur() == '!' && at(i_ + 1) != '=') {
        ++i_;
        v = expr_value(mk_func("fact", {need_expr(v)}));
        continue;
      }
      if (cur() == '%') {
        ++i_;
        v = expr_value(mk(Op::Percent, {need_expr(v)}));
        continue;
      }
      if (cmd_at(i_) == "%") {
        i_ += 2;
        v = expr_value(mk(Op::Percent, {need_expr(v)}));
        continue;
      }
      break;
    }
    return v;
  }

  Value parse_power() {
    Guard g(*this);
    Value base = parse_primary();
    while (true) {
      skip_ws();
      size_t save = i_;
      if (at_degree()) {
        i_ = save;
        break;
      }
      bool caret = cur() == '^';
      bool stars = cur() == '*' && at(i_ + 1) == '*';
      if (!caret && !stars) break;
      i_ += caret ? 1 : 2;
      NodePtr ex = parse_exponent();
      base = expr_value(mk(Op::Pow, {need_expr(base), ex}));
      if (syn_ == Syntax::Plain) break;  // right-associative there: handled in parse_exponent
    }
    return base;
  }

  NodePtr parse_exponent() {
    Guard g(*this);
    skip_ws();
    if (syn_ == Syntax::Plain) {
      if (cur() == '-') {
        ++i_;
        return mk(Op::Neg, {parse_exponent()});
      }
      if (cur() == '+') {
        ++i_;
        return parse_exponent();
      }
      return need_expr(parse_power());
    }
    return parse_arg();
  }

  // A LaTeX argument: {group}, one digit, one letter, or one command (\pi, \frac{1}{2}).
  NodePtr parse_arg() {
    Guard g(*this);
    skip_ws();
    if (cur() == '{') {
      ++i_;
      Value v = parse_additive();
      expect("}");
      return need_expr(v);
    }
    if (cur() == '-' || looking_at("−")) {  // x^-1
      i_ += cur() == '-' ? 1 : std::strlen("−");
      return mk(Op::Neg, {parse_arg()});
    }
    if (is_digit(cur())) {
      Num n = integer(cur() - '0');
      ++i_;
      return mk_num(n);
    }
    if (is_alpha(cur())) {
      char c = cur();
      ++i_;
      if (c == 'e') return mk(Op::E);
      return mk_sym(std::string(1, c));
    }
    if (cur() == '\\') return need_expr(parse_primary());
    fail();
  }

  // ---- primaries ----

  Value parse_primary() {
    Guard g(*this);
    skip_ws();
    if (at_end()) fail();
    char c = cur();
    if (is_digit(c) || (c == '.' && is_digit(at(i_ + 1)))) return expr_value(parse_number());
    if (looking_at("...")) {
      i_ += 3;
      return expr_value(mk(Op::Ellipsis));
    }
    if (is_alpha(c)) return parse_letters();
    if (c == '(' || c == '[') return parse_bracket();
    if (c == '\\' && (at(i_ + 1) == '(' || at(i_ + 1) == '[')) {  // latex2sympy's visual \( \)
      ++i_;
      return parse_bracket();
    }
    if (c == '{') {
      ++i_;
      skip_ws();
      if (cur() == '}') fail();
      Value v = parse_list();
      expect("}");
      return v;
    }
    if (c == '|') {
      ++i_;
      ++abs_depth_;
      Value v = parse_additive();
      --abs_depth_;
      expect("|");
      return expr_value(mk_func("abs", {need_expr(v)}));
    }
    if (looking_at("π")) {
      i_ += std::strlen("π");
      return expr_value(mk(Op::Pi));
    }
    if (looking_at("∞")) {
      i_ += std::strlen("∞");
      return expr_value(mk(Op::Inf));
    }
    if (looking_at("√")) {
      i_ += std::strlen("√");
      return expr_value(mk_func("sqrt", {parse_arg()}));
    }
    if (c == '\\') return parse_command();
    fail();
  }

  NodePtr parse_number() {
    size_t start = i_;
    std::string digits;
    while (is_digit(cur())) digits += s_[i_++];
    // "1 000 000": thousands separated by single spaces.
    if (!digits.empty() && digits.size() <= 3 && digits[0] != '0') {
      while (cur() == ' ' && is_digit(at(i_ + 1)) && is_digit(at(i_ + 2)) && is_digit(at(i_ + 3)) &&
             !is_digit(at(i_ + 4)) && at(i_ + 4) != '/') {
        digits.append(s_.substr(i_ + 1, 3));
        i_ += 4;
      }
    }
    bool is_float = false;
    std::string frac;
    if (cur() == '.' && is_digit(at(i_ + 1))) {
      ++i_;
      is_float = true;
      while (is_digit(cur())) frac += s_[i_++];
    } else if (cur() == '.' && syn_ == Syntax::Plain && !digits.empty() && at(i_ + 1) != '.') {
      ++i_;  // Python's "3." float literal
      is_float = true;
    }
    std::string exponent;
    if ((cur() == 'e' || cur() == 'E') &&
        (is_digit(at(i_ + 1)) || ((at(i_ + 1) == '-' || at(i_ + 1) == '+') && is_digit(at(i_ + 2))))) {
      exponent += 'e';
      ++i_;
      if (cur() == '-' || cur() == '+') exponent += s_[i_++];
      while (is_digit(cur()) && exponent.size() < 8) exponent += s_[i_++];
      if (is_digit(cur())) fail();
      is_float = true;
    }
    if (cur() == '_' && !is_float) {  // 204_5: a number in another base, kept as an opaque name
      ++i_;
      std::string base;
      if (cur() == '{') {
        ++i_;
        while (is_digit(cur())) base += s_[i_++];
        expect("}");
      } else {
        while (is_digit(cur()) && base.empty()) base += s_[i_++];
      }
      if (base.empty()) fail();
      return mk_sym(digits + "_" + base);
    }
    if (digits.empty()) digits = "0";
    if (!is_float) {
      // A mixed number "4 4/9" (one space, integer fraction): 4 + 4/9 when the fraction is
      // proper, else meaningless.
      char before = start > 0 ? s_[start - 1] : ' ';
      if (syn_ == Syntax::Latex && before != '/' && before != '.' && before != '^' && cur() == ' ' &&
          is_digit(at(i_ + 1))) {
        size_t j = i_ + 1;
        std::string a, b;
        while (is_digit(at(j))) a += s_[j++];
        if (at(j) == '/' && is_digit(at(j + 1))) {
          ++j;
          while (is_digit(at(j))) b += s_[j++];
          bool ends = !(is_digit(at(j)) || at(j) == '/' || ((at(j) == '.' || at(j) == ',') && is_digit(at(j + 1))));
          if (ends && a.size() <= 18 && b.size() <= 18 && digits.size() <= 18) {
            i_ = j;
            int64_t w = std::strtoll(digits.c_str(), nullptr, 10), n = std::strtoll(a.c_str(), nullptr, 10),
                    d = std::strtoll(b.c_str(), nullptr, 10);
            if (d == 0 || n >= d) return mk(Op::Invalid);
            return mk(Op::Add, {mk_num(integer(w)), mk_div(mk_num(integer(n)), mk_num(integer(d)))});
          }
        }
      }
      if (digits.size() <= 18) return mk_num(integer(std::strtoll(digits.c_str(), nullptr, 10)));
      return mk_num(real(std::strtod(digits.c_str(), nullptr), Kind::Rational));
    }
    std::string text = digits + "." + (frac.empty() ? "0" : frac) + exponent;
    double d = std::strtod(text.c_str(), nullptr);
    if (!std::isfinite(d)) fail();
    return mk_num(real(d, Kind::Float));
  }

  std::string read_subscript() {
    // After '_': {text} or one character; returned with its braces dropped.
    if (cur() == '{') {
      size_t open = i_;
      int depth = 0;
      for (size_t j = i_; j < s_.size(); ++j) {
        if (s_[j] == '{') ++depth;
        if (s_[j] == '}' && --depth == 0) {
          i_ = j + 1;
          std::string inner(s_.substr(open + 1, j - open - 1));
          inner.erase(std::remove(inner.begin(), inner.end(), ' '), inner.end());
          return inner;
        }
      }
      fail();
    }
    if (cur() == '\\') {
      std::string_view name = cmd_at(i_);
      if (name.empty()) fail();
      i_ += 1 + name.size();
      return std::string(name);
    }
    if (at_end() || cur() == ' ') fail();
    return std::string(1, s_[i_++]);
  }

  NodePtr with_subscript(std::string name) {
    if (cur() == '_') {
      ++i_;
      name += "_" + read_subscript();
    }
    return mk_sym(std::move(name));
  }

  Value parse_letters() {
    size_t e = i_;
    while (e < s_.size() && is_alpha(s_[e])) ++e;
    std::string_view word = s_.substr(i_, e - i_);
    // sin(x), sqrt(2), log(3) written without a backslash.
    size_t k = e;
    while (k < s_.size() && s_[k] == ' ') ++k;
    bool call = at(k) == '(';
    if (call && (in_list(word, kFunctions) || word == "sqrt" || word == "abs")) {
      i_ = e;
      return expr_value(parse_function(std::string(word)));
    }
    if (syn_ == Syntax::Plain) {
      while (e < s_.size() && (is_alpha(s_[e]) || is_digit(s_[e]) || s_[e] == '_')) ++e;
      std::string name(s_.substr(i_, e - i_));
      i_ = e;
      if (name == "pi") return expr_value(mk(Op::Pi));
      if (name == "E") return expr_value(mk(Op::E));
      if (name == "oo") return expr_value(mk(Op::Inf));
      if (call) fail();  // unknown function
      return expr_value(mk_sym(name));
    }
    char c = s_[i_++];
    if (c == 'e' && cur() != '_') return expr_value(mk(Op::E));
    return expr_value(with_subscript(std::string(1, c)));
  }

  Value parse_bracket() {
    char open = s_[i_++];
    skip_ws();
    std::vector<Value> items;
    bool semicolon = false;
    if (cur() == ')' || cur() == ']') fail();
    while (true) {
      items.push_back(parse_set_expr());
      if (items.size() > kMaxItems) fail();
      skip_ws();
      if (eat(",")) continue;
      if (eat(";")) {
        semicolon = true;
        continue;
      }
      break;
    }
    skip_ws();
    if (cur() == '\\' && (at(i_ + 1) == ')' || at(i_ + 1) == ']')) ++i_;
    char close = cur();
    if (close != ')' && close != ']') fail();
    ++i_;
    if (items.size() == 1) {
      if ((open == '(') != (close == ')')) fail();  // "[1)" with one element
      return items[0];
    }
    if (items.size() == 2 && !semicolon) {
      for (auto& v : items)
        if (v.kind != VKind::Expr) return list_value(VKind::Tuple, std::move(items));
      return interval(std::move(items[0]), std::move(items[1]), open == '(', close == ')');
    }
    return list_value(VKind::Tuple, std::move(items));
  }

  std::string read_braced_raw() {
    skip_ws();
    if (cur() != '{') fail();
    size_t open = i_;
    int depth = 0;
    for (size_t j = i_; j < s_.size(); ++j) {
      if (s_[j] == '\\' && j + 1 < s_.size()) {
        ++j;
        continue;
      }
      if (s_[j] == '{') ++depth;
      if (s_[j] == '}' && --depth == 0) {
        i_ = j + 1;
        return std::string(s_.substr(open + 1, j - open - 1));
      }
    }
    fail();
  }

  NodePtr parse_function(std::string name) {
    Guard g(*this);
    NodePtr exponent, base;
    bool inverse = false;
    for (int round = 0; round < 2; ++round) {
      skip_ws();
      if (cur() == '^') {
        ++i_;
        exponent = parse_arg();
      } else if (cur() == '_' && (name == "log")) {
        ++i_;
        base = parse_arg();
      }
    }
    if (exponent && exponent->op == Op::Neg && exponent->kids[0]->op == Op::Num && is_int(exponent->kids[0]->num) &&
        exponent->kids[0]->num.p == 1 && name.size() == 3 && name != "log" && name != "exp") {
      inverse = true;  // \sin^{-1} x
      exponent = nullptr;
    }
    if (name == "lg") {
      name = "log";
      base = mk_num(integer(10));
    }
    if (inverse) name = "arc" + name;
    skip_ws();
    std::vector<NodePtr> args;
    if (cur() == '(') {
      ++i_;
      while (true) {
        args.push_back(need_expr(parse_additive()));
        if (args.size() > 4) fail();
        if (!eat(",")) break;
      }
      expect(")");
    } else if (cur() == '{') {
      args.push_back(parse_arg());
    } else {
      if (syn_ == Syntax::Plain) fail();
      // \sin 2x: the juxtaposed factors up to the next function or operator
      Value v = parse_postfix();
      while (starts_primary() && !next_is_function()) {
        Value w = parse_postfix();
        v = expr_value(mk(Op::Mul, {need_expr(v), need_expr(w)}));
      }
      args.push_back(need_expr(v));
    }
    if (name == "sqrt" || name == "abs" || name == "exp") {
      if (args.size() != 1) fail();
    } else if (args.size() != 1) {
      fail();
    }
    NodePtr f;
    if (name == "log" && base) {
      f = mk_div(mk_func("ln", args), mk_func("ln", {base}));
    } else {
      f = mk_func(name == "log" ? "ln" : name, std::move(args));
    }
    if (exponent) f = mk(Op::Pow, {f, exponent});
    return f;
  }

  bool next_is_function() {
    skip_ws();
    std::string_view name = cmd_at(i_);
    return !name.empty() && in_list(name, kFunctions);
  }

  Value parse_text_command(std::string_view cmd) {
    std::string content = read_braced_raw();
    std::string t;
    for (char ch : content)
      if (ch != '\n') t += ch;
    // trim
    size_t a = t.find_first_not_of(' '), b = t.find_last_not_of(' ');
    if (a == std::string::npos) fail();
    t = t.substr(a, b - a + 1);
    if (cmd == "operatorname") {
      if (in_list(t, kFunctions)) return expr_value(parse_function(t));
      fail();
    }
    if (t.size() == 3 && t[0] == '(' && t[2] == ')' && is_alpha(t[1])) t = t.substr(1, 1);  // \text{(C)}
    if (cmd == "mathbb" || cmd == "mathcal" || cmd == "mathscr" || cmd == "mathfrak") t = std::string(cmd) + ":" + t;
    return expr_value(mk_sym(t, true));
  }

  Value parse_matrix(std::string_view env) {
    if (env == "array") read_braced_raw();  // column spec {cc}
    std::vector<Value> cells;
    size_t cols = 0, rows = 0, in_row = 0;
    auto end_row = [&]() {
      if (in_row == 0) return;
      if (cols == 0) cols = in_row;
      if (in_row != cols) fail();
      ++rows;
      in_row = 0;
    };
    while (true) {
      skip_ws();
      if (looking_at("\\end")) {
        i_ += 4;
        std::string closing = read_braced_raw();
        if (closing != env) fail();
        end_row();
        break;
      }
      if (looking_at("\\\\")) {
        i_ += 2;
        end_row();
        continue;
      }
      cells.push_back(expr_value(need_expr(parse_additive())));
      if (cells.size() > kMaxItems) fail();
      ++in_row;
      skip_ws();
      if (cur() == '&') {
        ++i_;
        continue;
      }
      if (!looking_at("\\\\") && !looking_at("\\end")) fail();
    }
    if (rows == 0 || cols == 0) fail();
    Value m = list_value(VKind::Matrix, std::move(cells));
    m.rows = rows;
    m.cols = cols;
    return m;
  }

  Value parse_set_literal(std::string_view closer_cmd) {
    skip_ws();
    if (cmd_at(i_) == closer_cmd) {
      i_ += 1 + closer_cmd.size();
      return list_value(VKind::Set, {});
    }
    Value v = parse_list();
    if (!eat_cmd(closer_cmd)) fail();
    if (v.kind == VKind::Set) return v;
    return list_value(VKind::Set, expand_pm(v));
  }

  Value parse_command() {
    std::string_view name = cmd_at(i_);
    if (name.empty()) fail();
    i_ += 1 + name.size();
    if (name == "frac" || name == "dfrac" || name == "tfrac" || name == "cfrac") {
      NodePtr a = parse_arg();
      NodePtr b = parse_arg();
      return expr_value(mk_div(a, b, true));
    }
    if (name == "sqrt") {
      skip_ws();
      NodePtr index;
      if (cur() == '[') {
        ++i_;
        Value v = parse_additive();
        expect("]");
        index = need_expr(v);
      }
      NodePtr x = parse_arg();
      if (index) return expr_value(mk_func("root", {x, index}));
      return expr_value(mk_func("sqrt", {x}));
    }
    if (name == "binom" || name == "dbinom" || name == "tbinom") {
      NodePtr n = parse_arg();
      NodePtr k = parse_arg();
      return expr_value(mk_func("binom", {n, k}));
    }
    if (name == "pi") return expr_value(mk(Op::Pi));
    if (name == "infty") return expr_value(mk(Op::Inf));
    if (name == "emptyset" || name == "varnothing") return list_value(VKind::Set, {});
    if (name == "dots" || name == "ldots" || name == "cdots") return expr_value(mk(Op::Ellipsis));
    if (in_list(name, kGreek)) return expr_value(with_subscript(std::string(name)));
    if (in_list(name, kFunctions)) return expr_value(parse_function(std::string(name)));
    if (in_list(name, kTextCmds)) return parse_text_command(name);
    if (name == "boxed" || name == "fbox") {
      skip_ws();
      if (cur() != '{') fail();
      ++i_;
      Value v = parse_list();
      expect("}");
      return v;
    }
    if (name == "{") return parse_set_literal("}");
    if (name == "lbrace") return parse_set_literal("rbrace");
    if (name == "lfloor" || name == "lceil") {
      Value v = parse_additive();
      if (!eat_cmd(name == "lfloor" ? "rfloor" : "rceil")) fail();
      return expr_value(mk_func(name == "lfloor" ? "floor" : "ceil", {need_expr(v)}));
    }
    if (name == "lvert" || name == "vert") {
      ++abs_depth_;
      Value v = parse_additive();
      --abs_depth_;
      if (!eat_cmd(name == "lvert" ? "rvert" : "vert")) fail();
      return expr_value(mk_func("abs", {need_expr(v)}));
    }
    if (name == "begin") {
      std::string env = read_braced_raw();
      if (env == "pmatrix" || env == "bmatrix" || env == "matrix" || env == "array" || env == "Bmatrix" ||
          env == "smallmatrix")
        return parse_matrix(env);
      fail();
    }
    fail();
  }

public:
  static bool only_symbols(const Value& v);
};

bool node_only_symbols(const Node& n) {
  switch (n.op) {
    case Op::Sym:
      return true;
    case Op::Pow:
      return node_only_symbols(*n.kids[0]) && n.kids[1]->op == Op::Neg && n.kids[1]->kids[0]->op == Op::Num &&
             is_int(n.kids[1]->kids[0]->num) && n.kids[1]->kids[0]->num.p == 1;
    case Op::Mul:
    case Op::Div:
    case Op::Add:
    case Op::Func:
      if (n.op == Op::Func && n.name == "pm") return false;
      return !n.kids.empty() && std::all_of(n.kids.begin(), n.kids.end(), [](const NodePtr& k) {
        return node_only_symbols(*k);
      });
    default:
      return false;
  }
}

bool Parser::only_symbols(const Value& v) {
  if (v.kind == VKind::Expr) return node_only_symbols(*v.expr);
  if (v.kind == VKind::Tuple || v.kind == VKind::Interval)
    return !v.items.empty() && std::all_of(v.items.begin(), v.items.end(), [](const Value& x) { return only_symbols(x); });
  return false;
}

// A plain decimal "-12.5" as a node.
std::optional<NodePtr> parse_number_text(const std::string& text) {
  try {
    Parser p(text, Syntax::Plain);
    Value v = p.parse_all();
    if (v.kind == VKind::Expr) return v.expr;
  } catch (const ParseFail&) {
  }
  return std::nullopt;
}

// latex2sympy's get_last_eq: "a = b = c" that fails to parse retries with its last part.
std::string last_equation_part(std::string_view s) {
  if (s.find(',') != std::string_view::npos || s.find(';') != std::string_view::npos) return std::string(s);
  std::vector<size_t> cuts;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '=') continue;
    char before = i > 0 ? s[i - 1] : ' ';
    if (before == '\\' || before == '<' || before == '>' || before == '!' || before == '=') continue;
    if (i + 1 < s.size() && s[i + 1] == '=') continue;
    cuts.push_back(i);
  }
  if (cuts.size() < 2) return std::string(s);
  return std::string(s.substr(cuts.back() + 1));
}

// "1,234,567.5" as one number (latex2sympy reads digit groups of three as thousands, and
// "0,111" as 0.111); with `decimal_comma` (plain text, as math_verify's number pattern) also
// "1000,99" and "2,74" as decimals. Otherwise "1,22" is the set {1, 22}.
std::optional<NodePtr> comma_number(std::string_view s, bool decimal_comma) {
  size_t a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');
  if (a == std::string_view::npos) return std::nullopt;
  s = s.substr(a, b - a + 1);
  bool negative = !s.empty() && s[0] == '-';
  std::string_view body = negative ? s.substr(1) : s;
  if (body.empty() || body.find(',') == std::string_view::npos) return std::nullopt;
  for (char c : body)
    if (!is_digit(c) && c != ',' && c != '.') return std::nullopt;
  size_t dot = body.find('.');
  std::string_view int_part = body.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? std::string_view() : body.substr(dot + 1);
  if (frac.find(',') != std::string_view::npos || frac.find('.') != std::string_view::npos) return std::nullopt;
  if (dot != std::string_view::npos && frac.empty()) return std::nullopt;
  std::vector<std::string_view> groups;
  size_t start = 0;
  for (size_t i = 0; i <= int_part.size(); ++i) {
    if (i == int_part.size() || int_part[i] == ',') {
      groups.push_back(int_part.substr(start, i - start));
      start = i + 1;
    }
  }
  std::string digits;
  bool thousands = groups.size() >= 2 && !groups[0].empty() && groups[0].size() <= 3;
  for (size_t g = 1; g < groups.size() && thousands; ++g) thousands = groups[g].size() == 3;
  if (thousands && !(groups[0][0] == '0' && groups.size() == 2 && frac.empty())) {
    for (auto g : groups) digits += g;
    std::string text = (negative ? "-" : "") + digits + (frac.empty() ? "" : "." + std::string(frac));
    if (auto v = parse_number_text(text)) return v;
    return std::nullopt;
  }
  bool leading_zero = !groups[0].empty() && groups[0][0] == '0';
  if ((decimal_comma || leading_zero) && groups.size() == 2 && dot == std::string_view::npos && !groups[0].empty() &&
      !groups[1].empty()) {
    std::string text = (negative ? "-" : "") + std::string(groups[0]) + "." + std::string(groups[1]);
    return parse_number_text(text);
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Evaluation

struct Binding {
  std::string_view name;
  double value;
};
using Bindings = std::vector<Binding>;

std::optional<Num> eval(const Node& n, const Bindings* vars, int depth = 0) {
  if (depth > 200) return std::nullopt;
  auto kid = [&](size_t k) { return eval(*n.kids[k], vars, depth + 1); };
  switch (n.op) {
    case Op::Num:
      return n.num;
    case Op::Pi:
      return real(M_PI);
    case Op::E:
      return real(M_E);
    case Op::Inf:
      return real(std::numeric_limits<double>::infinity());
    case Op::Sym:
      if (vars)
        for (const auto& b : *vars)
          if (b.name == n.name) return real(b.value);
      return std::nullopt;
    case Op::Ellipsis:
    case Op::Invalid:
      return std::nullopt;
    case Op::Add: {
      auto acc = kid(0);
      for (size_t k = 1; k < n.kids.size() && acc; ++k) {
        auto v = kid(k);
        if (!v) return std::nullopt;
        if (std::isinf(acc->d) || std::isinf(v->d)) {
          double s = acc->d + v->d;
          if (std::isnan(s)) return std::nullopt;
          acc = real(s);
        } else {
          acc = add(*acc, *v);
        }
      }
      return acc;
    }
    case Op::Neg: {
      auto v = kid(0);
      if (!v) return std::nullopt;
      return neg(*v);
    }
    case Op::Mul: {
      auto acc = kid(0);
      for (size_t k = 1; k < n.kids.size() && acc; ++k) {
        auto v = kid(k);
        if (!v) return std::nullopt;
        if (std::isinf(acc->d) || std::isinf(v->d)) {
          double s = acc->d * v->d;
          if (std::isnan(s)) return std::nullopt;
          acc = real(s);
        } else {
          acc = mul(*acc, *v);
        }
      }
      return acc;
    }
    case Op::Div: {
      auto a = kid(0), b = kid(1);
      if (!a || !b || std::isinf(a->d) || std::isinf(b->d)) return std::nullopt;
      return div(*a, *b);
    }
    case Op::Pow: {
      auto a = kid(0), b = kid(1);
      if (!a || !b || std::isinf(a->d) || std::isinf(b->d)) return std::nullopt;
      return power(*a, *b);
    }
    case Op::Percent: {
      auto a = kid(0);
      if (!a) return std::nullopt;
      return div(*a, integer(100));
    }
    case Op::Func:
      break;
  }
  // Functions
  const std::string& f = n.name;
  std::vector<Num> args;
  for (size_t k = 0; k < n.kids.size(); ++k) {
    auto v = kid(k);
    if (!v || std::isinf(v->d)) return std::nullopt;
    args.push_back(*v);
  }
  if (args.empty()) return std::nullopt;
  const Num& x = args[0];
  if (f == "sqrt") return power(x, rational(1, 2));
  if (f == "root") {
    if (args.size() != 2 || !is_int(args[1]) || args[1].p < 1 || args[1].p > 64) return std::nullopt;
    return power(x, rational(1, args[1].p));
  }
  if (f == "abs") return x.d < 0 ? neg(x) : x;
  if (f == "floor" || f == "ceil") {
    if (is_rat(x)) {
      int64_t q = x.p / x.q, r = x.p % x.q;
      if (r != 0 && f == "floor" && x.p < 0) --q;
      if (r != 0 && f == "ceil" && x.p > 0) ++q;
      return integer(q);
    }
    double v = f == "floor" ? std::floor(x.d) : std::ceil(x.d);
    if (std::fabs(v) > 9e15) return std::nullopt;
    return integer(static_cast<int64_t>(v));
  }
  if (f == "fact") {
    if (!is_int(x) || x.p < 0 || x.p > 170) return std::nullopt;
    Num acc = integer(1);
    for (int64_t k = 2; k <= x.p; ++k) {
      auto next = mul(acc, integer(k));
      if (!next) return std::nullopt;
      acc = *next;
    }
    return acc;
  }
  if (f == "binom") {
    if (args.size() != 2 || !is_int(x) || !is_int(args[1])) return std::nullopt;
    int64_t nn = x.p, kk = args[1].p;
    if (kk < 0 || nn < 0 || kk > nn) return integer(0);
    if (nn > 100000) return std::nullopt;
    kk = std::min(kk, nn - kk);
    Num acc = integer(1);
    for (int64_t k = 1; k <= kk; ++k) {
      auto next = mul(acc, integer(nn - kk + k));
      if (!next) return std::nullopt;
      next = div(*next, integer(k));
      if (!next) return std::nullopt;
      acc = *next;
    }
    return acc;
  }
  if (f == "ln") {
    if (is_rat(x) && x.p == x.q) return integer(0);
    if (x.d <= 0) return std::nullopt;
    return real(std::log(x.d), x.kind == Kind::Float ? Kind::Float : Kind::Real);
  }
  if (f == "exp") {
    if (is_rat(x) && x.p == 0) return integer(1);
    return checked(real(std::exp(x.d), x.kind == Kind::Float ? Kind::Float : Kind::Real));
  }
  double v = x.d, r;
  if (is_rat(x) && x.p == 0 && (f == "sin" || f == "tan" || f == "arcsin" || f == "arctan" || f == "sinh" || f == "tanh"))
    return integer(0);
  if (is_rat(x) && x.p == 0 && (f == "cos" || f == "sec" || f == "cosh")) return integer(1);
  if (f == "sin") r = std::sin(v);
  else if (f == "cos") r = std::cos(v);
  else if (f == "tan") r = std::tan(v);
  else if (f == "sec") r = 1.0 / std::cos(v);
  else if (f == "csc") r = 1.0 / std::sin(v);
  else if (f == "cot") r = 1.0 / std::tan(v);
  else if (f == "arcsin") r = std::asin(v);
  else if (f == "arccos") r = std::acos(v);
  else if (f == "arctan") r = std::atan(v);
  else if (f == "arcsec") r = std::acos(1.0 / v);
  else if (f == "arccsc") r = std::asin(1.0 / v);
  else if (f == "arccot") r = std::atan(1.0 / v);
  else if (f == "sinh") r = std::sinh(v);
  else if (f == "cosh") r = std::cosh(v);
  else if (f == "tanh") r = std::tanh(v);
  else if (f == "coth") r = 1.0 / std::tanh(v);
  else return std::nullopt;  // pm (unexpanded) and unknown names
  return checked(real(r, x.kind == Kind::Float ? Kind::Float : Kind::Real));
}

// ---------------------------------------------------------------------------------------------
// Comparison

void collect_symbols(const Node& n, std::vector<std::string_view>& out) {
  if (n.op == Op::Sym) {
    if (std::find(out.begin(), out.end(), std::string_view(n.name)) == out.end()) out.push_back(n.name);
    return;
  }
  for (const auto& k : n.kids) collect_symbols(*k, out);
}

bool same_node(const Node& a, const Node& b) {
  if (a.op != b.op || a.kids.size() != b.kids.size()) return false;
  switch (a.op) {
    case Op::Num:
      if (a.num.kind != b.num.kind) return false;
      if (is_rat(a.num) && is_rat(b.num)) return a.num.p == b.num.p && a.num.q == b.num.q;
      return a.num.d == b.num.d;
    case Op::Sym:
      if (a.name != b.name) return false;
      break;
    case Op::Func:
      if (a.name != b.name) return false;
      break;
    case Op::Invalid:
      return false;
    default:
      break;
  }
  for (size_t k = 0; k < a.kids.size(); ++k)
    if (!same_node(*a.kids[k], *b.kids[k])) return false;
  return true;
}

bool same_value(const Value& a, const Value& b) {
  if (a.kind != b.kind || a.items.size() != b.items.size()) return false;
  if (a.kind == VKind::Expr) return same_node(*a.expr, *b.expr);
  if (a.kind == VKind::Relation && a.rel != b.rel) return false;
  if (a.kind == VKind::Interval && (a.left_open != b.left_open || a.right_open != b.right_open)) return false;
  if (a.kind == VKind::Matrix && (a.rows != b.rows || a.cols != b.cols)) return false;
  for (size_t k = 0; k < a.items.size(); ++k)
    if (!same_value(a.items[k], b.items[k])) return false;
  return true;
}

bool rounded_equal(double a, double b, int digits) {
  long double scale = std::pow(10.0L, digits);
  long double sa = a * scale, sb = b * scale;
  if (std::fabs(static_cast<double>(sa)) > 4e15 || std::fabs(static_cast<double>(sb)) > 4e15)
    return std::fabs(a - b) <= 1e-15 * std::max(std::fabs(a), std::fabs(b));
  return std::nearbyint(sa) == std::nearbyint(sb);
}

// sympy_numeric_eq for two numbers.
bool nums_equal(const Num& a, const Num& b, const CompareOptions& opt) {
  if (!std::isfinite(a.d) || !std::isfinite(b.d)) return a.d == b.d;
  bool a_number = a.kind != Kind::Real, b_number = b.kind != Kind::Real;
  if (a_number && b_number && (a.kind == Kind::Float || b.kind == Kind::Float) &&
      rounded_equal(a.d, b.d, opt.float_rounding))
    return true;
  if (is_rat(a) && is_rat(b)) return a.p == b.p && a.q == b.q;
  double diff = std::fabs(a.d - b.d), scale = std::max(std::fabs(a.d), std::fabs(b.d));
  return diff == 0.0 || diff <= 1e-12 * scale;
}

// A fixed pseudo-random point for variable `j` at trial `t`: |v| in [0.35, 2.9], mixed signs.
double sample_point(size_t t, size_t j) {
  uint64_t x = 0x9E3779B97F4A7C15ull * (t * 131 + j * 7919 + 17);
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  double u = static_cast<double>(x >> 11) / static_cast<double>(uint64_t(1) << 53);  // [0, 1)
  double mag = 0.35 + 2.55 * u;
  return (t % 3 == 2 && (j % 2 == 0 || t % 2 == 1)) ? -mag : mag;
}

constexpr size_t kTrials = 9;
constexpr size_t kMinValidTrials = 3;

// a == b as functions of their variables, by evaluation at fixed points.
bool equal_by_evaluation(const Node& a, const Node& b) {
  std::vector<std::string_view> names;
  collect_symbols(a, names);
  collect_symbols(b, names);
  if (names.size() > 12) return false;
  size_t valid = 0;
  for (size_t t = 0; t < kTrials; ++t) {
    Bindings vars;
    for (size_t j = 0; j < names.size(); ++j) vars.push_back({names[j], sample_point(t, j)});
    auto va = eval(a, &vars), vb = eval(b, &vars);
    if (!va || !vb) continue;
    double diff = std::fabs(va->d - vb->d);
    double scale = std::max({1.0, std::fabs(va->d), std::fabs(vb->d)});
    if (diff > 1e-9 * scale) return false;
    ++valid;
  }
  return valid >= kMinValidTrials;
}

// a == k * b for a constant k (sign > 0: k > 0; sign < 0: k < 0; 0: any nonzero k).
bool proportional(const Node& a, const Node& b, int sign) {
  std::vector<std::string_view> names;
  collect_symbols(a, names);
  collect_symbols(b, names);
  if (names.empty() || names.size() > 12) return false;
  size_t valid = 0;
  double k = 0;
  for (size_t t = 0; t < kTrials; ++t) {
    Bindings vars;
    for (size_t j = 0; j < names.size(); ++j) vars.push_back({names[j], sample_point(t, j)});
    auto va = eval(a, &vars), vb = eval(b, &vars);
    if (!va || !vb) continue;
    if (std::fabs(vb->d) < 1e-9) {
      if (std::fabs(va->d) > 1e-9) return false;
      continue;
    }
    double r = va->d / vb->d;
    if (valid == 0) {
      k = r;
      if (std::fabs(k) < 1e-12) return false;
    } else if (std::fabs(r - k) > 1e-9 * std::max(1.0, std::fabs(k))) {
      return false;
    }
    ++valid;
  }
  if (valid < kMinValidTrials) return false;
  return sign == 0 || (sign > 0 ? k > 0 : k < 0);
}

bool has_symbols(const Node& n) {
  if (n.op == Op::Sym) return true;
  for (const auto& k : n.kids)
    if (has_symbols(*k)) return true;
  return false;
}

bool exprs_equal(const Node& gold, const Node& pred, const CompareOptions& opt) {
  if (same_node(gold, pred)) return true;
  // A gold percentage "28\%" also accepts the bare 28 (math_verify's percentage handling).
  if (gold.op == Op::Percent && pred.op != Op::Percent && exprs_equal(*gold.kids[0], pred, opt)) return true;
  if (!has_symbols(gold) && !has_symbols(pred)) {
    auto a = eval(gold, nullptr), b = eval(pred, nullptr);
    return a && b && nums_equal(*a, *b, opt);
  }
  return equal_by_evaluation(gold, pred);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The names of a product of symbols in written order ("odd" for o*d*d; Euler's e as "e").
bool concat_symbols(const Node& x, std::string& out) {
  if (x.op == Op::Mul) {
    for (const auto& k : x.kids)
      if (!concat_symbols(*k, out)) return false;
    return true;
  }
  if (x.op == Op::Sym) {
    out += x.name;
    return true;
  }
  if (x.op == Op::E) {
    out += "e";
    return true;
  }
  return false;
}

// sympy_compare_symbols: \text{odd} vs o*d*d, \text{e} vs Euler's e, names case-insensitive
// beyond one letter.
bool symbols_equal(const Node& gold, const Node& pred) {
  auto euler_vs_e = [](const Node& sym, const Node& other) {
    return sym.op == Op::Sym && lower(sym.name) == "e" && other.op == Op::E;
  };
  if (euler_vs_e(gold, pred) || euler_vs_e(pred, gold)) return true;
  auto concat = [](const Node& m) -> std::optional<std::string> {
    if (m.op != Op::Mul) return std::nullopt;
    std::string out;
    if (!concat_symbols(m, out)) return std::nullopt;
    return out;
  };
  if (gold.op == Op::Sym) {
    if (auto c = concat(pred)) return lower(gold.name) == lower(*c);
  }
  if (pred.op == Op::Sym) {
    if (auto c = concat(gold)) return lower(pred.name) == lower(*c);
  }
  if (gold.op == Op::Sym && pred.op == Op::Sym) {
    std::string g = gold.name.size() > 1 ? lower(gold.name) : gold.name;
    std::string p = pred.name.size() > 1 ? lower(pred.name) : pred.name;
    return g == p;
  }
  return false;
}

bool is_relation(const Value& v) {
  if (v.kind == VKind::Relation) return true;
  return v.kind == VKind::And && !v.items.empty();
}
bool is_equation(const Value& v) {
  if (v.kind == VKind::Relation) return v.rel == Rel::Eq;
  if (v.kind == VKind::And && !v.items.empty())
    return std::all_of(v.items.begin(), v.items.end(), [](const Value& r) { return r.rel == Rel::Eq; });
  return false;
}
bool is_assignment(const Value& v) {
  if (v.kind == VKind::Relation) return v.rel == Rel::Eq && Parser::only_symbols(v.items[0]);
  if (v.kind == VKind::And && !v.items.empty())
    return is_equation(v) && Parser::only_symbols(v.items[0].items[0]);
  return false;
}
const Value& first_relation(const Value& v) { return v.kind == VKind::And ? v.items.front() : v; }
const Value& last_relation(const Value& v) { return v.kind == VKind::And ? v.items.back() : v; }

bool is_setlike(const Value& v) {
  return v.kind == VKind::Set || v.kind == VKind::Interval || v.kind == VKind::Union;
}

Rel inverse(Rel r) {
  switch (r) {
    case Rel::Lt: return Rel::Gt;
    case Rel::Gt: return Rel::Lt;
    case Rel::Le: return Rel::Ge;
    case Rel::Ge: return Rel::Le;
    default: return r;
  }
}

bool eq_impl(const Value& gold_in, const Value& pred_in, const CompareOptions& opt, int depth);
std::optional<Value> relation_as_set_of_side(const Value& rel);

NodePtr difference(const Value& r) {
  return mk(Op::Add, {r.items[0].expr, mk(Op::Neg, {r.items[1].expr})});
}

bool relations_equal(const Value& g, const Value& p, const CompareOptions& opt, int depth) {
  if (g.kind == VKind::And || p.kind == VKind::And) {
    if (g.kind != p.kind || g.items.size() != p.items.size()) return false;
    for (size_t k = 0; k < g.items.size(); ++k)
      if (!relations_equal(g.items[k], p.items[k], opt, depth + 1)) return false;
    return true;
  }
  bool exprs = g.items[0].kind == VKind::Expr && g.items[1].kind == VKind::Expr && p.items[0].kind == VKind::Expr &&
               p.items[1].kind == VKind::Expr;
  if (!exprs) {
    if (g.rel != p.rel) return false;
    return eq_impl(g.items[0], p.items[0], opt, depth + 1) && eq_impl(g.items[1], p.items[1], opt, depth + 1);
  }
  NodePtr dg = difference(g), dp = difference(p);
  if (g.rel == p.rel && exprs_equal(*dg, *dp, opt)) return true;
  if (inverse(g.rel) == p.rel && exprs_equal(*dg, *mk(Op::Neg, {dp}), opt)) return true;
  // sympy's solve-and-compare, approximated: the same relation up to a constant factor.
  bool ordered = g.rel == Rel::Lt || g.rel == Rel::Le || g.rel == Rel::Gt || g.rel == Rel::Ge;
  if (g.rel == p.rel) return proportional(*dg, *dp, ordered ? 1 : 0);
  if (inverse(g.rel) == p.rel) return proportional(*dg, *dp, -1);
  return false;
}

// a <= |x| <= b as a set of x: [-b, -a] u [a, b] (or (-b, b) when a <= 0).
std::optional<Value> unwrap_abs(const Value& iv) {
  auto lo = eval(*iv.items[0].expr, nullptr), hi = eval(*iv.items[1].expr, nullptr);
  if (!lo || !hi) return std::nullopt;
  Value neg_hi = expr_value(mk(Op::Neg, {iv.items[1].expr})), neg_lo = expr_value(mk(Op::Neg, {iv.items[0].expr}));
  if (lo->d < 0 || (lo->d == 0 && iv.left_open == false))
    return interval(neg_hi, iv.items[1], iv.right_open, iv.right_open);
  if (std::isinf(hi->d))
    return list_value(VKind::Union, {interval(expr_value(mk(Op::Neg, {mk(Op::Inf)})), neg_lo, true, iv.left_open),
                                     interval(iv.items[0], iv.items[1], iv.left_open, true)});
  return list_value(VKind::Union, {interval(neg_hi, neg_lo, iv.right_open, iv.left_open), iv});
}

// An inequality or chain in one variable as the set it describes: x < 3 -> (-oo, 3).
std::optional<Value> relation_as_set(const Value& rel) {
  std::optional<Value> s = relation_as_set_of_side(rel);
  if (!s || s->kind != VKind::Interval) return s;
  const Value& side = rel.kind == VKind::And ? rel.items[0].items[1]
                      : (rel.items[0].kind == VKind::Expr && has_symbols(*rel.items[0].expr)) ? rel.items[0]
                                                                                             : rel.items[1];
  if (side.kind == VKind::Expr && side.expr->op == Op::Func && side.expr->name == "abs") return unwrap_abs(*s);
  return s;
}

std::optional<Value> relation_as_set_of_side(const Value& rel) {
  auto constant = [](const Value& v) { return v.kind == VKind::Expr && !has_symbols(*v.expr); };
  auto variable = [](const Value& v) { return v.kind == VKind::Expr && has_symbols(*v.expr); };
  Value inf = expr_value(mk(Op::Inf)), minus_inf = expr_value(mk(Op::Neg, {mk(Op::Inf)}));
  if (rel.kind == VKind::Relation) {
    Rel r = rel.rel;
    const Value *x = &rel.items[0], *c = &rel.items[1];
    if (variable(*c) && constant(*x)) {
      std::swap(x, c);
      r = inverse(r);
    }
    if (!variable(*x) || !constant(*c)) return std::nullopt;
    switch (r) {
      case Rel::Lt: return interval(minus_inf, *c, true, true);
      case Rel::Le: return interval(minus_inf, *c, true, false);
      case Rel::Gt: return interval(*c, inf, true, true);
      case Rel::Ge: return interval(*c, inf, false, true);
      case Rel::Eq: return list_value(VKind::Set, {*c});
      case Rel::Ne:
        return list_value(VKind::Union, {interval(minus_inf, *c, true, true), interval(*c, inf, true, true)});
    }
    return std::nullopt;
  }
  if (rel.kind == VKind::And && rel.items.size() == 2) {
    const Value &r1 = rel.items[0], &r2 = rel.items[1];
    if (!constant(r1.items[0]) || !variable(r1.items[1]) || !constant(r2.items[1])) return std::nullopt;
    bool up = (r1.rel == Rel::Lt || r1.rel == Rel::Le) && (r2.rel == Rel::Lt || r2.rel == Rel::Le);
    bool down = (r1.rel == Rel::Gt || r1.rel == Rel::Ge) && (r2.rel == Rel::Gt || r2.rel == Rel::Ge);
    if (up) return interval(r1.items[0], r2.items[1], r1.rel == Rel::Lt, r2.rel == Rel::Lt);
    if (down) return interval(r2.items[1], r1.items[0], r2.rel == Rel::Gt, r1.rel == Rel::Gt);
  }
  return std::nullopt;
}

std::vector<Value> distinct(const std::vector<Value>& items) {
  std::vector<Value> out;
  for (const auto& v : items)
    if (std::none_of(out.begin(), out.end(), [&](const Value& w) { return same_value(v, w); })) out.push_back(v);
  return out;
}

// Elementwise comparison of sets and tuples (math_verify's sympy_deep_compare_set_and_tuple); a
// set keeps one of repeated elements, as sympy's FiniteSet does.
bool deep_compare(const Value& a_in, const Value& b_in, const CompareOptions& opt, int depth) {
  Value a = a_in, b = b_in;
  if (a.kind == VKind::Set) a.items = distinct(a.items);
  if (b.kind == VKind::Set) b.items = distinct(b.items);
  if (a.items.size() != b.items.size()) return false;
  bool unordered = a.kind == VKind::Set ? true : b.kind == VKind::Set && a.kind != VKind::Tuple;
  if (a.kind == VKind::Tuple && b.kind == VKind::Set) unordered = false;  // pred read in written order
  if (!unordered) {
    for (size_t k = 0; k < a.items.size(); ++k)
      if (!eq_impl(a.items[k], b.items[k], opt, depth + 1)) return false;
    return true;
  }
  std::vector<bool> used(b.items.size(), false);
  for (const auto& x : a.items) {
    bool found = false;
    for (size_t k = 0; k < b.items.size() && !found; ++k) {
      if (used[k] || !eq_impl(x, b.items[k], opt, depth + 1)) continue;
      used[k] = found = true;
    }
    if (!found) return false;
  }
  return true;
}

bool intervals_equal(const Value& a, const Value& b, const CompareOptions& opt, int depth) {
  return a.left_open == b.left_open && a.right_open == b.right_open && eq_impl(a.items[0], b.items[0], opt, depth + 1) &&
         eq_impl(a.items[1], b.items[1], opt, depth + 1);
}

double lower_bound_of(const Value& v) {
  const Value* x = nullptr;
  if (v.kind == VKind::Interval) x = &v.items[0];
  if (v.kind == VKind::Set && !v.items.empty()) x = &v.items[0];
  if (!x || x->kind != VKind::Expr) return 0;
  auto n = eval(*x->expr, nullptr);
  return n ? n->d : 0;
}

bool sets_equal(const Value& gold, const Value& pred, const CompareOptions& opt, int depth) {
  auto as_set = [](const Value& v) {
    if (is_setlike(v) || v.kind == VKind::Tuple) return v;
    return list_value(VKind::Set, {v});
  };
  Value a = as_set(gold), b = as_set(pred);
  if (a.kind == VKind::Interval && b.kind == VKind::Interval) return intervals_equal(a, b, opt, depth);
  if (a.kind == VKind::Union || b.kind == VKind::Union) {
    if (a.kind != b.kind || a.items.size() != b.items.size()) return false;
    auto by_start = [](const Value& x, const Value& y) { return lower_bound_of(x) < lower_bound_of(y); };
    std::stable_sort(a.items.begin(), a.items.end(), by_start);
    std::stable_sort(b.items.begin(), b.items.end(), by_start);
    for (size_t k = 0; k < a.items.size(); ++k)
      if (!sets_equal(a.items[k], b.items[k], opt, depth + 1)) return false;
    return true;
  }
  bool a_list = a.kind == VKind::Set || a.kind == VKind::Tuple, b_list = b.kind == VKind::Set || b.kind == VKind::Tuple;
  if (a_list && b_list) return deep_compare(a, b, opt, depth);
  // (1, 2) reads as an open interval; it still matches the pair 1, 2.
  if (a.kind == VKind::Interval && a.left_open && a.right_open && b_list && b.items.size() == 2)
    return deep_compare(list_value(VKind::Tuple, a.items), b, opt, depth);
  if (b.kind == VKind::Interval && b.left_open && b.right_open && a_list && a.items.size() == 2)
    return deep_compare(a, list_value(VKind::Tuple, b.items), opt, depth);
  return false;
}

bool eq_impl(const Value& gold_in, const Value& pred_in, const CompareOptions& opt, int depth) {
  if (depth > 12) return false;
  Value gold = gold_in, pred = pred_in;
  bool g_asg = is_assignment(gold), p_asg = is_assignment(pred);
  bool g_eqn = is_equation(gold), p_eqn = is_equation(pred);
  if (g_asg) gold = relation(Rel::Eq, first_relation(gold).items[0], last_relation(gold).items[1]);
  if (p_asg) pred = relation(Rel::Eq, first_relation(pred).items[0], last_relation(pred).items[1]);
  if (p_eqn && !g_eqn) {
    Value rhs = last_relation(pred).items[1];
    pred = std::move(rhs);
  } else if (g_asg && !p_eqn) {
    Value rhs = last_relation(gold).items[1];
    gold = std::move(rhs);
  }
  if (is_relation(gold) && is_setlike(pred))
    if (auto s = relation_as_set(gold)) gold = *s;
  if (same_value(gold, pred)) return true;
  if (is_relation(gold) && is_relation(pred)) return relations_equal(gold, pred, opt, depth);
  if (is_relation(gold) || is_relation(pred)) return false;
  if (gold.kind == VKind::Matrix || pred.kind == VKind::Matrix) {
    if (gold.kind != pred.kind || gold.rows != pred.rows || gold.cols != pred.cols) return false;
    for (size_t k = 0; k < gold.items.size(); ++k)
      if (!eq_impl(gold.items[k], pred.items[k], opt, depth + 1)) return false;
    return true;
  }
  if (gold.kind != VKind::Expr || pred.kind != VKind::Expr) return sets_equal(gold, pred, opt, depth);
  const Node &g = *gold.expr, &p = *pred.expr;
  if (g.op == Op::Sym || p.op == Op::Sym) {
    if (symbols_equal(g, p)) return true;
  }
  return exprs_equal(g, p, opt);
}

// ---------------------------------------------------------------------------------------------
// describe

std::string describe_node(const Node& n) {
  auto list = [&](const char* name) {
    std::string out = name;
    out += "(";
    for (size_t k = 0; k < n.kids.size(); ++k) out += (k ? ", " : "") + describe_node(*n.kids[k]);
    return out + ")";
  };
  switch (n.op) {
    case Op::Num: {
      if (is_rat(n.num)) return n.num.q == 1 ? std::to_string(n.num.p) : std::to_string(n.num.p) + "/" + std::to_string(n.num.q);
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g%s", n.num.d, n.num.kind == Kind::Float ? "f" : "");
      return buf;
    }
    case Op::Sym: return n.text ? "\"" + n.name + "\"" : n.name;
    case Op::Pi: return "pi";
    case Op::E: return "E";
    case Op::Inf: return "oo";
    case Op::Ellipsis: return "...";
    case Op::Invalid: return "Invalid";
    case Op::Add: return list("Add");
    case Op::Mul: return list("Mul");
    case Op::Div: return list("Div");
    case Op::Pow: return list("Pow");
    case Op::Neg: return list("Neg");
    case Op::Percent: return list("Pct");
    case Op::Func: return list(n.name.c_str());
  }
  return "?";
}

}  // namespace

std::optional<Value> parse_math(std::string_view text, Syntax syntax) {
  if (text.size() > kMaxInput) return std::nullopt;
  try {
    if (auto n = comma_number(text, syntax == Syntax::Plain)) return expr_value(*n);
    try {
      Parser p(text, syntax);
      return p.parse_all();
    } catch (const ParseFail&) {
      std::string last = last_equation_part(text);
      if (last.size() == text.size()) return std::nullopt;
      Parser p(last, syntax);
      return p.parse_all();
    }
  } catch (const ParseFail&) {
    return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

bool values_equal(const Value& gold, const Value& pred, const CompareOptions& options) {
  try {
    return eq_impl(gold, pred, options, 0);
  } catch (const std::exception&) {
    return false;
  }
}

std::optional<Num> evaluate(const Node& node) {
  try {
    return eval(node, nullptr);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string describe(const Value& v) {
  auto items = [&](const char* name) {
    std::string out = name;
    out += "{";
    for (size_t k = 0; k < v.items.size(); ++k) out += (k ? ", " : "") + describe(v.items[k]);
    return out + "}";
  };
  switch (v.kind) {
    case VKind::Expr: return describe_node(*v.expr);
    case VKind::Relation: {
      static const char* const ops[] = {"=", "!=", "<", "<=", ">", ">="};
      return describe(v.items[0]) + " " + ops[static_cast<int>(v.rel)] + " " + describe(v.items[1]);
    }
    case VKind::And: return items("And");
    case VKind::Tuple: return items("Tuple");
    case VKind::Set: return items("Set");
    case VKind::Interval:
      return std::string(v.left_open ? "(" : "[") + describe(v.items[0]) + ", " + describe(v.items[1]) +
             (v.right_open ? ")" : "]");
    case VKind::Union: return items("Union");
    case VKind::Matrix: return items(("Matrix" + std::to_string(v.rows) + "x" + std::to_string(v.cols)).c_str());
  }
  return "?";
}

}  // namespace grpo::rollout::math
