// A config key table as JSON, as the run's endpoint serves it at GET /grpo/config/schema: one
// object per key {name, type, group, doc, default, retunable, form, nullable, numeric, range: {lo, hi, lo_open,
// hi_open, text, choices?}} (an unbounded side is null). docs/dashboard.md lists the route.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "core/grpo/config_schema.h"

namespace grpo::grpo {

nlohmann::json config_schema_json(const std::vector<ConfigKeyInfo>& keys);

}  // namespace grpo::grpo
