#include "core/grpo/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <torch/torch.h>

#include "core/common/error.h"
#include "core/common/log.h"
#include "core/common/timing.h"
#include "core/grpo/metrics.h"
#include "core/grpo/packing.h"
#include "core/model/segment_attention.h"

namespace grpo::grpo {
namespace {


// TRL's _entropy_bonus_enabled: a static coefficient, or adaptive control (which may be at 0 now).
bool entropy_bonus_on(const TrainConfig& c) { return c.entropy_coef != 0.0 || c.use_adaptive_entropy; }

LossConfig loss_config(const TrainConfig& c, int64_t micro_batches) {
  LossConfig l;
  l.type = parse_loss_type(c.loss_type, "loss_type");
  l.level = kImportanceSamplingLevels.parse(c.importance_sampling_level, "importance_sampling_level");
  l.epsilon_low = c.epsilon;
  l.epsilon_high = c.epsilon_high_value();
  l.delta = c.delta.value_or(0.0);
  l.sapo_temperature_pos = c.sapo_temperature_pos;
  l.sapo_temperature_neg = c.sapo_temperature_neg;
  l.vespo_k_pos = c.vespo_k_pos;
  l.vespo_lambda_pos = c.vespo_lambda_pos;
  l.vespo_k_neg = c.vespo_k_neg;
  l.vespo_lambda_neg = c.vespo_lambda_neg;
  l.beta = c.beta;
  l.use_bias_correction_kl = c.use_bias_correction_kl;
  l.off_policy_mask_threshold = c.off_policy_mask_threshold;
  l.top_entropy_quantile = c.top_entropy_quantile;
  l.entropy_bonus = entropy_bonus_on(c);
  l.is_correction = c.vllm_importance_sampling_correction;
  l.is_mode = kIsCorrectionModes.parse(c.vllm_importance_sampling_mode, "vllm_importance_sampling_mode");
  l.is_clip_min = c.vllm_importance_sampling_clip_min;
  l.is_clip_max = c.vllm_importance_sampling_clip_max;
  l.max_completion_length = c.max_completion_length;
  l.gradient_accumulation_steps = micro_batches;
  return l;
}

// The pairs TRL's GRPOTrainer warns about (and trains anyway), with its words.
void warn_loss_level(const TrainConfig& c) {
  if (c.loss_type == "luspo" && c.importance_sampling_level != "sequence")
    log_warn("When using 'luspo' loss, importance_sampling_level should be set to 'sequence' to mirror the paper's setup.");
  if (c.loss_type == "vespo" && c.importance_sampling_level != "token")
    log_warn("VESPO computes sequence-level importance weights internally. importance_sampling_level should be set to "
             "'token' (the default).");
}

// One micro-batch, laid out for the forward as blocks of packed sub-rows: the samples'
// prompt+completion tokens back to back, no attention across samples. Samples with the same
// prompt share one copy of it (a prompt unit, packing.h; docs/formulas.md, "Shared prompts"):
// the prompt, then each completion, which attends to the prompt and to itself and takes
// positions that continue the prompt's. A single packed row of T tokens would cost T^2 attention
// per layer, mostly masked-out pairs between samples, so the units are binned (first-fit
// decreasing) into sub-rows of a capacity L, and then either
//   separate: every sub-row is its own (1, used) forward: no padding at all, but one forward
//     (and backward) per sub-row, each paying the per-operator dispatch cost;
//   padded block: one (R, L) forward: few, large operators, padding up to L in every sub-row.
// The layout and L minimise an estimate in token-equivalents:
//   calls * call_tokens + forwarded tokens (padding included) + w * attended (query, key) pairs
// (w: attention vs projection FLOPs; call_tokens: the dispatch cost of one forward+backward call
// in tokens, see forward_backward). Small models on a CPU are dispatch-bound, so short samples
// go in padded blocks; large ones are FLOP-bound and go separately. CUDA uses blocks (Auto).
// Positions index the concatenation of the blocks' flattened tokens.
struct PackedRow {
  std::vector<torch::Tensor> block_ids;  // (R, L) each
  std::vector<torch::Tensor> block_seq;  // (R, L) each, -1 = padding; undefined for one sequence
  std::vector<torch::Tensor> block_prefix;     // (R, L): the shared prompt's seq id, or -1; or undefined
  std::vector<torch::Tensor> block_positions;  // (R, L) position ids; undefined when nothing in the block shares
  torch::Tensor positions;    // (N) flat indices of the positions that predict completion tokens
  torch::Tensor targets;      // (N) the completion tokens they predict
  std::vector<int64_t> sample_of_token;  // (N) which row-local sample each target belongs to
  std::vector<int64_t> samples;          // global sample indices, in row order
  std::vector<PromptUnit> units;         // over row-local sample indices
  std::vector<model::AttentionSegment> segments;  // RowLayout::Segments: of the one (1, T) block
  int64_t max_completion = 0;
  int64_t tokens = 0;                    // real tokens forwarded
};

// First-fit decreasing of `lengths` into bins of `capacity`; returns the bins (indices).
std::vector<std::vector<size_t>> bin_lengths(const std::vector<int64_t>& lengths, int64_t capacity) {
  std::vector<size_t> order(lengths.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return lengths[a] > lengths[b]; });
  std::vector<std::vector<size_t>> bins;
  std::vector<int64_t> used;
  for (size_t i : order) {
    size_t b = 0;
    while (b < bins.size() && used[b] + lengths[i] > capacity) ++b;
    if (b == bins.size()) {
      bins.emplace_back();
      used.push_back(0);
    }
    bins[b].push_back(i);
    used[b] += lengths[i];
  }
  return bins;
}

// The fixed cost of one attention segment (its slices of the batched attention kernels, forward and
// backward), in tokens: measured on the demo model on a CPU (`grpo bench grpo-step` at the demo's
// shapes, 576 segments of 1-18 tokens a step: segments 0.04 s slower than padded blocks of 0.19 s).
constexpr double kSegmentTokens = 1.2;

// `units` cover `members` (row-local indices). Auto considers segments too when `segments_ok`.
PackedRow build_row(const std::vector<TrainSample>& all, const std::vector<int64_t>& members,
                    std::vector<PromptUnit> units, RowLayout layout, double attention_weight, double call_tokens,
                    bool segments_ok) {
  PackedRow r;
  r.units = std::move(units);
  const int64_t n_members = static_cast<int64_t>(members.size());
  std::vector<int64_t> lengths;
  int64_t longest = 0, total = 0;
  for (const auto& u : r.units) {
    lengths.push_back(u.tokens);
    longest = std::max(longest, u.tokens);
    total += u.tokens;
  }
  r.tokens = total;
  // Candidate capacities: the longest unit, its doublings, everything in one row.
  std::vector<std::vector<size_t>> best;
  int64_t best_len = std::max<int64_t>(longest, 1);
  bool separate = false;
  double best_cost = -1;
  bool segmented = layout == RowLayout::Segments;
  // Segments: one call, every token once, attention over each segment's own pairs (a shared prompt,
  // then each completion against prompt and itself; an unshared sample is one segment).
  double segment_cost = call_tokens + double(total);
  for (const auto& u : r.units) {
    const double P = double(u.prompt_tokens);
    if (u.members.size() == 1) {
      segment_cost += kSegmentTokens + attention_weight * double(u.tokens) * double(u.tokens);
      continue;
    }
    segment_cost += kSegmentTokens + attention_weight * P * P;
    for (int64_t k : u.members) {
      const double C = double(all[members[k]].completion_ids.size());
      if (C > 0) segment_cost += kSegmentTokens + attention_weight * C * (P + C);
    }
  }
  for (int64_t cap = std::max<int64_t>(longest, 1); !segmented; cap = std::min(total, cap * 2)) {
    auto bins = bin_lengths(lengths, cap);
    const double R = static_cast<double>(bins.size()), L = static_cast<double>(cap);
    const double padded = call_tokens + R * L + attention_weight * R * L * L;
    double unpadded = 0;  // separate sub-rows
    for (const auto& bin : bins) {
      double used = 0;
      for (size_t k : bin) used += static_cast<double>(lengths[k]);
      unpadded += call_tokens + used + attention_weight * used * used;
    }
    const bool sep = layout == RowLayout::Separate || (layout == RowLayout::Auto && unpadded < padded);
    const double cost = sep ? unpadded : padded;
    if (best_cost < 0 || cost < best_cost) best = std::move(bins), best_len = cap, best_cost = cost, separate = sep;
    if (cap >= total || layout == RowLayout::Separate) break;  // Separate: sub-rows as long as the longest unit
  }
  if (layout == RowLayout::Auto && segments_ok && segment_cost < best_cost) segmented = true;
  if (segmented) {  // one block of every unit in order
    best.assign(1, std::vector<size_t>(r.units.size()));
    for (size_t u = 0; u < r.units.size(); ++u) best[0][u] = u;
    best_len = total;
    separate = true;
  }
  // Per member: the flat index of its prompt's last token and of its first completion token.
  std::vector<int64_t> prompt_last(members.size()), completion_at(members.size());
  std::vector<std::vector<int64_t>> ids, seq, prefix, pos;
  std::vector<bool> shares;  // per block: some unit holds more than one completion
  int64_t base = 0;
  for (size_t b = 0; b < best.size(); ++b) {
    int64_t used = 0;
    for (size_t u : best[b]) used += lengths[u];
    const int64_t width = separate ? used : best_len;
    if (separate || b == 0) {
      ids.emplace_back();
      seq.emplace_back();
      prefix.emplace_back();
      pos.emplace_back();
      shares.push_back(false);
    }
    int64_t at = base + static_cast<int64_t>(ids.back().size());
    for (size_t u : best[b]) {
      const PromptUnit& unit = r.units[u];
      const bool shared = unit.members.size() > 1;
      shares.back() = shares.back() || shared;
      // A prompt shared by several completions is a sequence of its own (ids after the members').
      const int64_t prompt_seq = shared ? n_members + static_cast<int64_t>(u) : unit.members.front();
      const auto& prompt = all[members[unit.members.front()]].prompt_ids;
      const int64_t P = static_cast<int64_t>(prompt.size());
      const int64_t last_prompt_token = at + P - 1;
      const int64_t unit_begin = at;
      if (segmented && shared) r.segments.push_back({at, P, 0, 0});
      if (segmented && !shared) r.segments.push_back({at, unit.tokens, 0, 0});
      ids.back().insert(ids.back().end(), prompt.begin(), prompt.end());
      seq.back().insert(seq.back().end(), P, prompt_seq);
      prefix.back().insert(prefix.back().end(), P, int64_t(-1));
      for (int64_t t = 0; t < P; ++t) pos.back().push_back(t);
      at += P;
      for (int64_t k : unit.members) {
        const auto& c = all[members[k]].completion_ids;
        const int64_t C = static_cast<int64_t>(c.size());
        prompt_last[k] = last_prompt_token;
        ids.back().insert(ids.back().end(), c.begin(), c.end());
        seq.back().insert(seq.back().end(), C, k);
        prefix.back().insert(prefix.back().end(), C, shared ? prompt_seq : int64_t(-1));
        for (int64_t t = 0; t < C; ++t) pos.back().push_back(P + t);
        completion_at[k] = at;
        if (segmented && shared && C > 0) r.segments.push_back({at, C, unit_begin, P});
        at += C;
      }
    }
    ids.back().resize(ids.back().size() + (width - used), 0);
    seq.back().resize(seq.back().size() + (width - used), -1);
    prefix.back().resize(prefix.back().size() + (width - used), -1);
    pos.back().resize(pos.back().size() + (width - used), 0);
    if (separate) base += width;
  }
  for (size_t b = 0; b < ids.size(); ++b) {
    const int64_t width = separate ? static_cast<int64_t>(ids[b].size()) : best_len;
    const int64_t rows = static_cast<int64_t>(ids[b].size()) / width;
    r.block_ids.push_back(torch::tensor(ids[b], torch::kInt64).view({rows, width}));
    if (segmented) {  // positions and masks come from the segments
      r.block_seq.emplace_back();
      r.block_prefix.emplace_back();
      r.block_positions.emplace_back();
      continue;
    }
    const bool one_sequence = separate && best[b].size() == 1 && r.units[best[b].front()].members.size() == 1;
    r.block_seq.push_back(one_sequence ? torch::Tensor()  // plain causal forward
                                       : torch::tensor(seq[b], torch::kInt64).view({rows, width}));
    r.block_prefix.push_back(shares[b] ? torch::tensor(prefix[b], torch::kInt64).view({rows, width}) : torch::Tensor());
    r.block_positions.push_back(shares[b] ? torch::tensor(pos[b], torch::kInt64).view({rows, width}) : torch::Tensor());
  }
  std::vector<int64_t> flat_pos, tgt;
  for (size_t k = 0; k < members.size(); ++k) {  // in member order, so samples stay sorted
    const auto& s = all[members[k]];
    for (size_t t = 0; t < s.completion_ids.size(); ++t) {
      // Logits at i predict token i+1: the first completion token from the prompt's last one.
      flat_pos.push_back(t == 0 ? prompt_last[k] : completion_at[k] + static_cast<int64_t>(t) - 1);
      tgt.push_back(s.completion_ids[t]);
      r.sample_of_token.push_back(static_cast<int64_t>(k));
    }
    r.max_completion = std::max<int64_t>(r.max_completion, s.completion_ids.size());
    r.samples.push_back(members[k]);
  }
  r.positions = torch::tensor(flat_pos, torch::kInt64);
  r.targets = torch::tensor(tgt, torch::kInt64);
  return r;
}

// Final hidden states of every block's tokens, flattened and concatenated: (sum R*L, C).
torch::Tensor row_hidden(model::CausalLMImpl& model, const PackedRow& r, const torch::Device& dev) {
  std::vector<torch::Tensor> hs;
  for (size_t b = 0; b < r.block_ids.size(); ++b) {
    model::ForwardArgs args;
    if (r.block_seq[b].defined()) args.seq_ids = r.block_seq[b].to(dev);
    if (r.block_prefix[b].defined()) args.prefix_ids = r.block_prefix[b].to(dev);
    if (r.block_positions[b].defined()) args.position_ids = r.block_positions[b].to(dev);
    args.segments = r.segments;
    auto h = model.hidden_states(r.block_ids[b].to(dev), args);  // (R, L, C)
    hs.push_back(h.reshape({-1, h.size(-1)}));
  }
  return hs.size() == 1 ? hs[0] : torch::cat(hs);
}

// Scatters flat per-token values (N) into (B, Tc) rows by sample, zero elsewhere.
torch::Tensor to_rows(const torch::Tensor& flat, const PackedRow& r, const torch::Tensor& row_index,
                      const torch::Tensor& col_index) {
  auto out = torch::zeros({static_cast<int64_t>(r.samples.size()), r.max_completion}, flat.options());
  return out.index_put({row_index, col_index}, flat);
}

}  // namespace

