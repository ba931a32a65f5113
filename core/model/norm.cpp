// RMSNorm: x * rsqrt(mean(x^2) + eps) computed in the accumulate dtype, then weight * x.
#include "core/model/norm.h"

#include <torch/torch.h>

namespace grpo::model {

RMSNormImpl::RMSNormImpl(const RMSNormOptions& options) : eps_(options.eps()), offset_one_(options.offset_one()) {
  weight = register_parameter(
      "weight", torch::full({options.dim()}, neutral_weight(),
                            torch::TensorOptions().dtype(options.dtype()).device(options.device())));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  auto in_dtype = x.scalar_type();
  auto h = x.to(accumulate_dtype(in_dtype));                    // (..., dim)
  auto inv_rms = torch::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true).add_(eps_));  // (..., 1)
  if (offset_one_) return ((h * inv_rms) * (weight.to(h.scalar_type()) + 1.0)).to(in_dtype);
  return weight * (h * inv_rms).to(in_dtype);
}

}  // namespace grpo::model
