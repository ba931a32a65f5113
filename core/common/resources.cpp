// The two folders come from core/common/CMakeLists.txt as definitions of this file alone: an
// absolute path on any other compile line would tie that object's ccache entry to one clone of
// the tree (CI builds in a fresh clone).
#include "core/common/resources.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace grpo {

std::string resources_dir() {
  if (const char* env = std::getenv("GRPO_RESOURCES"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  if (std::filesystem::is_directory(GRPO_INSTALLED_RESOURCES, ec)) return GRPO_INSTALLED_RESOURCES;
  return GRPO_SOURCE_RESOURCES;
}

}  // namespace grpo
