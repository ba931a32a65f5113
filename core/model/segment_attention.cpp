// Segment attention kernel (segment_attention.h; docs/formulas.md, "Segment attention kernel").
#include "core/model/segment_attention.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "core/common/error.h"
#include "core/model/simd.h"


namespace grpo::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// A row's segments, five numbers each: begin, len, prefix_begin, prefix_len, and where its pairs
// start within a head's probabilities.
constexpr int64_t kStride = 5;

// One row's tensors as raw pointers: q, o, dout, dq (T, H, D); k, v, dk, dv (T, KVH, D); lse (T, H).
// `seg` holds kStride numbers per segment (see kStride).
template <typename T>
struct Rows {
  const T *q = nullptr, *k = nullptr, *v = nullptr;
  T *o = nullptr, *lse = nullptr;  // forward writes
  // Every query's probabilities, kept by forward for backward when the row's pairs fit the cap
  // (else null: backward recomputes them from lse). Head h's come first, then h + 1's; within a
  // head, segment by segment (the table's fifth number), query t of a segment at
  // t * prefix_len + t (t + 1) / 2.
  T* probs = nullptr;
  int64_t pairs = 0;  // (query, key) pairs of the row, per head
  const T *out = nullptr, *dout = nullptr, *lse_in = nullptr;  // backward reads
  T *dq = nullptr, *dk = nullptr, *dv = nullptr;               // backward writes (dk, dv zeroed before)
  int64_t H = 0, KVH = 0, D = 0;
  T scale = 1;
  const int64_t* seg = nullptr;
  int64_t nseg = 0;
  int64_t max_keys = 0;  // the longest segment's keys
};

// The loops below are written once and compiled twice on x86-64: for the baseline ISA, and with
// AVX2 and FMA for the machines that have them (picked at run time). They are also instantiated for
// the common head sizes (32, 64, 128). Everything the hot loops call is inlined into each copy, and
// the multiply-adds may contract into fused instructions (the rest of the program keeps ISO C++'s
// unfused arithmetic). Accumulators are GCC vector values (8 floats or 4 doubles, split in two
// halves on the baseline ISA), so they stay in registers across a loop.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast")
#endif

template <typename T>
struct Lanes {
  typedef T vec __attribute__((vector_size(32)));
  static constexpr int64_t n = 32 / int64_t(sizeof(T));
};
template <typename T>
using Vec = typename Lanes<T>::vec;
template <typename T>
GRPO_KERNEL_INLINE void vload(Vec<T>& v, const T* p) {
  std::memcpy(&v, p, sizeof v);
}
template <typename T>
GRPO_KERNEL_INLINE void vstore(T* p, const Vec<T>& v) {
  std::memcpy(p, &v, sizeof v);
}

// A score row is computed kBlock keys at a time (four vectors, in two sets); the scratch's key
// columns are padded to a multiple of it.
template <typename T>
constexpr int64_t kBlock = 4 * Lanes<T>::n;
template <typename T>
int64_t padded(int64_t n) {
  return (n + kBlock<T> - 1) / kBlock<T> * kBlock<T>;
}

// x[j] = exp(x[j]) over n, for x <= 0 (fp64: the library's exp).
template <typename T>
GRPO_KERNEL_INLINE void exp_in_place(T* x, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    for (int64_t j = 0; j < n; ++j) x[j] = exp_nonpositive(x[j]);
  } else {
    for (int64_t j = 0; j < n; ++j) x[j] = std::exp(x[j]);
  }
}

// max and sum of x[0, n), n >= 1, a vector at a time.
template <typename T>
GRPO_KERNEL_INLINE T row_max(const T* x, int64_t n) {
  constexpr int64_t L = Lanes<T>::n;
  T m = x[0];
  int64_t j = 0;
  if (n >= L) {
    Vec<T> mv;
    vload(mv, x);
    for (j = L; j + L <= n; j += L) {
      Vec<T> v;
      vload(v, x + j);
      mv = v > mv ? v : mv;
    }
    for (int64_t i = 0; i < L; ++i) m = mv[i] > m ? mv[i] : m;
  }
  for (; j < n; ++j) m = x[j] > m ? x[j] : m;
  return m;
}
template <typename T>
GRPO_KERNEL_INLINE T row_sum(const T* x, int64_t n) {
  constexpr int64_t L = Lanes<T>::n;
  Vec<T> acc = {};
  int64_t j = 0;
  for (; j + L <= n; j += L) {
    Vec<T> v;
    vload(v, x + j);
    acc += v;
  }
  T sum = 0;
  for (int64_t i = 0; i < L; ++i) sum += acc[i];
  for (; j < n; ++j) sum += x[j];
  return sum;
}

