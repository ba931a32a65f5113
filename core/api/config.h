// The facade (core/api): the run config (TRL's names), its key table (ranges, defaults,
// retunable keys, docs) and the presets. See core/grpo/config.h.
#pragma once

#include "core/grpo/config.h"
#include "core/grpo/config_schema.h"
