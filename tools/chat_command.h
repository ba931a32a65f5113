// `grpo inspect chat --tokenizer DIR < conversations.jsonl`: renders each input line with the
// model's chat template, as transformers' apply_chat_template(tokenize=False) would.
//
// Input, one JSON value per line (blank lines skipped): a list of messages, or
//   {"messages": [...], "add_generation_prompt": bool, "kwargs": {...}}
// where kwargs are extra template variables (tools, enable_thinking, date_string, ...).
// Output, one line per input line: the rendered text as a JSON string, or {"error": "..."}
// when the line is not valid or the template raises; the command goes on with the next line.
#pragma once

#include <iosfwd>
#include <string>

namespace grpo::text {

struct ChatCommandOptions {
  std::string tokenizer;               // a model folder (or a tokenizer.json path)
  bool add_generation_prompt = false;  // for lines that do not say (transformers' default: false)
};

// Returns the number of lines that produced {"error": ...}.
int run_chat(const ChatCommandOptions& options, std::istream& in, std::ostream& out);

}  // namespace grpo::text