// The offset in k / v of key j of a segment, for kv head kh: its prefix's tokens, then its own.
GRPO_KERNEL_INLINE int64_t key_offset(const int64_t* s, int64_t j, int64_t kh, int64_t KVH, int64_t D) {
  const int64_t token = j < s[3] ? s[2] + j : s[0] + (j - s[3]);
  return (token * KVH + kh) * D;
}

// One thread's working memory: a segment's keys (and values) transposed, (D, width) with width the
// row's longest segment's keys padded to kBlock, so that a query's scores are vector multiply-adds
// across keys; a score row; and backward's per-key gradient sums (width, D).
template <typename T>
struct Scratch {
  Scratch(int64_t D, int64_t max_keys, bool backward) : width(padded<T>(max_keys)) {
    kt.assign(size_t(D * width), T(0));
    s.assign(size_t(width), T(0));
    if (backward) {
      vt.assign(size_t(D * width), T(0));
      dp.assign(size_t(width), T(0));
      dks.assign(size_t(width * D), T(0));
      dvs.assign(size_t(width * D), T(0));
    }
  }
  int64_t width;
  std::vector<T> kt, vt, s, dp, dks, dvs;
  // The span of tokens whose keys fill kt's (vt's) first columns: a prompt's keys, read again by
  // each of its completions, are transposed once.
  int64_t span_begin = -1, span_len = 0;
};

// Fills the scratch's columns with segment s's keys (and values) for kv head kh, reusing a cached
// prefix.
template <int DN, typename T>
GRPO_KERNEL_INLINE void load_keys(const Rows<T>& a, const int64_t* s, int64_t kh, Scratch<T>& sc, bool values) {
  const int64_t D = DN ? DN : a.D, W = sc.width, begin = s[0], len = s[1], pb = s[2], P = s[3];
  T *kt = sc.kt.data(), *vt = sc.vt.data();
  for (int pass = 0; pass < 2; ++pass) {  // the prefix, then the segment's own tokens
    const bool prefix = pass == 0;
    if (prefix && (P == 0 || (sc.span_begin == pb && sc.span_len == P))) continue;
    const int64_t from = prefix ? 0 : P, n = prefix ? P : len, first = prefix ? pb : begin;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t off = ((first + j) * a.KVH + kh) * D;
      for (int64_t d = 0; d < D; ++d) kt[d * W + from + j] = a.k[off + d];
      if (values)
        for (int64_t d = 0; d < D; ++d) vt[d * W + from + j] = a.v[off + d];
    }
    if (prefix) sc.span_begin = pb, sc.span_len = P;
  }
  if (P == 0) sc.span_begin = begin, sc.span_len = len;  // its own keys now lead: its completions' prefix
}

// acc[i] += x * row[i L, i L + L) for the NV vectors of a block (L lanes each).
template <int NV, typename T>
GRPO_KERNEL_INLINE void add_block(Vec<T> (&acc)[NV], const Vec<T>& x, const T* row) {
  constexpr int64_t L = Lanes<T>::n;
  for (int64_t i = 0; i < NV; ++i) {
    Vec<T> m;
    vload(m, row + i * L);
    acc[i] += x * m;
  }
}

// out[0, NV L) = even + odd, vector by vector.
template <int NV, typename T>
GRPO_KERNEL_INLINE void store_block(T* out, const Vec<T> (&even)[NV], const Vec<T> (&odd)[NV]) {
  constexpr int64_t L = Lanes<T>::n;
  for (int64_t i = 0; i < NV; ++i) vstore(out + i * L, even[i] + odd[i]);
}

