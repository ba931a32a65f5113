// The default random generators' states as tensors, and back: the CPU generator (LoRA dropout,
// random init) and a GPU's own (dropout masks of CUDA tensors). Used by gradient checkpointing
// (a recomputed block draws the same masks) and run checkpoints (rng.pt, rng_cuda.pt).
// Each call holds the generator's own lock, as torch.get_rng_state()/set_rng_state() do.
// Torch TUs only: this header includes ATen.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace grpo::model {

at::Generator default_generator(const c10::Device& device);
at::Tensor generator_state(const c10::Device& device);
void set_generator_state(const c10::Device& device, const at::Tensor& state);

}  // namespace grpo::model
