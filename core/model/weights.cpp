// Checkpoint load (name + shape match, dtype conversion) and save_pretrained.
#include "core/model/weights.h"

#include <cstring>
#include <filesystem>
#include <set>

#include <torch/torch.h>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/strings.h"
#include "core/io/safetensors.h"

namespace grpo::model {

torch::Dtype torch_dtype_of(io::DType d, const std::string& context) {
  switch (d) {
    case io::DType::F32: return torch::kFloat32;
    case io::DType::F16: return torch::kFloat16;
    case io::DType::BF16: return torch::kBFloat16;
    case io::DType::F64: return torch::kFloat64;
    default:
      throw Error(context, std::string("dtype ") + io::dtype_name(d) + " is not supported for weights",
                  "expected F32, F16 or BF16");
  }
}

io::DType safetensors_dtype_of(torch::Dtype d) {
  switch (d) {
    case torch::kFloat32: return io::DType::F32;
    case torch::kFloat16: return io::DType::F16;
    case torch::kBFloat16: return io::DType::BF16;
    case torch::kFloat64: return io::DType::F64;
    default: throw Error("save", "unsupported tensor dtype for safetensors");
  }
}

const char* hf_dtype_name(torch::Dtype d) {
  switch (d) {
    case torch::kFloat16: return "float16";
    case torch::kBFloat16: return "bfloat16";
    case torch::kFloat64: return "float64";
    default: return "float32";
  }
}

std::string shape_string(c10::IntArrayRef shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

torch::Tensor read_tensor(const io::SafetensorsFile& file, const io::TensorInfo& info) {
  auto dt = torch_dtype_of(info.dtype, file.path() + ": tensor " + info.name);
  const uint8_t* p = file.data(info);
  const size_t esize = io::dtype_size(info.dtype);
  auto opts = torch::TensorOptions().dtype(dt);
  if (reinterpret_cast<uintptr_t>(p) % esize == 0)
    return torch::from_blob(const_cast<uint8_t*>(p), info.shape, opts);  // view into the mapping
  auto t = torch::empty(info.shape, opts);
  std::memcpy(t.data_ptr(), p, info.nbytes());
  return t;
}

void load_weights(CausalLMImpl& model, const io::Checkpoint& ckpt) {
  const std::string hint = "wrong base model?";
  auto params = model.named_base_parameters();
  std::set<std::string> expected;
  for (const auto& item : params) expected.insert(item.key());
  // Names the checkpoint may carry that the model does not need.
  auto ignorable = [&](const std::string& n) {
    return ends_with(n, "rotary_emb.inv_freq") || (model.tied() && n == "lm_head.weight");
  };
  for (const auto& name : ckpt.tensor_names()) {
    if (expected.count(name) || ignorable(name)) continue;
    auto e = ckpt.find(name);
    std::vector<std::string> names(expected.begin(), expected.end());
    std::string near = nearest_name(name, names);
    throw Error(e ? e->file->path() : ckpt.dir(), "unexpected tensor " + name,
                near.empty() ? hint : hint + " (closest expected name: " + near + ")");
  }
  torch::NoGradGuard no_grad;
  for (auto& item : params) {
    const auto& name = item.key();
    auto e = ckpt.find(name);
    if (!e) throw Error(ckpt.dir(), "missing tensor " + name, hint);
    auto& param = item.value();
    if (e->info->shape != param.sizes().vec())
      throw Error(e->file->path(),
                  "tensor " + name + ": shape " + shape_string(e->info->shape) + ", expected " +
                      shape_string(param.sizes()),
                  hint);
    param.copy_(read_tensor(*e->file, *e->info));  // converts dtype and device
  }
}

CausalLM from_pretrained(const std::string& dir, torch::Dtype dtype, torch::Device device) {
  auto ckpt = io::Checkpoint::open(dir);
  auto cfg = ckpt.config();
  if (cfg.name_or_path.empty()) cfg.name_or_path = dir;
  CausalLM model(CausalLMOptions(cfg).dtype(dtype).device(device).init_weights(false));
  load_weights(*model, ckpt);
  return model;
}

void save_pretrained(const CausalLMImpl& model, const std::string& dir, std::optional<torch::Dtype> dtype) {
  const auto dt = dtype.value_or(model.dtype());
  std::filesystem::create_directories(dir);
  std::vector<torch::Tensor> keep;
  std::vector<io::TensorView> views;
  for (const auto& item : model.named_base_parameters()) {
    auto t = item.value().detach().to(torch::kCPU, dt).contiguous();
    keep.push_back(t);
    views.push_back({item.key(), safetensors_dtype_of(dt), t.sizes().vec(), t.data_ptr(),
                     uint64_t(t.numel() * t.element_size())});
  }
  io::write_safetensors(path_join(dir, "model.safetensors"), views, {{"format", "pt"}});
  auto cfg = model.config();
  cfg.torch_dtype = hf_dtype_name(dt);
  write_file_atomic(path_join(dir, "config.json"), cfg.to_json().dump(2) + "\n");
}

}  // namespace grpo::model
