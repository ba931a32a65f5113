#include "core/common/process_setup.h"

#include <csignal>
#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace grpo {

void prepare_process() {
  std::signal(SIGXFSZ, SIG_IGN);
#if defined(__GLIBC__)
  auto unset = [](const char* name) { return std::getenv(name) == nullptr; };
  if (unset("MALLOC_MMAP_THRESHOLD_")) mallopt(M_MMAP_THRESHOLD, 256 << 20);
  if (unset("MALLOC_TRIM_THRESHOLD_")) mallopt(M_TRIM_THRESHOLD, 1 << 30);
  if (unset("MALLOC_TOP_PAD_")) mallopt(M_TOP_PAD, 64 << 20);
#endif
}

}  // namespace grpo
