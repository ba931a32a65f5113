// `grpo inspect tokenize`: the line-oriented tokenizer tool the CLI wires up.
//   default   each UTF-8 line of `in` -> one JSON array of ids per line
//   decode    each line a JSON array of ids -> the decoded text as one JSON string per line
//   chat      JSON messages arrays [{role, content}] (the whole input, or one per line) ->
//             the chat-templated text (with generation prompt) encoded -> one ids array each
#pragma once

#include <iosfwd>
#include <string>

namespace grpo::text {

struct TokenizeOptions {
  std::string tokenizer;      // tokenizer.json or a model directory
  bool add_special = false;   // add the post-processor's special tokens (e.g. <s>)
  bool decode = false;
  bool chat = false;
  bool skip_special = false;  // with decode: drop special tokens
};

// Throws grpo::Error on a bad tokenizer or malformed input line (naming the line number).
void run_tokenize(const TokenizeOptions& options, std::istream& in, std::ostream& out);

}  // namespace grpo::text
