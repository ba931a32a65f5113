// Compiled into grpo_records to keep its wall real (core/records/CMakeLists.txt): neither LibTorch
// nor Qt may be reachable from a run's records. If this fails, a library that grpo_records links
// brought torch's or Qt's include directories with it.
#include "core/common/torch_wall.h"
#if __has_include(<QtCore/qglobal.h>) || __has_include(<qglobal.h>)
#error "core/records can see Qt headers: grpo_records must link only Qt-free targets"
#endif