torch::Tensor chunked_token_logprobs(model::CausalLMImpl& model, const torch::Tensor& hidden,
                                     const torch::Tensor& targets, double temperature,
                                     torch::Tensor* entropy, int64_t chunk_rows, bool entropy_grad) {
  const double T = temperature > 0 ? temperature : 1.0;
  std::vector<torch::Tensor> lps, ents;
  for (int64_t s = 0; s < hidden.size(0); s += chunk_rows) {
    const int64_t n = std::min(chunk_rows, hidden.size(0) - s);
    auto logits = model.logits(hidden.narrow(0, s, n)) / T;  // (n, V) fp32
    auto logp = torch::log_softmax(logits, -1);
    lps.push_back(logp.gather(1, targets.narrow(0, s, n).unsqueeze(1)).squeeze(1));
    if (entropy && entropy_grad) {
      ents.push_back(-(logp.exp() * logp).sum(-1));
    } else if (entropy) {
      torch::NoGradGuard ng;
      ents.push_back(-(logp.exp() * logp).sum(-1));
    }
  }
  if (entropy) *entropy = ents.empty() ? torch::zeros({0}) : torch::cat(ents);
  return lps.empty() ? torch::zeros({0}) : torch::cat(lps);
}

GrpoTrainer::GrpoTrainer(model::CausalLM model, const TrainConfig& config)
    : GrpoTrainer(std::move(model), std::make_shared<const TrainConfig>(config)) {}

