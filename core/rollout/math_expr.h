// A small math-answer parser and comparator, modelled on how Hugging Face's `math_verify` (with
// latex2sympy2_extended and sympy) reads and compares answers, without sympy: LaTeX or plain
// text ("\frac{1}{2}", "2\sqrt{2}", "x^2+1", "1/2", "(1,2]", "\{1,2\}", "x = 3", "50\%") becomes
// a Value (an expression tree, a relation, a tuple, a set, an interval, a union or a matrix), and
// values_equal() tells whether a prediction matches a gold answer the way math_verify.verify does:
//
//  - numbers are exact rationals where possible (64-bit, double fallback); when either side is
//    written with a decimal point both are rounded to `float_rounding` (6) decimals first;
//  - expressions without variables compare by value, with variables by evaluation at several
//    fixed pseudo-random points (sympy's simplify(a - b) == 0, approximated);
//  - `x = 3` against `3`: an assignment (left side only symbols) compares by its right side;
//    relations compare as equivalent when their sides differ by a nonzero constant factor
//    (flipped for inequalities when negative), inequalities against intervals as sets;
//  - (a, b) is an open interval that also matches a 2-tuple or {a, b} in order; {..} sets compare
//    unordered; \pm expands into a set; a gold percentage "28\%" also accepts a bare 28;
//  - a bare symbol matches \text{...} of the same name, case-insensitively beyond one letter.
//
// Everything is bounded: input length (kMaxInput), nesting depth, exponent size, factorials, set
// sizes; nothing throws out of these functions and nothing loops without bound.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace grpo::rollout::math {

inline constexpr size_t kMaxInput = 2000;  // longer answers are not parsed

// A number: an exact rational (p/q, q > 0, reduced) when `exact`, else the double `d`. `kind`
// is how sympy would type it: Rational (integers, fractions, perfect roots), Float (written
// with a decimal point or an exponent), Real (pi, e, sqrt(2), sin(1), ...).
struct Num {
  enum class Kind : uint8_t { Rational, Float, Real };
  Kind kind = Kind::Rational;
  bool exact = true;  // p/q is the value (only for Rational)
  int64_t p = 0, q = 1;
  double d = 0.0;     // always set
};

enum class Op : uint8_t {
  Num,       // num
  Sym,       // name; `text` when written as \text{...}
  Pi,
  E,         // Euler's number
  Inf,       // +infinity
  Ellipsis,  // "..." / \ldots in a list: equal to nothing but itself
  Add,       // kids summed
  Mul,       // kids multiplied, in written order
  Div,       // kids[0] / kids[1]
  Pow,       // kids[0] ^ kids[1]
  Neg,
  Func,      // name(kids...): sqrt, root, sin, ..., abs, floor, ceil, fact, binom, log, pm
  Percent,   // kids[0] / 100, written "x%"
  Invalid,   // parsed but meaningless ("4 4/0"): equal to nothing
};

struct Node;
using NodePtr = std::shared_ptr<const Node>;
struct Node {
  Op op = Op::Invalid;
  Num num;
  std::string name;
  bool text = false;
  std::vector<NodePtr> kids;
};

enum class Rel : uint8_t { Eq, Ne, Lt, Le, Gt, Ge };

struct Value {
  enum class Kind : uint8_t {
    Expr,      // expr
    Relation,  // items[0] rel items[1]
    And,       // a chain a < b < c: items are Relations
    Tuple,     // items
    Set,       // items (written order kept)
    Interval,  // items[0], items[1] (Exprs) with left_open / right_open
    Union,     // items: Intervals and Sets
    Matrix,    // rows x cols items, row-major
  };
  Kind kind = Kind::Expr;
  NodePtr expr;
  Rel rel = Rel::Eq;
  bool left_open = false, right_open = false;
  size_t rows = 0, cols = 0;
  std::vector<Value> items;
};

enum class Syntax {
  Latex,  // LaTeX as latex2sympy reads it (implicit multiplication, \frac, \sqrt, ...)
  Plain,  // sympy's parse_expr input: 2*x**2, 1/2, no implicit multiplication of numbers
};

// Parses one answer (already stripped of $ delimiters and normalized, see math_extract.h).
// Nothing when the text is not math this parser understands or exceeds the limits.
std::optional<Value> parse_math(std::string_view text, Syntax syntax = Syntax::Latex);

struct CompareOptions {
  int float_rounding = 6;  // decimals kept when a Float is involved (math_verify's default)
};

// math_verify's sympy_expr_eq(gold, pred): not symmetric (assignments and relation-vs-set
// conversions follow the gold's form).
bool values_equal(const Value& gold, const Value& pred, const CompareOptions& options = {});

// The value of a constant expression, if it has one (no free symbols, finite, real).
std::optional<Num> evaluate(const Node& node);

// A short debug rendering ("Set{1, Add(x, 2)}"), for test messages.
std::string describe(const Value& value);

}  // namespace grpo::rollout::math
