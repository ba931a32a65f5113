// inspect_model / format_model_summary / compute_logits.
#include "core/model/inspect.h"

#include <set>
#include <sstream>

#include <torch/torch.h>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/strings.h"
#include "core/io/hf_config.h"
#include "core/model/peft_io.h"
#include "core/model/weights.h"

namespace grpo::model {

nlohmann::json inspect_model(const std::string& dir) {
  auto ckpt = io::Checkpoint::open(dir);
  const auto& c = ckpt.config();
  nlohmann::json raw;
  try {
    raw = nlohmann::json::parse(read_file(path_join(dir, "config.json")));
  } catch (const nlohmann::json::exception&) {
  }
  std::string arch;
  if (raw.contains("architectures") && raw["architectures"].is_array() && !raw["architectures"].empty())
    arch = raw["architectures"][0].get<std::string>();
  int64_t params = 0;
  uint64_t bytes = 0;
  std::set<std::string> dtypes, files;
  for (const auto& name : ckpt.tensor_names()) {
    auto e = ckpt.find(name);
    if (!e) continue;
    params += e->info->numel();
    bytes += e->info->nbytes();
    dtypes.insert(io::dtype_name(e->info->dtype));
    files.insert(e->file->path());
  }
  const int64_t head_dim = c.head_dim ? c.head_dim : c.hidden_size / std::max<int64_t>(1, c.num_attention_heads);
  nlohmann::json rope = {{"theta", c.rope_theta}, {"type", "default"}};
  if (c.rope_scaling && c.rope_scaling->rope_type != "default") {
    const auto& s = *c.rope_scaling;
    rope["type"] = s.rope_type;
    rope["factor"] = s.factor;
    if (s.rope_type == "llama3") {
      rope["low_freq_factor"] = s.low_freq_factor;
      rope["high_freq_factor"] = s.high_freq_factor;
    }
    if (s.original_max_position_embeddings > 0) rope["original_max_position_embeddings"] = s.original_max_position_embeddings;
  }
  if (c.rope_local_base_freq) rope["local_theta"] = *c.rope_local_base_freq;
  if (c.partial_rotary_factor != 1.0) rope["partial_rotary_factor"] = c.partial_rotary_factor;
  int64_t sliding_layers = 0;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) sliding_layers += c.is_sliding(i) ? 1 : 0;
  nlohmann::json out = {
      {"architecture", arch},
      {"model_type", c.model_type},
      {"layers", c.num_hidden_layers},
      {"hidden", c.hidden_size},
      {"intermediate", c.intermediate_size},
      {"heads", c.num_attention_heads},
      {"kv_heads", c.num_key_value_heads ? c.num_key_value_heads : c.num_attention_heads},
      {"head_dim", head_dim},
      {"vocab", c.vocab_size},
      {"params", params},
      {"bytes_on_disk", bytes},
      {"dtype_on_disk", dtypes.size() == 1 ? *dtypes.begin() : join({dtypes.begin(), dtypes.end()}, "+")},
      {"torch_dtype", c.torch_dtype},
      {"tied", c.tie_word_embeddings},
      {"rope", rope},
      {"max_position_embeddings", c.max_position_embeddings},
      {"rms_norm_eps", c.rms_norm_eps},
      {"qk_norm", c.qk_norm || c.model_type == "qwen3"},
      {"attention_bias", c.attention_bias || c.model_type == "qwen2"},
      {"files", int64_t(files.size())},
      {"hidden_act", c.hidden_act},
  };
  if (c.sliding_window) {
    out["sliding_window"] = *c.sliding_window;
    out["sliding_layers"] = sliding_layers;
  }
  if (c.attn_logit_softcapping) out["attn_logit_softcapping"] = *c.attn_logit_softcapping;
  if (c.final_logit_softcapping) out["final_logit_softcapping"] = *c.final_logit_softcapping;
  if (c.query_pre_attn_scalar) out["query_pre_attn_scalar"] = *c.query_pre_attn_scalar;
  if (c.fused_qkv) out["fused_projections"] = true;
  return out;
}

std::string format_model_summary(const nlohmann::json& j) {
  auto s = [&](const char* k) { return j.contains(k) ? (j[k].is_string() ? j[k].get<std::string>() : j[k].dump()) : "?"; };
  std::ostringstream o;
  o << s("architecture") << " (" << s("model_type") << ")\n";
  o << "  parameters      " << format_count(j.value("params", 0.0)) << " (" << s("params") << "), "
    << s("dtype_on_disk") << " on disk, " << format_bytes(j.value("bytes_on_disk", 0.0)) << "\n";
  o << "  layers          " << s("layers") << "\n";
  o << "  hidden          " << s("hidden") << ", intermediate " << s("intermediate") << "\n";
  o << "  attention       " << s("heads") << " heads, " << s("kv_heads") << " kv heads, head_dim "
    << s("head_dim") << (j.value("qk_norm", false) ? ", q/k norm" : "")
    << (j.value("attention_bias", false) ? ", q/k/v bias" : "")
    << (j.value("fused_projections", false) ? ", fused qkv_proj and gate_up_proj" : "") << "\n";
  if (j.contains("sliding_window"))
    o << "  sliding window  " << s("sliding_window") << " tokens in " << s("sliding_layers") << " of " << s("layers")
      << " layers\n";
  if (j.contains("attn_logit_softcapping") || j.contains("final_logit_softcapping"))
    o << "  soft-capping    attention " << (j.contains("attn_logit_softcapping") ? s("attn_logit_softcapping") : "none")
      << ", final logits " << (j.contains("final_logit_softcapping") ? s("final_logit_softcapping") : "none") << "\n";
  o << "  vocab           " << s("vocab") << (j.value("tied", false) ? " (tied embeddings)" : " (untied lm_head)") << "\n";
  if (j.contains("rope")) {
    const auto& r = j["rope"];
    o << "  rope            theta " << r.value("theta", 0.0) << ", " << r.value("type", std::string("default"));
    if (r.contains("factor")) o << " factor " << r["factor"].dump();
    if (r.contains("local_theta")) o << " (sliding layers: theta " << r["local_theta"].dump() << ")";
    if (r.contains("partial_rotary_factor")) o << ", on " << r["partial_rotary_factor"].dump() << " of each head";
    o << "\n";
  }
  o << "  max positions   " << s("max_position_embeddings") << "\n";
  return o.str();
}

std::vector<std::vector<float>> compute_logits(const std::string& model_dir, const std::vector<int64_t>& ids,
                                               const std::string& adapter_dir, bool last_only) {
  check(!ids.empty(), "logits", "no input ids");
  auto model = from_pretrained(model_dir, torch::kFloat32, torch::kCPU);
  model->eval();
  const int64_t V = model->config().vocab_size;
  for (auto id : ids)
    check(id >= 0 && id < V, "logits", "token id " + std::to_string(id) + " outside the vocabulary [0, " +
                                           std::to_string(V) + ")");
  if (!adapter_dir.empty()) load_adapter(*model, adapter_dir);
  torch::InferenceMode guard;
  auto input = torch::tensor(ids, torch::kInt64).unsqueeze(0);  // (1, T)
  ForwardArgs args;
  args.last_only = last_only;
  auto logits = model->forward(input, args)[0].contiguous();  // (T or 1, V)
  std::vector<std::vector<float>> out(size_t(logits.size(0)));
  const float* p = logits.data_ptr<float>();
  for (int64_t t = 0; t < logits.size(0); ++t) out[size_t(t)].assign(p + t * V, p + (t + 1) * V);
  return out;
}

}  // namespace grpo::model