GrpoTrainer::GrpoTrainer(model::CausalLM model, SharedConfig config) : model_(std::move(model)), config_(std::move(config)) {
  check(config_ != nullptr, "trainer", "no config");
  check(model_->has_lora(), "trainer", "the model has no LoRA adapter", "call add_lora() before training");
  optimizer_ = std::make_unique<Optimizer>(model_->lora_parameters(), optimizer_config(*config_, config_->max_steps));
  model_->set_gradient_checkpointing(config_->gradient_checkpointing);
  flops_ = model::count_flops(*model_);
  entropy_coef_ = config_->entropy_coef;
  warn_loss_level(*config_);
}

nlohmann::json GrpoTrainer::controller_state() const {
  return {{"entropy_coef", entropy_coef_},
          {"last_world_entropy", last_world_entropy_ ? nlohmann::json(*last_world_entropy_) : nlohmann::json(nullptr)}};
}

void GrpoTrainer::restore_controller_state(const nlohmann::json& state, const std::string& context) {
  check(state.is_object(), context, "field \"trainer\": expected an object with entropy_coef and last_world_entropy");
  // The key table's range of entropy_coef, and a mean entropy in nats (at most log of a vocabulary).
  auto number = [&](const char* key, double hi) -> std::optional<double> {
    const auto it = state.find(key);
    if (it == state.end() || it->is_null()) return std::nullopt;
    const double v = it->is_number() ? it->get<double>() : -1.0;
    check(it->is_number() && std::isfinite(v) && v >= 0.0 && v <= hi, context,
          std::string("field \"trainer.") + key + "\": expected a number in [0, " + std::to_string(int(hi)) + "], got " +
              it->dump());
    return v;
  };
  const auto coef = number("entropy_coef", 100.0);
  const auto world = number("last_world_entropy", 1000.0);
  if (coef) entropy_coef_ = *coef;
  last_world_entropy_ = world;
}

