// Fuzz target: a model's config.json (ModelConfig::from_json and back to JSON).
#include <nlohmann/json.hpp>

#include "core/io/hf_config.h"
#include "tests/fuzz/fuzz_target.h"

FUZZ_BODY({
  const auto j = nlohmann::json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  auto c = grpo::io::ModelConfig::from_json(j, "fuzz/config.json");
  (void)c.to_json().dump();
})
