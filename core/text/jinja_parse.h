// Jinja templates to a syntax tree: the lexer (with Jinja2's whitespace control: `{%-`/`-%}`,
// `{{-`/`-}}`, `{#- -#}`, `+` modifiers, and the trim_blocks/lstrip_blocks settings transformers
// compiles chat templates with) and a recursive-descent parser following Jinja2's grammar and
// operator precedence. Untrusted input: the template size and the nesting depth are bounded,
// and every syntax error names line:col and what was expected.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/text/jinja_value.h"

namespace grpo::text::jinja {

struct Limits {
  size_t max_template_bytes = 1 << 20;   // 1 MiB of template source
  int max_nesting = 64;                  // nested expressions/blocks in the parser
  int64_t max_loop_iterations = 1'000'000;  // all loop iterations of one render, together
  size_t max_output_bytes = 16u << 20;   // rendered text (and any one string built)
  int max_call_depth = 32;               // nested macro calls
  int max_expression_height = 256;       // operator chains and nesting within one expression
  int max_render_depth = 1000;           // nested statements/expressions/macro calls while rendering
  size_t max_list_items = 1'000'000;     // any list built by the template (range, * ...)
};

struct Pos {
  int line = 1, col = 1;
  std::string str() const { return std::to_string(line) + ":" + std::to_string(col); }
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
  Const, Name, List, Tuple, Dict, Getattr, Getitem, Slice, Call, Filter, Test,
  Neg, Pos, Not, And, Or, Binary, Compare, Cond
};

struct Arg {
  std::string name;  // empty: positional
  ExprPtr value;
};

struct Expr {
  ExprKind kind;
  Pos pos;
  Value constant;               // Const
  std::string name;             // Name; Getattr attribute; Filter/Test/Binary operator name
  std::vector<ExprPtr> items;   // operands (see parser); null entries for absent slice parts
  std::vector<std::string> ops; // Compare: the operators between items
  std::vector<Arg> args;        // Call/Filter/Test arguments
  int height = 1;               // of this subtree (bounded by Limits::max_expression_height)
};

struct Node;
using Body = std::vector<std::unique_ptr<Node>>;

enum class NodeKind { Text, Output, If, For, Set, SetBlock, Macro, Break, Continue, FilterBlock };

struct Node {
  NodeKind kind;
  Pos pos;
  std::string text;                  // Text: the data; Macro: its name; Set: namespace attribute
  std::vector<std::string> targets;  // For/Set/SetBlock targets; Macro parameter names
  std::vector<ExprPtr> exprs;        // Output: [e]; If: a test per branch; For: [iter, filter|null];
                                     // Set: [value (, namespace object)]; Macro: defaults (null = none);
                                     // SetBlock/FilterBlock: filter calls applied to the body
  std::vector<Body> bodies;          // If: one per branch (+ else); For: [body, else]; Macro/SetBlock: [body]
};

struct Program {
  Body body;
};

// Parses `source`; `name` prefixes errors ("chat_template 3:14: expected ..."). Throws grpo::Error.
Program parse(const std::string& source, const std::string& name, const Limits& limits);

}  // namespace grpo::text::jinja
