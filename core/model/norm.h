// RMSNorm as Hugging Face's LlamaRMSNorm / Qwen2RMSNorm: normalise in fp32 (or the wider compute
// dtype), cast back, then scale by "weight"; or as GemmaRMSNorm (offset_one): scale by
// (1 + weight) in fp32, then cast back. Gemma's weights start at 0, the others' at 1.
#pragma once

#include <cstdint>

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

namespace grpo::model {

struct RMSNormOptions {
  explicit RMSNormOptions(int64_t dim) : dim_(dim) {}
  TORCH_ARG(int64_t, dim);
  TORCH_ARG(double, eps) = 1e-6;
  TORCH_ARG(bool, offset_one) = false;  // Gemma: x_hat * (1 + weight)
  TORCH_ARG(torch::Dtype, dtype) = torch::kFloat32;
  TORCH_ARG(torch::Device, device) = torch::Device(torch::kCPU);
};

class RMSNormImpl : public torch::nn::Module {
public:
  explicit RMSNormImpl(const RMSNormOptions& options);
  torch::Tensor forward(const torch::Tensor& x);  // (..., dim) -> (..., dim)
  torch::Tensor weight;                           // (dim)
  bool offset_one() const { return offset_one_; }
  // The weight value that makes the norm a plain x / rms(x): 0 for Gemma's, 1 otherwise.
  double neutral_weight() const { return offset_one_ ? 0.0 : 1.0; }
private:
  double eps_;
  bool offset_one_;
};
TORCH_MODULE(RMSNorm);

// The dtype reductions run in: fp32 for half types, the dtype itself otherwise.
inline torch::Dtype accumulate_dtype(torch::Dtype d) {
  return (d == torch::kBFloat16 || d == torch::kFloat16) ? torch::kFloat32 : d;
}

}  // namespace grpo::model
