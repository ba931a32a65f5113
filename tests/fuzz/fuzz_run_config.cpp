// Fuzz target: a run config (JSON when it starts with '{', YAML otherwise) applied to the
// defaults and validated, as `grpo train CONFIG` does.
#include "core/grpo/config.h"
#include "tests/fuzz/fuzz_target.h"

FUZZ_BODY({
  const bool json = !input.empty() && input[0] == '{';
  const auto j = grpo::grpo::parse_config_text(input, json ? "fuzz/run.json" : "fuzz/run.yaml");
  grpo::grpo::TrainConfig c;
  c.apply(j, "fuzz/run");
  c.validate("fuzz/run");
  (void)c.to_json().dump();
})
