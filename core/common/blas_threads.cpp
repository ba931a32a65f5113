// OpenBLAS's thread count, found with dlsym (blas_threads.h).
#include "core/common/blas_threads.h"

#include <dlfcn.h>

#include <algorithm>
#include <thread>

namespace grpo {
namespace {

using SetFn = void (*)(int);
using GetFn = int (*)();

SetFn set_fn() { return reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")); }
GetFn get_fn() { return reinterpret_cast<GetFn>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads")); }

}  // namespace

int blas_threads() {
  const GetFn get = get_fn();
  return get && set_fn() ? get() : 0;
}

bool set_blas_threads(int n) {
  const SetFn set = set_fn();
  if (!set || !get_fn()) return false;
  set(std::max(1, n));
  return true;
}

BlasThreadScope::BlasThreadScope(int concurrent_callers) {
  if (concurrent_callers <= 1) return;
  const int found = blas_threads();
  if (found <= 0) return;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (set_blas_threads(std::max(1, cores / concurrent_callers))) before_ = found;
}

BlasThreadScope::~BlasThreadScope() {
  if (before_ > 0) set_blas_threads(before_);
}

}  // namespace grpo
