// The OpenBLAS kernel set in use, and what the CPU could run (blas_kernels.h).
#include "core/common/blas_kernels.h"

#include <dlfcn.h>
#include <strings.h>

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace grpo {

namespace {
constexpr const char* kAvx512Advice =
    "this CPU runs AVX-512, for which OpenBLAS has kernels up to twice as fast: OPENBLAS_CORETYPE unset or SkylakeX";
using NameFn = char* (*)();
// Whether the advice applies: the CPU and the OS run the AVX-512 sets and OpenBLAS runs another.
bool advise(const std::string& core, const CpuId& cpu) {
  return !core.empty() && runs_openblas_avx512(cpu) && !is_avx512_core(core);
}
std::string call(const char* symbol) {
  const auto fn = reinterpret_cast<NameFn>(dlsym(RTLD_DEFAULT, symbol));
  const char* s = fn ? fn() : nullptr;
  return s ? std::string(s) : std::string();
}
}  // namespace

CpuId cpu_id() {
  CpuId c;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, cx = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &cx, &d)) return c;
  const unsigned max_leaf = a;
  if (!__get_cpuid(1, &a, &b, &cx, &d)) return c;
  if ((cx >> 27) & 1) {  // OSXSAVE: XGETBV says which register state the OS saves
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    c.os_avx512 = (lo & 0xE6) == 0xE6;
  }
  if (max_leaf < 7) return c;
  __cpuid_count(7, 0, a, b, cx, d);
  c.avx512f = (b >> 16) & 1;
  c.avx512dq = (b >> 17) & 1;
  c.avx512cd = (b >> 28) & 1;
  c.avx512bw = (b >> 30) & 1;
  c.avx512vl = (b >> 31) & 1;
#endif
  return c;
}

bool runs_openblas_avx512(const CpuId& cpu) {
  return cpu.avx512f && cpu.avx512cd && cpu.avx512bw && cpu.avx512dq && cpu.avx512vl && cpu.os_avx512;
}

bool is_avx512_core(const std::string& core) {
  for (const char* name : {"SkylakeX", "Cooperlake", "SapphireRapids"})
    if (strcasecmp(core.c_str(), name) == 0) return true;
  return false;
}

std::string blas_core() { return call("openblas_get_corename"); }

std::string blas_description(const std::string& config, const std::string& core, const char* coretype_env,
                             const CpuId& cpu) {
  if (core.empty()) return "not OpenBLAS";
  // openblas_get_config(): "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64"
  const std::string prefix = "OpenBLAS ";
  std::string out = config.rfind(prefix, 0) == 0 ? config.substr(0, config.find(' ', prefix.size())) : "OpenBLAS";
  if (config.find(" DYNAMIC_ARCH") != std::string::npos) out += " DYNAMIC_ARCH";
  out += ", " + core + " kernels (";
  out += coretype_env ? std::string("OPENBLAS_CORETYPE=") + coretype_env : std::string("OpenBLAS's choice");
  if (advise(core, cpu)) out += "; " + std::string(kAvx512Advice);
  return out + ")";
}

std::string blas_advice() {
  const std::string core = blas_core();
  return advise(core, cpu_id()) ? "OpenBLAS runs its " + core + " kernels; " + kAvx512Advice : std::string();
}

std::string blas_description() {
  return blas_description(call("openblas_get_config"), blas_core(), std::getenv("OPENBLAS_CORETYPE"), cpu_id());
}

}  // namespace grpo
