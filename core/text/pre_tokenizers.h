// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): Split, ByteLevel, Metaspace, Digits,
// Whitespace, WhitespaceSplit, Punctuation, BertPreTokenizer, CharDelimiterSplit, Sequence.
// Each cuts every piece of a pre-tokenized string into smaller pieces (and may rewrite them),
// as tokenizers/src/pre_tokenizers/*.rs do.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/text/json_where.h"
#include "core/text/pattern.h"

namespace grpo::text {

// One piece of text on its way to the model. `at_start`: the piece begins at offset 0 of the
// original input (Metaspace's prepend_scheme "first" looks at this).
struct Piece {
  std::string text;
  bool at_start = false;
};

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// Applies `behavior` to the spans of one string (HF NormalizedString::split): the kept
// [start, end) ranges, in order, empty ones included (callers drop them).
void apply_split_behavior(const std::vector<Span>& spans, SplitBehavior behavior,
                          std::vector<std::pair<size_t, size_t>>& out);

class PreTokenizer {
public:
  virtual ~PreTokenizer() = default;
  // Rewrites `pieces` in place; empty pieces are dropped.
  virtual void pre_tokenize(std::vector<Piece>& pieces) const = 0;
};

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j, const JsonWhere& where);

}  // namespace grpo::text
