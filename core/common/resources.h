// Where the resources are (the demo model, presets, reward examples): $GRPO_RESOURCES when set,
// else the installed share folder, else the source tree's resources/ (a build not installed).
// `grpo train --demo` and the desktop app's presets both start here.
#pragma once

#include <string>

namespace grpo {

std::string resources_dir();

}  // namespace grpo
