// Fuzz target: tokenizer.json (model, normalizer, pre-tokenizer, added tokens, decoder), then an
// encode/decode round of fixed text through whatever loaded.
#include "core/text/tokenizer.h"
#include "tests/fuzz/fuzz_target.h"

FUZZ_BODY({
  auto tok = grpo::text::Tokenizer::from_json(input, "fuzz/tokenizer.json");
  const auto ids = tok.encode("What is 37 + 45? The answer is \\boxed{82}. héllo 日本 <|im_end|>", true);
  (void)tok.decode(ids, false);
})
