// bench_forward: GEMM peak, prefill and LoRA fwd+bwd timing, FLOP accounting, MFU.
#include "core/common/bench_stats.h"
#include "tools/forward_bench.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include <optional>

#include <torch/torch.h>

#include "core/common/blas_kernels.h"
#include "core/common/error.h"
#include "core/model/causal_lm.h"
#include "core/model/flops.h"
#include "core/model/weights.h"

namespace grpo::model {

io::ModelConfig bench_model_config(const std::string& size) {
  io::ModelConfig c;
  c.model_type = "qwen2";
  c.name_or_path = "generated-" + size;
  c.rope_theta = 1e6;
  c.rms_norm_eps = 1e-6;
  c.tie_word_embeddings = true;
  c.torch_dtype = "float32";
  auto set = [&](int64_t hidden, int64_t layers, int64_t heads, int64_t kv, int64_t inter, int64_t vocab) {
    c.hidden_size = hidden;
    c.num_hidden_layers = layers;
    c.num_attention_heads = heads;
    c.num_key_value_heads = kv;
    c.head_dim = hidden / heads;
    c.intermediate_size = inter;
    c.vocab_size = vocab;
    c.max_position_embeddings = 4096;
  };
  if (size == "tiny") set(64, 2, 4, 2, 128, 300);
  else if (size == "25m") set(512, 8, 8, 4, 1408, 8192);      // 27.8M params (tied)
  else if (size == "100m") set(768, 12, 12, 4, 2048, 32000);  // 100.1M params (tied)
  else throw Error("bench", "unknown model size '" + size + "'", "known sizes: tiny, 25m, 100m");
  return c;
}

namespace {

using Clock = std::chrono::steady_clock;

void sync(const torch::Tensor& t) { (void)t.sum().item<double>(); }

// Median seconds of fn() over `iters` runs (at least one) after one warm-up; iters = 0: one
// run, no warm-up.
template <class F>
double time_median(int iters, F&& fn) {
  if (iters > 0) fn();
  std::vector<double> times;
  for (int i = 0; i < std::max(1, iters); ++i) {
    auto t0 = Clock::now();
    fn();
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return median(times);
}

}  // namespace

c10::Device bench_device(const std::string& name, const std::string& context) {
  std::optional<torch::Device> device;
  try {
    device = torch::Device(name);
  } catch (const c10::Error&) {
  }
  check(device && (device->is_cpu() || device->is_cuda()), context,
        "--device is '" + name + "', expected cpu, cuda or cuda:N");
  if (device->is_cpu()) return *device;
  check(torch::cuda::is_available(), context, "--device " + name + ": LibTorch sees no CUDA device",
        "this LibTorch is built for CPU only, or the NVIDIA driver is missing (nvidia-smi); build against "
        "PyTorch's CUDA LibTorch with scripts/gpu_check.sh");
  check(!device->has_index() || device->index() < int(torch::cuda::device_count()), context,
        "--device " + name + ": only " + std::to_string(torch::cuda::device_count()) + " CUDA device(s)");
  return *device;
}

nlohmann::json bench_forward(const ForwardBenchOptions& o) {
  if (o.threads > 0) torch::set_num_threads(o.threads);
  const int default_threads = torch::get_num_threads();
  const torch::Device device = bench_device(o.device, "bench forward");
  torch::Dtype dtype = o.dtype.empty() ? default_compute_dtype(device)
                       : o.dtype == "bfloat16"  ? torch::kBFloat16
                       : o.dtype == "float16"   ? torch::kFloat16
                                                : torch::kFloat32;
  torch::manual_seed(0);

  CausalLM model{nullptr};
  if (!o.model_dir.empty()) model = from_pretrained(o.model_dir, dtype, device);
  else model = CausalLM(CausalLMOptions(bench_model_config(o.size)).dtype(dtype).device(device));
  const auto& c = model->config();
  LoraConfig lora;
  lora.r = o.lora_r;
  lora.lora_alpha = double(2 * o.lora_r);
  model->add_lora(lora);

  // FLOP accounting (core/model/flops.h): every position of the sequence reaches the LM head here.
  const ModelFlops flops = count_flops(*model);
  const double f_fwd = flops.forward(o.seq_len, o.seq_len) / double(o.seq_len);
  const double f_lora = flops.lora_fwd_bwd(o.seq_len, o.seq_len) / double(o.seq_len);
  const double f_full = flops.full_fine_tune(o.seq_len) / double(o.seq_len);

  auto ids = torch::randint(c.vocab_size, {o.batch, o.seq_len},
                            torch::TensorOptions().dtype(torch::kInt64).device(device));
  const double tokens = double(o.batch * o.seq_len);

  auto prefill = [&] {
    model->eval();
    torch::InferenceMode guard;
    ForwardArgs args;
    args.last_only = true;
    sync(model->forward(ids, args));
  };
  // threads = 0 on a CPU: try LibTorch's default and one thread, keep the faster. On a machine
  // whose cores are shared with other work, OpenMP's barriers make the default far slower.
  bool auto_threads = false;
  if (o.threads <= 0 && !device.is_cuda() && default_threads > 1) {
    auto_threads = true;
    prefill();  // warm-up
    double best = 1e30;
    int best_threads = default_threads;
    for (int t : {default_threads, 1}) {
      torch::set_num_threads(t);
      double s = time_median(1, prefill);
      if (s < best) best = s, best_threads = t;
    }
    torch::set_num_threads(best_threads);
  }

  GemmProbe gemm(device, device.is_cuda() ? dtype : torch::kFloat32);
  const double prefill_s = time_median(o.iters, prefill);

  model->train();
  auto targets = torch::roll(ids, -1, 1).reshape({-1});
  auto params = model->lora_parameters();
  auto train_step = [&] {
    for (auto& p : params) p.mutable_grad() = torch::Tensor();
    auto logits = model->forward(ids);  // (B, T, V) fp32
    auto loss = torch::nll_loss(torch::log_softmax(logits.view({-1, c.vocab_size}), -1), targets);
    loss.backward();
    sync(params.back().grad());
  };
  // The GEMM probe runs interleaved with the training steps (a few probes per step), so that
  // both see the same machine state; on a shared machine that is what makes their ratio stable.
  gemm.run();
  train_step();
  std::vector<double> gemm_times, train_times;
  for (int i = 0; i < std::max(1, o.iters); ++i) {
    for (int k = 0; k < 3; ++k) gemm_times.push_back(time_median(0, [&] { gemm.run(); }));
    train_times.push_back(time_median(0, train_step));
  }
  const double peak = gemm.flops() / median(gemm_times) / 1e9;
  const double train_s = median(train_times);

  const double train_tok_s = tokens / train_s;
  int64_t lora_params = 0;
  for (auto& p : params) lora_params += p.numel();
  return {
      {"model", o.model_dir.empty() ? "generated-" + o.size : o.model_dir},
      {"device", o.device},
      {"dtype", hf_dtype_name(dtype)},
      {"threads", torch::get_num_threads()},
      {"threads_auto", auto_threads},
      {"params", model->num_base_parameters()},
      {"lora_params", lora_params},
      {"lora_r", o.lora_r},
      {"seq_len", o.seq_len},
      {"batch", o.batch},
      {"gemm_gflops", peak},
      {"blas", blas_description()},
      {"prefill_s", prefill_s},
      {"prefill_tok_s", tokens / prefill_s},
      {"lora_fwd_bwd_s", train_s},
      {"lora_fwd_bwd_tok_s", train_tok_s},
      {"flops_per_token_fwd", f_fwd},
      {"flops_per_token_lora_fwd_bwd", f_lora},
      {"flops_per_token_full_ft", f_full},
      {"prefill_gflops", tokens / prefill_s * f_fwd / 1e9},
      {"lora_fwd_bwd_gflops", train_tok_s * f_lora / 1e9},
      {"mfu", train_tok_s * f_lora / (peak * 1e9)},
  };
}

}  // namespace grpo::model