// Keys jb .. jb + count (count <= NV L) of times_columns' product below, NV vectors wide, with d
// split into even and odd halves: two dependency chains side by side.
template <int NV, int DN, typename T>
GRPO_KERNEL_INLINE void times_columns_block(const T* x, T scale, const T* mt, int64_t W, int64_t D, int64_t jb,
                                            int64_t count, T* out) {
  Vec<T> even[NV] = {}, odd[NV] = {};
  int64_t d = 0;
  for (; d + 2 <= D; d += 2) {
    add_block<NV>(even, Vec<T>{} + x[d] * scale, mt + d * W + jb);
    add_block<NV>(odd, Vec<T>{} + x[d + 1] * scale, mt + (d + 1) * W + jb);
  }
  if (d < D) add_block<NV>(even, Vec<T>{} + x[d] * scale, mt + d * W + jb);
  T block[NV * Lanes<T>::n];
  store_block<NV>(block, even, odd);
  std::memcpy(out + jb, block, size_t(count) * sizeof(T));
}

// out[j] = scale * sum_d x[d] * mt[d * W + j] for j < n: a query's scores against the transposed
// keys (or dout's products with the transposed values). kBlock keys at a time; a last partial
// block takes only the vectors its keys fill (a prompt's first tokens have a few keys each).
template <int DN, typename T>
GRPO_KERNEL_INLINE void times_columns(const T* x, T scale, const T* mt, int64_t W, int64_t D_runtime, int64_t n,
                                      T* out) {
  constexpr int64_t B = kBlock<T>, L = Lanes<T>::n;
  const int64_t D = DN ? DN : D_runtime;
  int64_t jb = 0;
  for (; jb + B <= n; jb += B) times_columns_block<4, DN>(x, scale, mt, W, D, jb, B, out);
  const int64_t left = n - jb;  // the columns are padded to B, so a partial block reads inside them
  if (left > 3 * L) times_columns_block<4, DN>(x, scale, mt, W, D, jb, left, out);
  else if (left > 2 * L) times_columns_block<3, DN>(x, scale, mt, W, D, jb, left, out);
  else if (left > L) times_columns_block<2, DN>(x, scale, mt, W, D, jb, left, out);
  else if (left > 0) times_columns_block<1, DN>(x, scale, mt, W, D, jb, left, out);
}

// out[0, D) = sum_j w[j] * rows_j[0, D), rows_j the k or v row (`base`) of the segment's key j: a
// query's attention output, or its q gradient. Four vectors of d at a time, with j split into even
// and odd halves; a head size that is not a multiple of four vectors ends in a plain loop.
template <int DN, typename T>
GRPO_KERNEL_INLINE void weighted_rows(const Rows<T>& a, const int64_t* s, int64_t kh, const T* base, const T* w,
                                      int64_t n, T* out) {
  constexpr int64_t C = kBlock<T>;
  const int64_t D = DN ? DN : a.D;
  int64_t db = 0;
  for (; db + C <= D; db += C) {
    Vec<T> even[4] = {}, odd[4] = {};
    int64_t j = 0;
    for (; j + 2 <= n; j += 2) {
      add_block<4>(even, Vec<T>{} + w[j], base + key_offset(s, j, kh, a.KVH, D) + db);
      add_block<4>(odd, Vec<T>{} + w[j + 1], base + key_offset(s, j + 1, kh, a.KVH, D) + db);
    }
    if (j < n) add_block<4>(even, Vec<T>{} + w[j], base + key_offset(s, j, kh, a.KVH, D) + db);
    store_block<4>(out + db, even, odd);
  }
  for (; db < D; ++db) {
    T acc = 0;
    for (int64_t j = 0; j < n; ++j) acc += w[j] * base[key_offset(s, j, kh, a.KVH, D) + db];
    out[db] = acc;
  }
}

