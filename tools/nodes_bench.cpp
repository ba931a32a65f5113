// bench_nodes: fused nodes against their composites, interleaved, checked (nodes_bench.h).
#include "tools/nodes_bench.h"

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/common/bench_stats.h"
#include "core/common/blas_threads.h"
#include "core/common/error.h"
#include "core/model/lora_linear.h"
#include "core/model/mlp.h"
#include "core/model/norm.h"

namespace grpo::model {

namespace {

using Clock = std::chrono::steady_clock;

// One node and its composite: each returns the output and the input's gradient of one forward and
// backward with a fixed output gradient.
struct Pair {
  std::string name;
  std::function<std::vector<torch::Tensor>()> fused, composite;
};

LoraLinear frozen_base_layer(int64_t in, int64_t out, int64_t r, bool bias) {
  LoraLinear l{LoraLinearOptions(in, out).bias(bias)};
  l->reset_parameters(0.02);
  l->add_lora(r, 2.0, 0.0);  // lora_alpha = 2r
  torch::NoGradGuard g;
  l->lora_B->weight.normal_(0.0, 0.02);  // a trained adapter, not PEFT's B = 0
  l->weight.set_requires_grad(false);
  if (bias) l->bias.set_requires_grad(false);
  l->train();
  return l;
}

// Forward, backward against fixed gradients; the outputs and x's gradient, detached.
std::vector<torch::Tensor> run_backward(const torch::Tensor& x, const std::vector<torch::Tensor>& ys,
                                        const std::vector<torch::Tensor>& dys) {
  x.mutable_grad() = torch::Tensor();
  torch::autograd::backward(ys, dys);
  std::vector<torch::Tensor> out;
  for (const auto& y : ys) out.push_back(y.detach());
  out.push_back(x.grad().detach());
  return out;
}

double rel_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>() / std::max(1.0, b.abs().max().item<double>());
}

}  // namespace

nlohmann::json bench_nodes(const NodesBenchOptions& o) {
  check(o.rows >= 1 && o.rows <= 1'000'000, "bench nodes", "--rows must be in [1, 1000000]");
  for (int64_t v : {o.hidden, o.intermediate, o.q_dim, o.kv_dim})
    check(v >= 1 && v <= 16384, "bench nodes", "--hidden, --intermediate, --q-dim and --kv-dim must be in [1, 16384]");
  check(o.lora_r >= 1 && o.lora_r <= 1024, "bench nodes", "--lora-r must be in [1, 1024]");
  check(o.iters >= 1 && o.iters <= 100000, "bench nodes", "--iters must be in [1, 100000]");
  if (o.threads > 0) {
    torch::set_num_threads(o.threads);
    set_blas_threads(o.threads);
  }
  torch::manual_seed(0);
  const int64_t N = o.rows, C = o.hidden, I = o.intermediate, r = o.lora_r;
  auto input = [&](int64_t width) { return torch::randn({1, N, width}).requires_grad_(true); };
  auto grad = [&](int64_t width) { return torch::randn({1, N, width}); };

  auto q = frozen_base_layer(C, o.q_dim, r, true), k = frozen_base_layer(C, o.kv_dim, r, true),
       v = frozen_base_layer(C, o.kv_dim, r, true);
  auto gate = frozen_base_layer(C, I, r, false), up = frozen_base_layer(C, I, r, false);
  auto down = frozen_base_layer(I, C, r, false);
  RMSNorm norm{RMSNormOptions(C).eps(1e-6)};
  {
    torch::NoGradGuard g;
    norm->weight.uniform_(0.5, 1.5);
  }
  norm->weight.set_requires_grad(false);

  auto x = input(C), xi = input(I), gu = input(I);
  const std::vector<torch::Tensor> d_qkv{grad(o.q_dim), grad(o.kv_dim), grad(o.kv_dim)}, d_gu{grad(I), grad(I)},
      d_c{grad(C)}, d_i{grad(I)};
  std::vector<Pair> pairs;
  pairs.push_back({"lora_qkv",
                   [&] { return run_backward(x, lora_linear_group(x, {q.get(), k.get(), v.get()}), d_qkv); },
                   [&] {
                     return run_backward(x, {q->forward_composite(x), k->forward_composite(x), v->forward_composite(x)},
                                         d_qkv);
                   }});
  pairs.push_back({"lora_gate_up", [&] { return run_backward(x, lora_linear_group(x, {gate.get(), up.get()}), d_gu); },
                   [&] { return run_backward(x, {gate->forward_composite(x), up->forward_composite(x)}, d_gu); }});
  pairs.push_back({"lora_down", [&] { return run_backward(xi, {down->forward(xi)}, d_c); },
                   [&] { return run_backward(xi, {down->forward_composite(xi)}, d_c); }});
  pairs.push_back({"rmsnorm", [&] { return run_backward(x, {norm->forward(x)}, d_c); },
                   [&] {
                     auto y = norm->weight * (x * torch::rsqrt(x.pow(2).mean(-1, true) + 1e-6));
                     return run_backward(x, {y}, d_c);
                   }});
  pairs.push_back({"swiglu", [&] { return run_backward(xi, {swiglu(xi, gu)}, d_i); },
                   [&] { return run_backward(xi, {torch::silu(xi) * gu}, d_i); }});

  nlohmann::json nodes = nlohmann::json::object();
  double fused_total = 0, composite_total = 0;
  for (auto& p : pairs) {
    // Checked once: every output and the input's gradient.
    auto a = p.fused(), b = p.composite();
    double diff = 0;
    for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, rel_diff(a[i], b[i]));
    check(diff <= 1e-4, "bench nodes",
          p.name + ": the fused node differs from the composite by " + std::to_string(diff) + " (relative)",
          "at most 1e-4 in fp32");
    std::vector<double> tf, tc;
    for (int i = 0; i < o.iters; ++i) {
      for (int side = 0; side < 2; ++side) {  // alternate which side runs first
        const bool fused_side = (side == 0) == (i % 2 == 0);
        auto t0 = Clock::now();
        (fused_side ? p.fused : p.composite)();
        (fused_side ? tf : tc).push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      }
    }
    const double f = median(tf), c = median(tc);
    fused_total += f;
    composite_total += c;
    nodes[p.name] = {{"fused_ms", f * 1e3}, {"composite_ms", c * 1e3}, {"speedup", c / f}, {"max_rel_diff", diff}};
  }
  return {{"nodes", nodes},
          {"speedup", composite_total / fused_total},
          {"folded", lora_group_merges(N, torch::kFloat32, {q.get(), k.get(), v.get()})},
          {"rows", N},
          {"hidden", C},
          {"intermediate", I},
          {"lora_r", r},
          {"threads", torch::get_num_threads()},
          {"iters", o.iters}};
}

}  // namespace grpo::model
