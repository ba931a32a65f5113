// Compiled into grpo_serve to keep its wall real (core/serve/CMakeLists.txt): the serving code
// reaches a live run through RunControl only, so no LibTorch header may be reachable from it.
#include "core/common/torch_wall.h"
