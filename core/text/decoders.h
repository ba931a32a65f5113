// Decoders of tokenizer.json ("decoder"): ByteLevel, Metaspace, ByteFallback, Fuse, Strip,
// Replace, BPEDecoder, Sequence. Like Hugging Face's decode_chain, each maps a list of token
// strings to a new list; the final text is their concatenation.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/text/json_where.h"

namespace grpo::text {

class Decoder {
public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

std::unique_ptr<Decoder> make_decoder(const json& j, const JsonWhere& where);

}  // namespace grpo::text
