// A Jinja interpreter for the subset of Jinja2 that Hugging Face chat templates use, rendering
// as transformers' apply_chat_template does: Jinja2's ImmutableSandboxedEnvironment with
// trim_blocks and lstrip_blocks, the loopcontrols extension ({% break %}, {% continue %}), the
// {% generation %} tag, and the globals raise_exception(message) and strftime_now(format), with
// `tojson` as json.dumps(ensure_ascii=False).
//
//   jinja::Template t(source, "tokenizer_config.json: chat_template");  // parses; grpo::Error on bad syntax
//   std::string text = t.render(context);                                 // context: variable -> value
//
// Supported: {{ }}, {# #}, whitespace control (- and +), for (tuple targets, `if` filter, else,
// loop.*), if/elif/else, set (names, tuples, namespace attributes, block set), macro (defaults,
// keyword arguments), filter blocks; literals, arithmetic, comparisons, and/or/not, in/not in,
// is/is not tests, ~, a if c else b, slices; the filters, tests and str/dict/list methods listed
// in jinja_builtins.cpp. Errors are grpo::Error naming the template, line:col and what was
// expected; a template's raise_exception(msg) is an Error whose message is msg.
//
// Templates are untrusted: Limits bound the source size, parser nesting, loop iterations, output
// size, list sizes and macro recursion, each with an error naming the limit.
#pragma once

#include <memory>
#include <string>

#include "core/text/jinja_parse.h"
#include "core/text/jinja_value.h"

namespace grpo::text::jinja {

class Template {
public:
  Template(const std::string& source, std::string name = "template", Limits limits = {});

  // Renders with `context` as the template's variables (they shadow the globals).
  std::string render(const Dict& context) const;

  const std::string& name() const { return name_; }
  const Limits& limits() const { return limits_; }

private:
  std::string name_;
  Limits limits_;
  std::shared_ptr<const Program> program_;
};

}  // namespace grpo::text::jinja
