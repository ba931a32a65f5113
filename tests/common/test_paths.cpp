// The paths of test_paths.h, from the two definitions tests/CMakeLists.txt gives this file alone.
#include "tests/common/test_paths.h"

namespace grpo_test {
const char* test_data() { return GRPO_PATHS_SOURCE_DIR "/tests/data"; }
const char* resources() { return GRPO_PATHS_SOURCE_DIR "/resources"; }
const char* bench_dir() { return GRPO_PATHS_SOURCE_DIR "/tests/bench"; }
const char* text_test_data() { return GRPO_PATHS_SOURCE_DIR "/tests/text/data"; }
const char* run_test_data() { return GRPO_PATHS_SOURCE_DIR "/tests/run/data"; }
const char* cli() { return GRPO_PATHS_CLI; }
}  // namespace grpo_test