// Forward of every query head that reads kv head kh: per query, the scores of its keys, their
// softmax (max subtracted), the weighted sum of values, and the log-sum-exp kept for backward.
template <int DN, typename T>
GRPO_KERNEL_INLINE void forward_kv_head(const Rows<T>& a, int64_t kh) {
  const int64_t G = a.H / a.KVH, D = DN ? DN : a.D;
  Scratch<T> sc(D, a.max_keys, false);
  T* p = sc.s.data();
  for (int64_t si = 0; si < a.nseg; ++si) {
    const int64_t* s = a.seg + kStride * si;
    const int64_t begin = s[0], len = s[1], P = s[3];
    load_keys<DN>(a, s, kh, sc, false);
    for (int64_t h = kh * G; h < (kh + 1) * G; ++h)
      for (int64_t t = 0; t < len; ++t) {
        const int64_t row = (begin + t) * a.H + h, n = P + t + 1;  // query t sees the prefix and 0..t
        times_columns<DN>(a.q + row * D, a.scale, sc.kt.data(), sc.width, D, n, p);
        const T m = row_max(p, n);
        for (int64_t j = 0; j < n; ++j) p[j] -= m;
        exp_in_place(p, n);
        const T sum = row_sum(p, n), inv = T(1) / sum;
        for (int64_t j = 0; j < n; ++j) p[j] *= inv;
        weighted_rows<DN>(a, s, kh, a.v, p, n, a.o + row * D);
        if (a.probs) std::copy(p, p + n, a.probs + h * a.pairs + s[4] + t * P + t * (t + 1) / 2);
        a.lse[row] = m + std::log(sum);
      }
  }
}

// Backward for the heads of kv head kh. Per query, with p_j kept by forward (or recomputed as
// exp(s_j - lse)) and delta = dout . out:  ds_j = p_j (dout . v_j - delta),  dq = scale sum_j ds_j k_j,
// dk_j += scale ds_j q,  dv_j += p_j dout. A segment's key gradients are summed in the scratch, then
// added to dk / dv once; keys shared by several segments (a prompt's) add up there. The heads of one
// kv head are handled by one thread, so nothing else writes its dk / dv rows.
template <int DN, typename T>
GRPO_KERNEL_INLINE void backward_kv_head(const Rows<T>& a, int64_t kh) {
  const int64_t G = a.H / a.KVH, D = DN ? DN : a.D;
  Scratch<T> sc(D, a.max_keys, true);
  T *p = sc.s.data(), *dp = sc.dp.data();
  for (int64_t si = 0; si < a.nseg; ++si) {
    const int64_t* s = a.seg + kStride * si;
    const int64_t begin = s[0], len = s[1], P = s[3], Lk = P + len;
    load_keys<DN>(a, s, kh, sc, true);
    std::fill(sc.dks.begin(), sc.dks.begin() + Lk * D, T(0));
    std::fill(sc.dvs.begin(), sc.dvs.begin() + Lk * D, T(0));
    for (int64_t h = kh * G; h < (kh + 1) * G; ++h)
      for (int64_t t = 0; t < len; ++t) {
        const int64_t row = (begin + t) * a.H + h, n = P + t + 1;
        const T *qr = a.q + row * D, *dor = a.dout + row * D, *outr = a.out + row * D;
        T delta = 0;
        for (int64_t d = 0; d < D; ++d) delta += dor[d] * outr[d];
        const T* pk;
        if (a.probs) {
          pk = a.probs + h * a.pairs + s[4] + t * P + t * (t + 1) / 2;
        } else {
          times_columns<DN>(qr, a.scale, sc.kt.data(), sc.width, D, n, p);
          const T lse = a.lse_in[row];
          for (int64_t j = 0; j < n; ++j) p[j] -= lse;
          exp_in_place(p, n);
          pk = p;
        }
        times_columns<DN>(dor, T(1), sc.vt.data(), sc.width, D, n, dp);
        for (int64_t j = 0; j < n; ++j) dp[j] = pk[j] * (dp[j] - delta) * a.scale;  // ds_j, scaled
        weighted_rows<DN>(a, s, kh, a.k, dp, n, a.dq + row * D);
        for (int64_t j = 0; j < n; ++j) {
          T *dkr = sc.dks.data() + j * D, *dvr = sc.dvs.data() + j * D;
          const T ds = dp[j], pj = pk[j];
          for (int64_t d = 0; d < D; ++d) dkr[d] += ds * qr[d];
          for (int64_t d = 0; d < D; ++d) dvr[d] += pj * dor[d];
        }
      }
    for (int64_t j = 0; j < Lk; ++j) {
      const int64_t off = key_offset(s, j, kh, a.KVH, D);
      const T *dkr = sc.dks.data() + j * D, *dvr = sc.dvs.data() + j * D;
      for (int64_t d = 0; d < D; ++d) a.dk[off + d] += dkr[d];
      for (int64_t d = 0; d < D; ++d) a.dv[off + d] += dvr[d];
    }
  }
}

