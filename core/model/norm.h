// RMSNorm as Hugging Face's LlamaRMSNorm / Qwen2RMSNorm: normalise in fp32 (or the wider compute
// dtype), cast back, then scale by "weight".
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
  TORCH_ARG(torch::Dtype, dtype) = torch::kFloat32;
  TORCH_ARG(torch::Device, device) = torch::Device(torch::kCPU);
};

class RMSNormImpl : public torch::nn::Module {
public:
  explicit RMSNormImpl(const RMSNormOptions& options);
  torch::Tensor forward(const torch::Tensor& x);  // (..., dim) -> (..., dim)
  torch::Tensor weight;                           // (dim)
private:
  double eps_;
};
TORCH_MODULE(RMSNorm);

// The dtype reductions run in: fp32 for half types, the dtype itself otherwise.
inline torch::Dtype accumulate_dtype(torch::Dtype d) {
  return (d == torch::kBFloat16 || d == torch::kFloat16) ? torch::kFloat32 : d;
}

}  // namespace grpo::model