void GrpoTrainer::retune(const TrainConfig& config) { retune(std::make_shared<const TrainConfig>(config)); }

void GrpoTrainer::retune(SharedConfig config) {
  check(config != nullptr, "trainer", "no config");
  // A retuned entropy_coef restarts the adaptive controller from it.
  if (config->entropy_coef != config_->entropy_coef) entropy_coef_ = config->entropy_coef;
  config_ = std::move(config);
  optimizer_->set_base_lr(config_->learning_rate);
}

std::map<std::string, double> GrpoTrainer::step(const std::vector<TrainSample>& samples) {
  const auto t_step = std::chrono::steady_clock::now();
  return finish_step(forward_backward(samples, true, nullptr), t_step);
}

std::map<std::string, double> GrpoTrainer::step(std::vector<TrainSample>& samples, int64_t pass) {
  check(pass >= 0, "trainer", "a negative pass over a batch");
  const auto t_step = std::chrono::steady_clock::now();
  // Later passes need pi_old of the batch's first step: with the proximal correction that is the
  // trainer's policy then, which only this pass can see (without it pi_old is the sampler's).
  const bool record = pass == 0 && config_->num_iterations > 1 && config_->vllm_importance_sampling_correction;
  std::vector<std::vector<float>> logps;
  auto metrics = finish_step(forward_backward(samples, true, record ? &logps : nullptr), t_step);
  if (record)
    for (size_t i = 0; i < samples.size(); ++i) samples[i].proximal_logprobs = std::move(logps[i]);
  if (config_->num_iterations > 1) metrics["batch/reuse_pass"] = static_cast<double>(pass);
  return metrics;
}

