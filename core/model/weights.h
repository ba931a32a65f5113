// Base-model weights on disk: load a CausalLM from a Hugging Face checkpoint directory (a name
// match with shape checks, F32/F16/BF16 converted to the compute dtype) and save one back as
// config.json + model.safetensors with HF names (tied models have no lm_head.weight).
#pragma once

#include <optional>
#include <string>

#include <torch/types.h>

#include "core/io/hf_config.h"
#include "core/model/causal_lm.h"

namespace grpo::model {

// Copies every base parameter from `checkpoint`. Throws grpo::Error naming the file and tensor
// for a missing tensor, an unexpected one, a shape mismatch or an unsupported dtype.
void load_weights(CausalLMImpl& model, const io::Checkpoint& checkpoint);

// Opens `dir`, builds the model for its config.json and loads it.
CausalLM from_pretrained(const std::string& dir, torch::Dtype dtype = torch::kFloat32,
                         torch::Device device = torch::kCPU);

// Writes `dir`/config.json and `dir`/model.safetensors (atomically; creates `dir`). The base
// weights are stored in `dtype` (default: the model's compute dtype) and config.json's
// torch_dtype says which. A merged adapter is saved merged.
void save_pretrained(const CausalLMImpl& model, const std::string& dir,
                     std::optional<torch::Dtype> dtype = std::nullopt);

// safetensors <-> torch dtype helpers shared with peft_io.
torch::Dtype torch_dtype_of(io::DType d, const std::string& context);
io::DType safetensors_dtype_of(torch::Dtype d);
const char* hf_dtype_name(torch::Dtype d);  // "float32" | "bfloat16" | "float16" | "float64"
// A CPU tensor holding the bytes of `info` in `file` (a zero-copy view when aligned).
torch::Tensor read_tensor(const io::SafetensorsFile& file, const io::TensorInfo& info);
// "[64,128]"
std::string shape_string(c10::IntArrayRef shape);

}  // namespace grpo::model
