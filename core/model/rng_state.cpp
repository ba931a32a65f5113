#include "core/model/rng_state.h"

#include <mutex>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>

namespace grpo::model {

at::Generator default_generator(const c10::Device& device) {
  return device.is_cpu() ? at::detail::getDefaultCPUGenerator() : at::globalContext().defaultGenerator(device);
}

at::Tensor generator_state(const c10::Device& device) {
  at::Generator gen = default_generator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_generator_state(const c10::Device& device, const at::Tensor& state) {
  at::Generator gen = default_generator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

}  // namespace grpo::model
