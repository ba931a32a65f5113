// The facade (core/api): where the resources are (demo model, presets), as `grpo train` finds them.
#pragma once

#include "core/common/resources.h"
