// bench_generate: builds the model and the prompts, times Sampler::generate with and without
// prefix sharing, reports tokens/s.
#include "core/common/bench_stats.h"
#include "tools/generate_bench.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include <torch/torch.h>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/model/causal_lm.h"
#include "tools/forward_bench.h"
#include "core/model/weights.h"
#include "core/rollout/sampler.h"

namespace grpo::rollout {
namespace {

using Clock = std::chrono::steady_clock;

// Deterministic prompts: lengths spread evenly over [lo, hi], ids uniform in [1, vocab).
std::vector<std::vector<int64_t>> make_prompts(int64_t count, int64_t lo, int64_t hi, int64_t vocab) {
  torch::Generator gen = at::detail::createCPUGenerator(1234);
  std::vector<std::vector<int64_t>> out;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t len = count > 1 ? lo + (hi - lo) * i / (count - 1) : hi;
    auto ids = torch::randint(1, vocab, {len}, gen, torch::kInt64);
    out.emplace_back(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + len);
  }
  return out;
}

}  // namespace

nlohmann::json bench_generate(const GenerateBenchOptions& o) {
  check(o.prompts >= 1 && o.group >= 1 && o.max_tokens >= 1, "bench generate",
        "prompts, group and max_tokens must be >= 1");
  check(o.prompt_min >= 1 && o.prompt_max >= o.prompt_min, "bench generate",
        "need 1 <= prompt_min <= prompt_max");
  if (o.threads > 0) torch::set_num_threads(o.threads);
  torch::manual_seed(0);

  const torch::Device device = model::bench_device(o.device, "bench generate");
  const torch::Dtype dtype = model::default_compute_dtype(device);
  model::CausalLM m{nullptr};
  if (!o.model_dir.empty()) {
    check(is_directory(o.model_dir), o.model_dir, "no such model directory",
          "give a Hugging Face model folder, or --size for a generated model");
    m = model::from_pretrained(o.model_dir, dtype, device);
  } else {
    m = model::CausalLM(model::CausalLMOptions(model::bench_model_config(o.size)).dtype(dtype).device(device));
  }
  const auto& c = m->config();
  // Keep prompt + completion within the model's context.
  int64_t hi = o.prompt_max, lo = o.prompt_min;
  if (c.max_position_embeddings > 0 && hi + o.max_tokens > c.max_position_embeddings) {
    hi = std::max<int64_t>(1, c.max_position_embeddings - o.max_tokens);
    lo = std::min(lo, hi);
  }
  auto prompts = make_prompts(o.prompts, lo, hi, c.vocab_size);
  double len_sum = 0;
  for (const auto& p : prompts) len_sum += double(p.size());

  SamplingParams sp;
  sp.temperature = o.temperature;
  sp.max_tokens = o.max_tokens;  // no stop ids: every completion runs max_tokens
  sp.seed = 7;
  Sampler sampler(m);

  // Warm-up: a small call so allocator and thread pools are up before timing.
  {
    SamplingParams w = sp;
    w.max_tokens = std::min<int64_t>(4, o.max_tokens);
    sampler.generate({prompts.front()}, std::min<int64_t>(2, o.group), w, true);
  }
  std::vector<std::vector<Completion>> shared_out, unshared_out;
  auto timed = [&](bool share, std::vector<std::vector<Completion>>& out) {
    std::vector<double> times;
    for (int i = 0; i < std::max(1, o.iters); ++i) {
      auto t0 = Clock::now();
      out = sampler.generate(prompts, o.group, sp, share);
      times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    return median(times);
  };
  const double shared_s = timed(true, shared_out);
  const double unshared_s = timed(false, unshared_out);

  int64_t generated = 0, same = 0;
  for (size_t p = 0; p < shared_out.size(); ++p)
    for (size_t g = 0; g < shared_out[p].size(); ++g) {
      generated += int64_t(shared_out[p][g].token_ids.size());
      same += shared_out[p][g].token_ids == unshared_out[p][g].token_ids ? 1 : 0;
    }
  check(generated == o.prompts * o.group * o.max_tokens, "bench generate",
        "expected fixed-length completions, got " + std::to_string(generated) + " tokens");
  const double tokens = double(generated);
  return {
      {"model", o.model_dir.empty() ? "generated-" + o.size : o.model_dir},
      {"params", m->num_base_parameters()},
      {"threads", torch::get_num_threads()},
      {"device", device.str()},
      {"dtype", model::hf_dtype_name(dtype)},
      {"prompts", o.prompts},
      {"group", o.group},
      {"prompt_len_min", lo},
      {"prompt_len_max", hi},
      {"prompt_len_mean", len_sum / double(prompts.size())},
      {"max_tokens", o.max_tokens},
      {"temperature", o.temperature},
      {"tokens_generated", generated},
      {"shared_s", shared_s},
      {"unshared_s", unshared_s},
      {"tok_s", tokens / shared_s},
      {"tok_s_unshared", tokens / unshared_s},
      {"speedup_shared", unshared_s / shared_s},
      {"outputs_match_frac", double(same) / double(o.prompts * o.group)},
  };
}

}  // namespace grpo::rollout