std::map<std::string, double> GrpoTrainer::finish_step(std::map<std::string, double> metrics,
                                                       std::chrono::steady_clock::time_point t_step) {
  metrics["perf/fwd_bwd_s"] = seconds_since(t_step);
  const auto t_opt = std::chrono::steady_clock::now();
  metrics["grad_norm"] = optimizer_->step();
  metrics["learning_rate"] = optimizer_->current_lr();
  metrics["perf/optimizer_s"] = seconds_since(t_opt);
  const TrainConfig& c = *config_;
  if (entropy_bonus_on(c)) {
    // TRL's adaptive entropy control: the step's mean entropy (over the tokens the bonus saw) moves
    // the coefficient one entropy_coef_delta toward more bonus when at or below entropy_target, less
    // above it, within [entropy_coef_min, entropy_coef_max]; the next step applies it.
    if (c.use_adaptive_entropy && bonus_tokens_ > 0) {
      const double world = bonus_entropy_sum_ / bonus_tokens_;
      entropy_coef_ = world <= c.entropy_target ? std::min(entropy_coef_ + c.entropy_coef_delta, c.entropy_coef_max)
                                                : std::max(entropy_coef_ - c.entropy_coef_delta, c.entropy_coef_min);
      last_world_entropy_ = world;
    }
    metrics["entropy_coef"] = c.use_adaptive_entropy ? entropy_coef_ : c.entropy_coef;
  }
  return metrics;
}

std::map<std::string, double> GrpoTrainer::forward_backward(const std::vector<TrainSample>& samples, bool backward) {
  return forward_backward(samples, backward, nullptr);
}

