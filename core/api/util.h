// The facade (core/api): the engine's errors (grpo::Error with context and hint), file and
// string helpers, and bounded JSON parsing and typed lookups for what comes from outside.
#pragma once

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/json_fields.h"
#include "core/common/json_limits.h"
#include "core/common/strings.h"
