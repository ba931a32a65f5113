// Post-processors of tokenizer.json ("post_processor"), reduced to what encoding a single
// sequence needs: the special-token ids added before and after it when add_special_tokens is
// true. TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel (adds nothing) and
// Sequence are understood.
#pragma once

#include <cstdint>
#include <vector>

#include "core/text/json_where.h"

namespace grpo::text {

struct PostProcessor {
  std::vector<int32_t> prefix, suffix;  // around the single sequence "A"
};

// A null `j` gives an empty PostProcessor.
PostProcessor make_post_processor(const json& j, const JsonWhere& where);

}  // namespace grpo::text
