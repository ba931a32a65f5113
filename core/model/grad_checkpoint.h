// Gradient checkpointing (activation recomputation): run a block of the forward pass without
// keeping its intermediate activations, and recompute them during backward. Memory for the
// block's activations drops to its input; the cost is one extra forward of the block.
//
// Same scheme as PyTorch's reentrant torch.utils.checkpoint: the block runs under no_grad in
// forward; backward re-runs it with grad enabled from the saved input and calls
// torch::autograd::backward on it, which accumulates the parameters' gradients into their
// .grad as a side effect and yields the input's gradient. So it suits loss.backward() (what the
// trainer does), not torch::autograd::grad over parameters. The CPU random state is saved and
// restored so dropout draws the same masks in the recompute.
#pragma once

#include <functional>

#include <torch/types.h>

namespace grpo::model {

// Returns block(input) with the block's activations recomputed in backward. When grad mode is
// off, or nothing requires grad, it is just block(input).
torch::Tensor checkpointed(const std::function<torch::Tensor(const torch::Tensor&)>& block,
                           const torch::Tensor& input);

}  // namespace grpo::model
