// Shared pieces of the CPU kernels (segment attention, the fused SwiGLU and RMSNorm nodes): a second
// copy of a hot loop for AVX2 and FMA, picked at run time, and exp and sigmoid as plain arithmetic
// that GCC evaluates a vector at a time. Include it only from a kernel's .cpp.
#pragma once

#include <bit>
#include <cstdint>

#define GRPO_KERNEL_INLINE __attribute__((always_inline)) inline
#define GRPO_LAMBDA_INLINE __attribute__((always_inline))  // [&]() GRPO_LAMBDA_INLINE { ... }

// GCC on x86-64: GRPO_TARGET_AVX2 marks the AVX2+FMA copy of a loop, have_avx2_fma() picks it. The
// kernels the copy calls are GRPO_KERNEL_INLINE, so they are compiled into each copy. Elsewhere
// (Clang, other CPUs) only the baseline copy exists.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define GRPO_AVX2_COPY 1
#define GRPO_TARGET_AVX2 __attribute__((target("avx2,fma")))
namespace grpo::model {
inline bool have_avx2_fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}
}  // namespace grpo::model
#endif

// Where the AVX2 copy exists and the CPU has it, run_fast(f) runs f compiled into the AVX2 copy;
// otherwise f as compiled. f must be a lambda marked GRPO_LAMBDA_INLINE.
#ifdef GRPO_AVX2_COPY
namespace grpo::model::simd_detail {
template <typename F>
GRPO_TARGET_AVX2 void run_avx2(const F& f) {
  f();
}
template <typename F>
void run_baseline(const F& f) {
  f();
}
}  // namespace grpo::model::simd_detail
#endif

namespace grpo::model {

// f(double()) where fp64, else f(float()): the one switch from a tensor's dtype to a kernel's element
// type (the kernels take fp32 or fp64 only). f is a generic lambda: [&](auto zero) { using T = ...; }.
template <typename F>
void with_float_type(bool fp64, const F& f) {
  if (fp64)
    f(double());
  else
    f(float());
}

template <typename F>
void run_fast(const F& f) {
#ifdef GRPO_AVX2_COPY
  if (have_avx2_fma()) return simd_detail::run_avx2(f);
  return simd_detail::run_baseline(f);
#else
  f();
#endif
}

// exp(x) for a float x <= 0, as plain arithmetic that the compiler evaluates a vector at a time:
// n = round(x / ln 2) by the 1.5 * 2^23 rounding trick, r = x - n ln 2 in two parts, Cephes'
// degree-6 polynomial for exp(r), times 2^n built in the exponent bits. Within 1.2e-7 relative of
// exp over [-87, 0]; |x| above 87, or NaN, gives 0 (a softmax's shifted scores are at most 0, and
// exp(-87) is 1.6e-38 of the largest term). Masks are built from integer bits, with no select: the
// vectorizer stops at a float compare or a conditional.
GRPO_KERNEL_INLINE float exp_nonpositive(float x) {
  const uint32_t xb = std::bit_cast<uint32_t>(x);
  // All ones where |x| > 87 (or x is NaN): the sign of 87's bits minus |x|'s.
  const uint32_t tiny = uint32_t((0x42AE0000 - int32_t(xb & 0x7FFFFFFFu)) >> 31);
  const float v = std::bit_cast<float>(xb & ~tiny);
  const float fn = v * 1.44269504088896341f + 12582912.0f;
  const int32_t n_int = int32_t(std::bit_cast<uint32_t>(fn) & 0x7FFFFFu) - 0x400000;
  const float n = fn - 12582912.0f;
  float r = n * -0.693359375f + v;
  r = n * 2.12194440e-4f + r;
  float y = 1.9875691500e-4f * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = (y * r) * r + (r + 1.0f);
  const uint32_t scale = (uint32_t(n_int + 127) << 23) & ~tiny;
  return y * std::bit_cast<float>(scale);
}

// 1 / (1 + exp(-x)) for a float x, evaluated a vector at a time: e = exp(-|x|), then 1 / (1 + e)
// for x >= 0 and e / (1 + e) below, the choice made from x's sign bit. Within 3e-7 relative;
// 0 or 1 past |x| = 87.
GRPO_KERNEL_INLINE float sigmoid_float(float x) {
  const uint32_t xb = std::bit_cast<uint32_t>(x);
  const float e = exp_nonpositive(std::bit_cast<float>(xb | 0x80000000u));
  const uint32_t negative = uint32_t(int32_t(xb) >> 31);  // all ones where x < 0
  const float top = std::bit_cast<float>((std::bit_cast<uint32_t>(e) & negative) | (0x3F800000u & ~negative));
  return top / (1.0f + e);
}

}  // namespace grpo::model
