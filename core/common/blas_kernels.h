// Which OpenBLAS kernel set the process multiplies with, said wherever a speed is reported: `grpo
// --version`, a run's start event, and the JSON of `grpo bench forward` and `grpo bench grpo-step`.
//
// Debian's OpenBLAS is built with DYNAMIC_ARCH: when it loads, it picks one kernel set from the
// CPU (on the Zen 5 machine of BENCHMARKS.md both Debian 12's 0.3.21 and Debian 13's 0.3.29 pick
// "Cooperlake", their AVX-512 set), unless OPENBLAS_CORETYPE names one. A machine whose environment
// pins the AVX2 set ("Haswell") on an AVX-512 CPU multiplies single-precision matrices at half the
// rate: 107-117 against 195-221 GFLOP/s on one thread there. MFU divides by a GEMM measured with the same
// kernels, so it hides this; the line below does not (docs/ARCHITECTURE.md, "OpenBLAS kernels").
#pragma once

#include <string>

namespace grpo {

// What CPUID and XGETBV say about AVX-512; all false off x86-64.
struct CpuId {
  bool avx512f = false, avx512cd = false, avx512bw = false, avx512dq = false, avx512vl = false;
  bool os_avx512 = false;  // XCR0 has the SSE, AVX, opmask and both ZMM state bits (0xE6)
};
CpuId cpu_id();

// Whether `cpu` runs the subset of AVX-512 that OpenBLAS's AVX-512 sets need (F, CD, BW, DQ and VL,
// as Skylake-SP has, with the OS saving ZMM state).
bool runs_openblas_avx512(const CpuId& cpu);

// Whether an OpenBLAS kernel set (openblas_get_corename()) is one of its AVX-512 sets: SkylakeX,
// Cooperlake, SapphireRapids (any case).
bool is_avx512_core(const std::string& core);

// The kernel set the loaded OpenBLAS runs ("Haswell", "Cooperlake"); "" where the BLAS is not
// OpenBLAS. Looked up with dlsym, as blas_threads.h does.
std::string blas_core();

// One line, e.g.
//   "OpenBLAS 0.3.21 DYNAMIC_ARCH, Cooperlake kernels (OpenBLAS's choice)"
//   "OpenBLAS 0.3.21 DYNAMIC_ARCH, Haswell kernels (OPENBLAS_CORETYPE=Haswell; this CPU runs
//    AVX-512, for which OpenBLAS has kernels up to twice as fast: OPENBLAS_CORETYPE unset or SkylakeX)"
//   "not OpenBLAS"
std::string blas_description();
// The same from its parts (what the tests drive): the library's openblas_get_config() and
// openblas_get_corename(), OPENBLAS_CORETYPE (nullptr: unset) and the CPU.
std::string blas_description(const std::string& config, const std::string& core, const char* coretype_env,
                             const CpuId& cpu);

// "" or the advice of the line above, for a run's log: where the CPU runs AVX-512 and OpenBLAS an
// older set.
std::string blas_advice();

}  // namespace grpo
