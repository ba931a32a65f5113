#include "core/rollout/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <torch/torch.h>

#include "core/common/error.h"
#include "core/text/tokenizer.h"

namespace grpo::rollout {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

namespace {


// Uniform in (0, 1), a pure function of (seed, prompt key, sample index, step).
double counter_uniform(uint64_t seed, uint64_t key, uint64_t sample, uint64_t step) {
  uint64_t h = splitmix64(seed);
  h = splitmix64(h ^ key);
  h = splitmix64(h ^ sample);
  h = splitmix64(h ^ step);
  return (static_cast<double>(h >> 11) + 0.5) * 0x1.0p-53;
}

// Left-pads token id lists into (P, L) ids and a (P, L) mask.
std::pair<torch::Tensor, torch::Tensor> left_pad(const std::vector<std::vector<int64_t>>& prompts,
                                                 torch::Device device) {
  size_t L = 0;
  for (const auto& p : prompts) L = std::max(L, p.size());
  const int64_t P = static_cast<int64_t>(prompts.size());
  auto ids = torch::zeros({P, static_cast<int64_t>(L)}, torch::kInt64);
  auto mask = torch::zeros({P, static_cast<int64_t>(L)}, torch::kInt64);
  auto ia = ids.accessor<int64_t, 2>();
  auto ma = mask.accessor<int64_t, 2>();
  for (int64_t i = 0; i < P; ++i) {
    const auto& p = prompts[i];
    const size_t off = L - p.size();
    for (size_t j = 0; j < p.size(); ++j) {
      ia[i][off + j] = p[j];
      ma[i][off + j] = 1;
    }
  }
  return {ids.to(device), mask.to(device)};
}

bool ends_with_stop(const std::string& text, const std::vector<std::string>& stops) {
  for (const auto& s : stops)
    if (!s.empty() && text.find(s) != std::string::npos) return true;
  return false;
}

}  // namespace

torch::Tensor processed_logprobs(const torch::Tensor& logits, const SamplingParams& p) {
  const double neg_inf = -std::numeric_limits<double>::infinity();
  auto x = logits.to(torch::kFloat32);  // (R, V)
  if (p.temperature <= 0.0) {            // greedy: a point mass on the argmax
    auto out = torch::full_like(x, neg_inf);
    return out.scatter_(1, x.argmax(1, true), 0.0);
  }
  x = x / p.temperature;
  const int64_t V = x.size(1);
  if (p.top_k > 0 && p.top_k < V) {
    auto kth = std::get<0>(x.topk(p.top_k, 1)).narrow(1, p.top_k - 1, 1);  // (R, 1)
    x = x.masked_fill(x < kth, neg_inf);
  }
  if (p.top_p < 1.0) {
    auto [sorted, idx] = x.sort(1, /*descending=*/true);  // (R, V)
    auto probs = torch::softmax(sorted, 1);
    // Drop a token when the mass before it already reaches top_p (the first always stays).
    auto drop_sorted = (probs.cumsum(1) - probs) >= p.top_p;
    auto drop = torch::zeros_like(drop_sorted).scatter(1, idx, drop_sorted);
    x = x.masked_fill(drop, neg_inf);
  }
  if (p.min_p > 0.0) {
    auto probs = torch::softmax(x, 1);
    auto threshold = probs.amax(1, true) * p.min_p;  // (R, 1)
    x = x.masked_fill(probs < threshold, neg_inf);
  }
  return torch::log_softmax(x, 1);
}

Sampler::Sampler(model::CausalLM model, const text::Tokenizer* tokenizer)
    : model_(std::move(model)), tokenizer_(tokenizer) {}

std::vector<std::vector<Completion>> Sampler::generate(const std::vector<std::vector<int64_t>>& prompts, int64_t n,
                                                       const SamplingParams& params, bool share_prefix,
                                                       const std::vector<uint64_t>& prompt_keys) {
  const std::string ctx = "sampler";
  const int64_t P = static_cast<int64_t>(prompts.size());
  check(n >= 1, ctx, "n must be >= 1");
  check(params.max_tokens >= 1, ctx, "max_tokens must be >= 1");
  check(prompt_keys.empty() || static_cast<int64_t>(prompt_keys.size()) == P, ctx, "one prompt key per prompt");
  check(params.stop.empty() || tokenizer_, ctx, "stop strings need a tokenizer");
  for (const auto& p : prompts) check(!p.empty(), ctx, "empty prompt", "every prompt needs at least one token");
  std::vector<std::vector<Completion>> out(P, std::vector<Completion>(n));
  if (P == 0) return out;

  torch::NoGradGuard no_grad;
  // No LoRA dropout while sampling; the training flag comes back however we leave.
  struct EvalScope {
    model::CausalLM& m;
    bool was_training;
    explicit EvalScope(model::CausalLM& model) : m(model), was_training(model->is_training()) { m->eval(); }
    ~EvalScope() { if (was_training) m->train(); }
  } eval_scope(model_);
  const torch::Device device = model_->device();

  int64_t max_prompt = 0;
  for (const auto& p : prompts) max_prompt = std::max<int64_t>(max_prompt, p.size());
  model::KVCache cache(model_->config().num_hidden_layers, max_prompt + params.max_tokens);
  auto [ids, mask] = left_pad(prompts, device);  // (P, L)
  model::ForwardArgs args;
  args.cache = &cache;
  args.last_only = true;
  torch::Tensor logits;  // (R, V)
  if (share_prefix) {
    args.attention_mask = mask;
    logits = model_->forward(ids, args).squeeze(1);  // (P, V): one prefill per prompt
    cache.expand_rows(n);
    logits = logits.repeat_interleave(n, 0);         // (P*n, V)
  } else {
    args.attention_mask = mask.repeat_interleave(n, 0);
    logits = model_->forward(ids.repeat_interleave(n, 0), args).squeeze(1);  // (P*n, V)
  }

  size_t max_stop = 0;
  for (const auto& s : params.stop) max_stop = std::max(max_stop, s.size());
  std::vector<int64_t> active(P * n);  // row -> flat (prompt * n + sample)
  for (int64_t r = 0; r < P * n; ++r) active[r] = r;

  for (int64_t t = 0; t < params.max_tokens && !active.empty(); ++t) {
    auto lp = processed_logprobs(logits, params);  // (A, V)
    const int64_t A = static_cast<int64_t>(active.size());
    std::vector<double> u(A);
    for (int64_t i = 0; i < A; ++i) {
      const int64_t flat = active[i];
      const uint64_t key = prompt_keys.empty() ? static_cast<uint64_t>(flat / n) : prompt_keys[flat / n];
      u[i] = counter_uniform(params.seed, key, static_cast<uint64_t>(flat % n), static_cast<uint64_t>(t));
    }
    // Inverse-CDF sampling in fp64: the first token whose cumulative mass reaches u.
    auto cdf = lp.to(torch::kFloat64).exp().cumsum(1);                         // (A, V)
    auto target = torch::tensor(u, torch::kFloat64).to(device).unsqueeze(1) * cdf.narrow(1, cdf.size(1) - 1, 1);
    auto tok = (cdf < target).sum(1).clamp_max(cdf.size(1) - 1);                // (A)
    auto tok_lp = lp.gather(1, tok.unsqueeze(1)).squeeze(1);                    // (A)
    auto tok_cpu = tok.to(torch::kCPU);
    auto lp_cpu = tok_lp.to(torch::kCPU);
    auto ta = tok_cpu.accessor<int64_t, 1>();
    auto la = lp_cpu.accessor<float, 1>();

    std::vector<int64_t> keep_rows, next_active, next_tokens;
    for (int64_t i = 0; i < A; ++i) {
      const int64_t flat = active[i];
      Completion& c = out[flat / n][flat % n];
      c.token_ids.push_back(ta[i]);
      c.logprobs.push_back(la[i]);
      ++tokens_generated_;
      bool stop = std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(), ta[i]) !=
                  params.stop_token_ids.end();
      if (!stop && !params.stop.empty()) {
        // Decode a tail long enough to hold any stop string (tokens are >= 1 byte).
        const size_t tail = std::min(c.token_ids.size(), max_stop + 8);
        std::vector<int32_t> tail_ids(c.token_ids.end() - tail, c.token_ids.end());
        stop = ends_with_stop(tokenizer_->decode(tail_ids), params.stop);
      }
      if (stop) {
        c.finish_reason = "stop";
      } else if (static_cast<int64_t>(c.token_ids.size()) >= params.max_tokens) {
        c.finish_reason = "length";
      } else {
        keep_rows.push_back(i);
        next_active.push_back(flat);
        next_tokens.push_back(ta[i]);
      }
    }
    if (next_active.empty()) break;
    if (static_cast<int64_t>(keep_rows.size()) != A) cache.select_rows(torch::tensor(keep_rows, torch::kInt64).to(device));
    active = std::move(next_active);
    auto step_ids = torch::tensor(next_tokens, torch::kInt64).to(device).unsqueeze(1);  // (A', 1)
    model::ForwardArgs step;
    step.cache = &cache;
    step.last_only = true;
    step.attention_mask = torch::ones_like(step_ids);
    logits = model_->forward(step_ids, step).squeeze(1);  // (A', V)
  }
  return out;
}

}  // namespace grpo::rollout