// One kv head's forward or backward, in the copy for this head size. (No lambdas on this path: a
// lambda's body would not take the AVX2 copy's target.)
template <bool kBackward, int DN, typename T>
GRPO_KERNEL_INLINE void kv_head_sized(const Rows<T>& a, int64_t kh) {
  if constexpr (kBackward) backward_kv_head<DN>(a, kh);
  else forward_kv_head<DN>(a, kh);
}

template <bool kBackward, typename T>
GRPO_KERNEL_INLINE void kv_head(const Rows<T>& a, int64_t kh) {
  switch (a.D) {
    case 32: kv_head_sized<kBackward, 32>(a, kh); break;
    case 64: kv_head_sized<kBackward, 64>(a, kh); break;
    case 128: kv_head_sized<kBackward, 128>(a, kh); break;
    default: kv_head_sized<kBackward, 0>(a, kh); break;
  }
}

template <bool kBackward, typename T>
void kv_head_plain(const Rows<T>& a, int64_t kh) {
  kv_head<kBackward>(a, kh);
}

#ifdef GRPO_AVX2_COPY
template <bool kBackward, typename T>
GRPO_TARGET_AVX2 void kv_head_avx2(const Rows<T>& a, int64_t kh) {
  kv_head<kBackward>(a, kh);
}
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

// Every kv head's forward or backward, one thread each.
template <bool kBackward, typename T>
void run_kernel(const Rows<T>& a) {
  at::parallel_for(0, a.KVH, 1, [&](int64_t b, int64_t e) {
    for (int64_t kh = b; kh < e; ++kh) {
#ifdef GRPO_AVX2_COPY
      if (have_avx2_fma()) {
        kv_head_avx2<kBackward>(a, kh);
        continue;
      }
#endif
      kv_head_plain<kBackward>(a, kh);
    }
  });
}

template <typename T>
Rows<T> rows_of(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const std::vector<int64_t>& table,
                double scale) {
  Rows<T> a;
  a.q = q.data_ptr<T>();
  a.k = k.data_ptr<T>();
  a.v = v.data_ptr<T>();
  a.H = q.size(1);
  a.KVH = k.size(1);
  a.D = q.size(2);
  a.scale = T(scale);
  a.seg = table.data();
  a.nseg = int64_t(table.size()) / kStride;
  for (int64_t i = 0; i < a.nseg; ++i)
    a.max_keys = std::max(a.max_keys, table[size_t(i * kStride + 1)] + table[size_t(i * kStride + 3)]);
  return a;
}

// The (query, key) pairs a segment attends, per head: its queries see the prefix and, causally,
// its own tokens.
int64_t segment_pair_count(int64_t len, int64_t prefix_len) { return len * prefix_len + len * (len + 1) / 2; }

// The pairs of a row, per head: where its last segment's start, plus that segment's.
int64_t row_pairs(const std::vector<int64_t>& table) {
  const size_t n = table.size();
  return n == 0 ? 0 : table[n - 1] + segment_pair_count(table[n - kStride + 1], table[n - kStride + 3]);
}

struct Attended {
  torch::Tensor out, lse, probs;  // probs undefined when not kept
};

