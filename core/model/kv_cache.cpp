// KVCache: preallocated per-layer storage, slice appends, row selection for group expansion.
#include "core/model/kv_cache.h"

#include <algorithm>

#include <torch/torch.h>

#include "core/common/error.h"

namespace grpo::model {

KVCache::KVCache(int64_t num_layers, int64_t reserve)
    : reserve_(reserve), keys_(size_t(num_layers)), values_(size_t(num_layers)) {}

torch::Tensor KVCache::token_counts() const {
  if (!valid_.defined()) return {};
  return valid_.sum(1, /*keepdim=*/false, torch::kInt64);  // (B)
}

std::pair<torch::Tensor, torch::Tensor> KVCache::append(int64_t layer, const torch::Tensor& k,
                                                        const torch::Tensor& v) {
  check(layer >= 0 && layer < num_layers(), "KVCache", "layer " + std::to_string(layer) + " out of range");
  const int64_t B = k.size(0), KVH = k.size(1), T = k.size(2), D = k.size(3);
  check(!valid_.defined() || valid_.size(0) == B, "KVCache",
        "batch of " + std::to_string(B) + " rows, cache holds " + std::to_string(batch_size()),
        "expand_rows/select_rows the cache to match the batch");
  auto& K = keys_[size_t(layer)];
  auto& V = values_[size_t(layer)];
  const int64_t need = length_ + T;
  if (!K.defined() || K.size(2) < need || K.size(0) != B) {
    int64_t cap = std::max(need, reserve_);
    if (K.defined()) cap = std::max(cap, 2 * K.size(2));
    auto nk = torch::empty({B, KVH, cap, D}, k.options());  // (B, KVH, cap, D)
    auto nv = torch::empty({B, KVH, cap, D}, v.options());
    if (K.defined() && length_ > 0) {
      nk.narrow(2, 0, length_).copy_(K.narrow(2, 0, length_));
      nv.narrow(2, 0, length_).copy_(V.narrow(2, 0, length_));
    }
    K = nk;
    V = nv;
  }
  K.narrow(2, length_, T).copy_(k);
  V.narrow(2, length_, T).copy_(v);
  return {K.narrow(2, 0, need), V.narrow(2, 0, need)};  // (B, KVH, length+T, D)
}

void KVCache::advance(const torch::Tensor& new_valid) {
  auto nv = new_valid.to(torch::kBool);  // (B, T)
  valid_ = valid_.defined() ? torch::cat({valid_, nv}, 1) : nv;
  length_ += nv.size(1);
}

void KVCache::select_rows(const torch::Tensor& index) {
  if (!valid_.defined()) return;
  auto idx = index.to(valid_.device(), torch::kInt64);
  valid_ = valid_.index_select(0, idx);
  for (size_t l = 0; l < keys_.size(); ++l) {
    if (!keys_[l].defined()) continue;
    // Keep the capacity so decoding continues without regrowing.
    keys_[l] = keys_[l].index_select(0, idx.to(keys_[l].device()));
    values_[l] = values_[l].index_select(0, idx.to(values_[l].device()));
  }
}

void KVCache::expand_rows(int64_t G) {
  check(G >= 1, "KVCache", "expand_rows: G must be >= 1, got " + std::to_string(G));
  if (!valid_.defined() || G == 1) return;
  auto idx = torch::arange(batch_size(), torch::TensorOptions().dtype(torch::kInt64).device(valid_.device()))
                 .repeat_interleave(G);  // (B*G)
  select_rows(idx);
}

void KVCache::clear() {
  length_ = 0;
  valid_ = torch::Tensor();
  for (auto& k : keys_) k = torch::Tensor();
  for (auto& v : values_) v = torch::Tensor();
}

}  // namespace grpo::model
