// Gradient checkpointing through a custom autograd Function (see grad_checkpoint.h).
#include "core/model/grad_checkpoint.h"

#include <torch/cuda.h>
#include <torch/torch.h>

#include "core/model/rng_state.h"

namespace grpo::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What backward needs besides the saved input: the block (with the tensors it captured: rope
// tables, masks) and the random state forward started from: the CPU generator's, and on a GPU
// also that device's own generator (LoRA dropout masks of CUDA tensors come from it).
struct BlockHolder : torch::CustomClassHolder {
  std::function<torch::Tensor(const torch::Tensor&)> block;
  torch::Tensor cpu_rng_state;
  torch::Tensor device_rng_state;  // undefined for CPU inputs
};

struct CheckpointFunction : torch::autograd::Function<CheckpointFunction> {
  // `anchor` is a 0-element tensor that requires grad, so that autograd calls backward even
  // when the block's input does not require grad (the first layer's input is a frozen
  // embedding's output while only LoRA factors train).
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor input, torch::Tensor anchor,
                               c10::intrusive_ptr<BlockHolder> holder) {
    holder->cpu_rng_state = generator_state(torch::kCPU);
    if (!input.device().is_cpu()) holder->device_rng_state = generator_state(input.device());
    ctx->save_for_backward({input});
    ctx->saved_data["holder"] = c10::IValue::make_capsule(holder);
    torch::NoGradGuard no_grad;
    return holder->block(input);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    auto holder = ctx->saved_data["holder"].toCapsule();
    auto* h = static_cast<BlockHolder*>(holder.get());
    const bool input_needs_grad = saved[0].requires_grad();
    auto input = saved[0].detach().requires_grad_(input_needs_grad);
    torch::Tensor out;
    {
      const auto outer_cpu = generator_state(torch::kCPU);
      set_generator_state(torch::kCPU, h->cpu_rng_state);
      torch::Tensor outer_device;
      if (h->device_rng_state.defined()) {
        outer_device = generator_state(input.device());
        set_generator_state(input.device(), h->device_rng_state);
      }
      torch::AutoGradMode enable(true);
      out = h->block(input);
      set_generator_state(torch::kCPU, outer_cpu);
      if (outer_device.defined()) set_generator_state(input.device(), outer_device);
    }
    if (out.requires_grad()) torch::autograd::backward({out}, {grad_outputs[0]});
    torch::Tensor grad_input = input_needs_grad ? input.grad() : torch::Tensor();
    return {grad_input, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor checkpointed(const std::function<torch::Tensor(const torch::Tensor&)>& block,
                           const torch::Tensor& input) {
  if (!torch::GradMode::is_enabled()) return block(input);
  auto holder = c10::make_intrusive<BlockHolder>();
  holder->block = block;
  auto anchor = torch::empty({0}, input.options()).requires_grad_(true);
  return CheckpointFunction::apply(input, anchor, holder);
}

}  // namespace grpo::model