// out (T, H, D), lse (T, H) and, when `keep`, the probabilities (H, pairs) of contiguous q, k, v.
Attended attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const std::vector<int64_t>& table,
                double scale, bool keep) {
  Attended r;
  r.out = torch::empty_like(q);
  r.lse = torch::empty({q.size(0), q.size(1)}, q.options());
  const int64_t pairs = row_pairs(table);
  if (keep) r.probs = torch::empty({q.size(1), pairs}, q.options());
  auto run = [&](auto tag) {
    using T = decltype(tag);
    auto a = rows_of<T>(q, k, v, table, scale);
    a.o = r.out.data_ptr<T>();
    a.lse = r.lse.data_ptr<T>();
    if (keep) a.probs = r.probs.data_ptr<T>(), a.pairs = pairs;
    run_kernel<false>(a);
  };
  with_float_type(q.scalar_type() == torch::kFloat64, run);
  return r;
}

struct SegmentAttentionFunction : torch::autograd::Function<SegmentAttentionFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, std::vector<int64_t> table, double scale, bool keep) {
    auto r = attend(q, k, v, table, scale, keep);
    ctx->save_for_backward({q, k, v, r.out, r.lse, keep ? r.probs : torch::Tensor()});
    ctx->saved_data["segments"] = std::move(table);
    ctx->saved_data["scale"] = scale;
    return r.out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined())
      return {torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
    auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4], &probs = saved[5];
    const std::vector<int64_t> table = ctx->saved_data["segments"].toIntVector();
    const double scale = ctx->saved_data["scale"].toDouble();
    auto dout = grads[0].contiguous();
    // Every row of dq is written (each token is one segment's query); dk and dv are added into.
    auto dq = torch::empty_like(q), dk = torch::zeros_like(k), dv = torch::zeros_like(v);
    auto run = [&](auto tag) {
      using T = decltype(tag);
      auto a = rows_of<T>(q, k, v, table, scale);
      a.out = out.data_ptr<T>();
      a.dout = dout.data_ptr<T>();
      a.lse_in = lse.data_ptr<T>();
      if (probs.defined()) a.probs = probs.data_ptr<T>(), a.pairs = probs.size(1);
      a.dq = dq.data_ptr<T>();
      a.dk = dk.data_ptr<T>();
      a.dv = dv.data_ptr<T>();
      run_kernel<true>(a);
    };
    with_float_type(q.scalar_type() == torch::kFloat64, run);
    return {dq, dk, dv, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool segment_kernel_supports(torch::Dtype dtype, torch::Device device, int64_t head_dim, double softcap) {
  return device.is_cpu() && (dtype == torch::kFloat32 || dtype == torch::kFloat64) && head_dim > 0 &&
         head_dim <= kMaxHeadDim && !(softcap > 0);
}

torch::Tensor segment_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const std::vector<AttentionSegment>& segments, double scale, double keep_ratio) {
  check(q.dim() == 3 && k.dim() == 3 && v.sizes() == k.sizes() && q.size(0) == k.size(0) && q.size(2) == k.size(2) &&
            k.size(1) > 0 && q.size(1) % k.size(1) == 0,
        "segment attention", "expected q (T, H, D) and k, v (T, KVH, D) with H a multiple of KVH");
  check(segment_kernel_supports(q.scalar_type(), q.device(), q.size(2)) && k.scalar_type() == q.scalar_type() &&
            v.scalar_type() == q.scalar_type() && k.device() == q.device() && v.device() == q.device(),
        "segment attention",
        "expected fp32 or fp64 CPU tensors of one dtype, heads of at most " + std::to_string(kMaxHeadDim));
  check_segments(segments, q.size(0));  // the loops index the row with them, and write every token's output
  std::vector<int64_t> table;
  table.reserve(segments.size() * kStride);
  int64_t pairs = 0;
  for (const auto& s : segments) {
    table.insert(table.end(), {s.begin, s.len, s.prefix_begin, s.prefix_len, pairs});
    pairs += segment_pair_count(s.len, s.prefix_len);
  }
  auto qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
  if (!torch::GradMode::is_enabled() || (!q.requires_grad() && !k.requires_grad() && !v.requires_grad()))
    return attend(qc, kc, vc, table, scale, false).out;
  const bool keep = double(q.size(1)) * double(pairs) <= keep_ratio * double(q.numel());
  return SegmentAttentionFunction::apply(qc, kc, vc, std::move(table), scale, keep);
}

}  // namespace grpo::model
