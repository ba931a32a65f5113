// OpenBLAS's own thread pool, which LibTorch's CPU matrix products run on where Debian's OpenBLAS
// is the BLAS. torch::set_num_threads() does not reach it: the pool keeps one thread per core,
// and its idle threads spin (sched_yield) after every product. Several processes of a machine
// that each keep such a pool oversubscribe its cores. Looked up at run time, so another BLAS is
// simply left alone.
#pragma once

namespace grpo {

// The pool's thread count, or 0 when the BLAS is not OpenBLAS.
int blas_threads();
// Sets it (n >= 1); false when the BLAS is not OpenBLAS.
bool set_blas_threads(int n);

// Splits the cores between `concurrent_callers` threads that multiply matrices at the same time
// (the trainer and in-process generators), and restores the count it found on destruction.
class BlasThreadScope {
public:
  explicit BlasThreadScope(int concurrent_callers);
  ~BlasThreadScope();
  BlasThreadScope(const BlasThreadScope&) = delete;
  BlasThreadScope& operator=(const BlasThreadScope&) = delete;

private:
  int before_ = 0;  // 0: nothing to restore
};

}  // namespace grpo
