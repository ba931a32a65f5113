// Compiled into grpo_ui to keep the layering real: ui/ sees the engine through torch-free
// headers only (core/api/), so LibTorch's headers must not be on its include path. The check is
// the one every torch-free library's wall uses (core/common/torch_wall.h); if it fails, a library
// that grpo_ui links exports LibTorch's include directories (see grpo_library in the top-level
// CMakeLists.txt: torch is linked PRIVATE). scripts/check_layers.sh lets wall files include it.
#include "core/common/torch_wall.h"