std::map<std::string, double> GrpoTrainer::forward_backward(const std::vector<TrainSample>& samples, bool backward,
                                                            std::vector<std::vector<float>>* record) {
  check(!samples.empty(), "trainer", "no samples to train on");
  const torch::Device dev = model_->device();
  model_->train();

  bool have_proximal = false;
  for (const auto& s : samples) have_proximal = have_proximal || !s.proximal_logprobs.empty();
  std::vector<int64_t> lengths, completion_lengths;
  std::vector<const std::vector<int64_t>*> prompts;
  for (const auto& s : samples) {
    check(s.old_logprobs.size() == s.completion_ids.size() && !s.prompt_ids.empty(), "trainer",
          "sample needs a prompt and one behaviour log-prob per completion token");
    check(s.proximal_logprobs.size() == (have_proximal ? s.completion_ids.size() : 0), "trainer",
          "proximal log-probs must be given for every sample of a batch (one per completion token) or for none");
    lengths.push_back(static_cast<int64_t>(s.prompt_ids.size() + s.completion_ids.size()));
    prompts.push_back(&s.prompt_ids);
    completion_lengths.push_back(static_cast<int64_t>(s.completion_ids.size()));
  }
  // Sub-row layout cost model (build_row): attention FLOPs per (query, key) pair relative to the
  // projections' FLOPs per token, doubled for the softmax/mask passes over every pair.
  const auto& mc = model_->config();
  const double proj = double(mc.hidden_size) * double(2 * mc.q_dim() + 2 * mc.kv_dim()) +
                      3.0 * double(mc.hidden_size) * double(mc.intermediate_size);
  const double attention_weight = 2.0 * 2.0 * double(mc.q_dim()) / proj;
  // Rows of whole prompt units: a group's completions share one forward of its prompt, in parts
  // when the masked attention of one long unit would cost more than copies of the prompt.
  // Auto: on CUDA padded blocks (the segmented form is not measured there yet); models with
  // sliding-window layers stay binned (segments do not support them). Where the segment kernel
  // runs (a CPU in fp32 or fp64; model/segment_attention.h) a segmented row has no padding, one
  // call and no per-segment dispatch, so Auto takes it outright: on the demo's shapes a step took
  // 0.19 s against 0.24-0.27 s in padded blocks, and on grpo-step's long segments the kernel
  // matched the buckets (BENCHMARKS.md, "Segment attention kernel"). Elsewhere (bf16, Gemma 2's
  // soft-capping) Auto weighs bucketed segments against binned sub-rows per row.
  const bool sliding = std::find(mc.sliding_layers.begin(), mc.sliding_layers.end(), true) != mc.sliding_layers.end();
  const bool kernel = !sliding && model::segment_kernel_supports(model_->dtype(), dev, mc.head_dim,
                                                                 mc.attn_logit_softcapping.value_or(0.0));
  const RowLayout layout = row_layout_ != RowLayout::Auto ? row_layout_
                           : dev.is_cuda()               ? RowLayout::Padded
                           : kernel                      ? RowLayout::Segments
                                                         : RowLayout::Auto;
  const bool segments_ok = !sliding && (layout == RowLayout::Segments || layout == RowLayout::Auto);
  PromptUnitOptions unit_options;
  unit_options.share = config_->share_prompts;
  // Segments attend a unit's completions apart, so where they may be used a group is never split
  // for attention's sake (a row of dense units that would need it picks segments instead).
  unit_options.attention_weight = segments_ok ? 0.0 : attention_weight;
  std::vector<PromptUnit> units;
  if (config_->token_budget > 0) {
    unit_options.cap = config_->token_budget;
    units = prompt_units(prompts, completion_lengths, unit_options);
    unit_options.cap = 0;
  }
  PackedBatches batches = config_->token_budget > 0 ? pack_token_budget(units, config_->token_budget)
                                                   : pack_fixed_count(lengths, config_->per_device_train_batch_size);
  // Row-local units of row `ri`: the packed ones, or those of a fixed-count micro-batch.
  auto row_units = [&](size_t ri) {
    const auto& members = batches.rows[ri];
    if (batches.row_units.empty()) {
      std::vector<const std::vector<int64_t>*> ps;
      std::vector<int64_t> cs;
      for (int64_t i : members) ps.push_back(prompts[i]), cs.push_back(completion_lengths[i]);
      return prompt_units(ps, cs, unit_options);
    }
    std::vector<PromptUnit> local;
    for (int64_t u : batches.row_units[ri]) {
      local.push_back(units[u]);
      for (auto& i : local.back().members)
        i = std::lower_bound(members.begin(), members.end(), i) - members.begin();  // rows are sorted
    }
    return local;
  };
  std::map<std::string, double> metrics = batches.metrics;
  if (record) record->assign(samples.size(), {});
  auto mask_of = [&](const TrainSample& s) { return config_->mask_truncated_completions && s.truncated ? 0.0 : 1.0; };

  // dapo normalises by the active tokens of the whole accumulated batch.
  double items = 0;
  for (const auto& row : batches.rows)
    for (int64_t i : row) items += mask_of(samples[i]) * static_cast<double>(samples[i].completion_ids.size());
  LossConfig lc = loss_config(*config_, static_cast<int64_t>(batches.rows.size()));
  // Adaptive control applies its coefficient only once a step's entropy has been measured at or
  // below entropy_target (none is before the first step).
  lc.entropy_coef = !config_->use_adaptive_entropy ? config_->entropy_coef
                    : (last_world_entropy_ && *last_world_entropy_ <= config_->entropy_target) ? entropy_coef_
                                                                                              : 0.0;
  bonus_entropy_sum_ = 0.0;
  bonus_tokens_ = 0.0;
  const bool need_entropy = lc.top_entropy_quantile < 1.0 || lc.entropy_bonus;

  // Dispatch cost of one forward+backward call per layer, in multiply-adds: measured on the demo
  // model on a CPU (bench grpo-step, 256 one-sample calls against 19 padded blocks of the same
  // samples: 16 ms a call against 0.26 ms a token, i.e. ~64 tokens of a 197k-MAC layer).
  constexpr double kCallMacsPerLayer = 1.26e7;
  const double call_tokens = kCallMacsPerLayer / proj;

  std::map<std::string, double> sums;  // token-weighted sums of per-micro-batch metrics
  double tokens_total = 0, entropy_sum = 0, loss_sum = 0, forwarded = 0, calls = 0, flops = 0, unshared = 0,
         segmented_rows = 0;
  std::map<std::string, double> mins, maxes;  // extremes by the window's rule (reduction_for)
  for (size_t ri = 0; ri < batches.rows.size(); ++ri) {
    const auto& members = batches.rows[ri];
    PackedRow r = build_row(samples, members, row_units(ri), layout, attention_weight, call_tokens, segments_ok);
    if (r.targets.numel() == 0) continue;
    forwarded += static_cast<double>(r.tokens);
    if (r.segments.empty()) {
      for (const auto& u : r.units) flops += flops_.lora_fwd_bwd(u.tokens, u.tokens - u.prompt_tokens);
    } else {
      flops += flops_.lora_fwd_bwd(r.tokens, r.targets.numel(), model::segment_pairs(r.segments));
    }
    for (int64_t i : members) unshared += static_cast<double>(lengths[i]);
    calls += static_cast<double>(r.block_ids.size());
    segmented_rows += r.segments.empty() ? 0.0 : 1.0;
    auto picked = row_hidden(*model_, r, dev).index_select(0, r.positions.to(dev));  // (N, C)
    torch::Tensor ent;
    auto logp = chunked_token_logprobs(*model_, picked, r.targets.to(dev), config_->temperature, &ent, 1024,
                                       lc.entropy_bonus);  // (N)

    // (B, Tc) layout for the loss.
    std::vector<int64_t> cols;
    std::vector<float> old, prox;
    std::vector<float> mask;
    std::vector<int64_t> counter(r.samples.size(), 0);
    for (size_t t = 0; t < r.sample_of_token.size(); ++t) {
      const int64_t k = r.sample_of_token[t];
      const TrainSample& s = samples[r.samples[k]];
      cols.push_back(counter[k]);
      old.push_back(s.old_logprobs[counter[k]]);
      if (have_proximal) prox.push_back(s.proximal_logprobs[counter[k]]);
      mask.push_back(static_cast<float>(mask_of(s)));
      ++counter[k];
    }
    if (record) {
      auto flat = logp.detach().to(torch::kCPU, torch::kFloat32).contiguous();
      const float* v = flat.data_ptr<float>();
      for (size_t t = 0; t < r.sample_of_token.size(); ++t) (*record)[r.samples[r.sample_of_token[t]]].push_back(v[t]);
    }
    auto row_index = torch::tensor(r.sample_of_token, torch::kInt64).to(dev);
    auto col_index = torch::tensor(cols, torch::kInt64).to(dev);
    auto old_t = torch::tensor(old, torch::kFloat32).to(dev);
    auto mask_t = torch::tensor(mask, torch::kFloat32).to(dev);
    std::vector<double> adv;
    for (int64_t i : r.samples) adv.push_back(samples[i].advantage);

    LossInputs in;
    in.logp = to_rows(logp, r, row_index, col_index);
    in.old_logp = to_rows(old_t, r, row_index, col_index);
    if (lc.is_correction) {
      // The proximal policy is the one the batch's first step starts from: on that step the
      // parameters do not move until the optimizer step, so its log-probs are this forward's,
      // detached (TRL's recompute, without a second forward); later passes (num_iterations) take
      // the ones that step recorded. The sampler's log-probs only weigh the gap.
      in.sampling_logp = in.old_logp;
      in.old_logp = have_proximal ? to_rows(torch::tensor(prox, torch::kFloat32).to(dev), r, row_index, col_index)
                                  : in.logp.detach();
    }
    if (need_entropy) in.entropy = to_rows(ent, r, row_index, col_index);
    in.mask = to_rows(mask_t, r, row_index, col_index);
    in.advantages = torch::tensor(adv, torch::kFloat32).to(dev);
    in.num_items_in_batch = items;
    if (config_->beta != 0.0) {
      // The reference policy is the base model: the same weights with the adapter switched off.
      torch::NoGradGuard ng;
      model_->set_adapter_enabled(false);
      auto ref_hidden = row_hidden(*model_, r, dev).index_select(0, r.positions.to(dev));
      auto ref = chunked_token_logprobs(*model_, ref_hidden, r.targets.to(dev), config_->temperature);
      model_->set_adapter_enabled(true);
      in.ref_logp = to_rows(ref, r, row_index, col_index);
    }
    LossOutput out = grpo_loss(in, lc);
    if (backward) out.loss.backward();

    const double ntok = mask_t.sum().item<double>();
    tokens_total += ntok;
    entropy_sum += (ent.detach() * mask_t).sum().item<double>();
    loss_sum += out.loss.item<double>();
    bonus_entropy_sum_ += out.entropy_sum;
    bonus_tokens_ += out.entropy_tokens;
    for (const auto& [k, v] : out.metrics) {
      if (k == "policy_loss") continue;
      const Reduction how = reduction_for(k);  // the window's rule: a "min" or "max" word is an extreme
      if (how == Reduction::Min) {
        if (ntok > 0) mins[k] = mins.count(k) ? std::min(mins[k], v) : v;
      } else if (how == Reduction::Max) {
        if (ntok > 0) maxes[k] = maxes.count(k) ? std::max(maxes[k], v) : v;
      } else {
        sums[k] += v * ntok;
      }
    }
  }

  // Token-weighted means of the micro-batches' metrics; extremes over the micro-batches that
  // trained a token (when none did, ratio_min and ratio_max are 1 and the others are not logged).
  for (const auto& [k, v] : sums) metrics[k] = tokens_total > 0 ? v / tokens_total : 0.0;
  for (const auto& [k, v] : mins) metrics[k] = v;
  for (const auto& [k, v] : maxes) metrics[k] = v;
  if (!mins.count("ratio_min")) metrics["ratio_min"] = 1.0;
  if (!maxes.count("ratio_max")) metrics["ratio_max"] = 1.0;
  metrics["loss"] = loss_sum;  // the accumulated objective of this step
  metrics["entropy"] = tokens_total > 0 ? entropy_sum / tokens_total : 0.0;
  metrics["num_tokens"] = forwarded;
  // Tokens the model really forwarded, and those the shared prompts saved (formulas.md, "Shared prompts").
  metrics["batch/forwarded_tokens_per_step"] = forwarded;
  metrics["batch/shared_prompt_tokens_per_step"] = unshared - forwarded;
  metrics["batch/forward_calls_per_step"] = calls;  // model forwards (sub-row layout, build_row)
  metrics["batch/segmented_rows_per_step"] = segmented_rows;
  metrics["perf/train_flops"] = flops;  // model FLOPs of the tokens forwarded (flops.h)

  double len_sum = 0, len_min = 1e300, len_max = 0, clipped = 0, term_sum = 0, term_n = 0;
  for (const auto& s : samples) {
    const double L = static_cast<double>(s.completion_ids.size());
    len_sum += L;
    len_min = std::min(len_min, L);
    len_max = std::max(len_max, L);
    if (s.truncated) clipped += 1;
    else { term_sum += L; term_n += 1; }
  }
  const double n = static_cast<double>(samples.size());
  metrics["completions/mean_length"] = len_sum / n;
  metrics["completions/min_length"] = len_min;
  metrics["completions/max_length"] = len_max;
  metrics["completions/clipped_ratio"] = clipped / n;
  metrics["completions/mean_terminated_length"] = term_n > 0 ? term_sum / term_n : 0.0;
  metrics["sample/trained_tokens_mean"] = items / n;
  metrics["batch/trained_tokens_per_step"] = items;
  return metrics;
}

}  // namespace grpo::grpo
