// Normalizers of tokenizer.json ("normalizer"): NFC/NFD/NFKC/NFKD, Lowercase, Strip, Prepend,
// Replace, Sequence. Each rewrites a string in place; we keep no offsets (only ids matter).
#pragma once

#include <memory>
#include <string>

#include "core/text/json_where.h"

namespace grpo::text {

class Normalizer {
public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& s) const = 0;
};

// Builds the normalizer described by `j` (null gives nullptr). Unknown types throw an error
// naming `where.path + ".type"`.
std::unique_ptr<Normalizer> make_normalizer(const json& j, const JsonWhere& where);

}  // namespace grpo::text
