// bench_grpo_step: builds the model, adapter and a ragged GRPO batch, writes them for the Python
// baseline, times our trainer's steps, runs the baseline, checks both agree, reports tokens/s.
#include "core/common/bench_stats.h"
#include "tools/grpo_step_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include <torch/torch.h>
#include <torch/csrc/autograd/profiler_legacy.h>

#include "core/common/blas_kernels.h"
#include "core/common/error.h"
#include "core/common/files.h"
#include "core/grpo/trainer.h"
#include "core/model/causal_lm.h"
#include "tools/forward_bench.h"
#include "core/model/peft_io.h"
#include "core/model/weights.h"

namespace grpo::grpo {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

int64_t uniform_int(torch::Generator& gen, int64_t lo, int64_t hi) {  // [lo, hi]
  return torch::randint(lo, hi + 1, {1}, gen, torch::kInt64).item<int64_t>();
}

// Random prompts and ragged completions; advantages standardised per group (population std, as
// the rollout worker does); behaviour log-probs = the current policy's at `temperature` plus
// N(0, 0.1) noise, so ratios sit near 1 with some clipping, as in a slightly stale batch.
std::vector<TrainSample> make_batch(model::CausalLM& m, const GrpoStepBenchOptions& o) {
  const auto& c = m->config();
  torch::Generator gen = at::detail::createCPUGenerator(20261129);
  int64_t pmax = o.prompt_max, cmax = o.completion_max;
  if (c.max_position_embeddings > 0 && pmax + cmax > c.max_position_embeddings) {
    cmax = std::max<int64_t>(1, std::min(cmax, c.max_position_embeddings / 2));
    pmax = std::max<int64_t>(1, c.max_position_embeddings - cmax);
  }
  const int64_t pmin = std::min(o.prompt_min, pmax), cmin = std::min(o.completion_min, cmax);
  std::vector<TrainSample> out;
  torch::NoGradGuard no_grad;
  m->eval();
  for (int64_t p = 0; p < o.prompts; ++p) {
    const int64_t plen = uniform_int(gen, pmin, pmax);
    auto prompt = torch::randint(1, c.vocab_size, {plen}, gen, torch::kInt64);
    std::vector<int64_t> prompt_ids(prompt.data_ptr<int64_t>(), prompt.data_ptr<int64_t>() + plen);
    auto rewards = torch::randn({o.group}, gen, torch::kFloat64);
    auto adv = (rewards - rewards.mean()) / (rewards.std(/*unbiased=*/false) + 1e-8);
    // The group as one right-padded batch (G, plen + longest completion).
    std::vector<int64_t> clens;
    for (int64_t g = 0; g < o.group; ++g) clens.push_back(uniform_int(gen, cmin, cmax));
    const int64_t L = plen + *std::max_element(clens.begin(), clens.end());
    auto ids = torch::zeros({o.group, L}, torch::kInt64);
    auto mask = torch::zeros({o.group, L}, torch::kInt64);
    for (int64_t g = 0; g < o.group; ++g) {
      TrainSample s;
      s.prompt_ids = prompt_ids;
      auto comp = torch::randint(1, c.vocab_size, {clens[g]}, gen, torch::kInt64);
      s.completion_ids.assign(comp.data_ptr<int64_t>(), comp.data_ptr<int64_t>() + clens[g]);
      s.advantage = adv[g].item<double>();
      ids[g].narrow(0, 0, plen).copy_(prompt);
      ids[g].narrow(0, plen, clens[g]).copy_(comp);
      mask[g].narrow(0, 0, plen + clens[g]).fill_(1);
      out.push_back(std::move(s));
    }
    model::ForwardArgs args;
    args.attention_mask = mask.to(m->device());
    auto logp = torch::log_softmax(m->forward(ids.to(m->device()), args) / o.temperature, -1).to(torch::kCPU);  // (G, L, V)
    auto noise = torch::randn({o.group, L}, gen, torch::kFloat32) * 0.1;
    for (int64_t g = 0; g < o.group; ++g) {
      TrainSample& s = out[out.size() - o.group + g];
      auto tgt = ids[g].narrow(0, plen, clens[g]);
      auto lp = logp[g].narrow(0, plen - 1, clens[g]).gather(1, tgt.unsqueeze(1)).squeeze(1) +
                noise[g].narrow(0, 0, clens[g]);
      s.old_logprobs.assign(lp.data_ptr<float>(), lp.data_ptr<float>() + clens[g]);
    }
  }
  m->train();
  return out;
}

json batch_json(const std::vector<TrainSample>& samples, const GrpoStepBenchOptions& o, const TrainConfig& cfg,
                int threads, const std::string& dir) {
  json js = json::array();
  for (const auto& s : samples)
    js.push_back({{"prompt_ids", s.prompt_ids},
                  {"completion_ids", s.completion_ids},
                  {"old_logprobs", s.old_logprobs},
                  {"advantage", s.advantage}});
  return {{"model_dir", path_join(dir, "model")},
          {"adapter_dir", path_join(dir, "adapter")},
          {"config",
           {{"r", o.lora_r}, {"lora_alpha", o.lora_alpha}, {"learning_rate", o.learning_rate},
            {"epsilon", o.epsilon}, {"epsilon_high", o.epsilon_high}, {"loss_type", cfg.loss_type},
            {"importance_sampling_level", cfg.importance_sampling_level},
            {"delta", cfg.delta ? json(*cfg.delta) : json(nullptr)},
            {"sapo_temperature_pos", cfg.sapo_temperature_pos}, {"sapo_temperature_neg", cfg.sapo_temperature_neg},
            {"vespo_k_pos", cfg.vespo_k_pos}, {"vespo_lambda_pos", cfg.vespo_lambda_pos},
            {"vespo_k_neg", cfg.vespo_k_neg}, {"vespo_lambda_neg", cfg.vespo_lambda_neg},
            {"max_completion_length", cfg.max_completion_length}, {"device", o.device},
            {"temperature", o.temperature}, {"max_grad_norm", 1.0}, {"weight_decay", 0.0},
            {"adam_beta1", 0.9}, {"adam_beta2", 0.999}, {"adam_epsilon", 1e-8},
            {"per_device_train_batch_size", o.per_device_train_batch_size},
            {"steps", 1 + std::max(1, o.iters)}, {"threads", threads}}},
          {"samples", js}};
}

// Runs the baseline; returns its last output line parsed, or throws with the output's tail.
void check_python(const GrpoStepBenchOptions& o) {
  check(file_exists(o.python), o.python, "Python interpreter not found",
        "install python3 and python3-torch, or pass --python");
  check(file_exists(o.script), o.script, "baseline script not found",
        "run from the source tree or pass --script tests/bench/grpo_step_baseline.py");
}

json run_python(const GrpoStepBenchOptions& o, const std::string& dir) {
  const std::string cmd = shell_quote(o.python) + " " + shell_quote(o.script) + " " + shell_quote(dir) + " 2>&1";
  std::string output;
  FILE* p = popen(cmd.c_str(), "r");
  check(p != nullptr, o.python, "cannot start the Python baseline");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) output.append(buf, n);
  const int status = pclose(p);
  while (!output.empty() && (output.back() == '\n' || output.back() == '\r')) output.pop_back();
  const size_t nl = output.find_last_of('\n');
  json r = json::parse(nl == std::string::npos ? output : output.substr(nl + 1), nullptr, false);
  const std::string tail = output.size() > 1500 ? output.substr(output.size() - 1500) : output;
  check(status == 0 && r.is_object() && r.contains("losses"), o.script,
        "the Python baseline failed (exit status " + std::to_string(status) + "): " + tail,
        "needs /usr/bin/python3 with torch (Debian: apt install python3-torch)");
  return r;
}

}  // namespace

json bench_grpo_step(const GrpoStepBenchOptions& o) {
  check(o.prompts >= 1 && o.group >= 2, "bench grpo-step", "need prompts >= 1 and group >= 2");
  check(o.prompt_min >= 1 && o.prompt_max >= o.prompt_min && o.completion_min >= 1 &&
            o.completion_max >= o.completion_min,
        "bench grpo-step", "need 1 <= prompt_min <= prompt_max and 1 <= completion_min <= completion_max");
  check_python(o);
  // The loss, checked before the model is built.
  TrainConfig cfg;
  cfg.loss_type = o.loss_type;
  cfg.importance_sampling_level =
      !o.importance_sampling_level.empty() ? o.importance_sampling_level : o.loss_type == "luspo" ? "sequence" : "token";
  if (o.delta > 0) cfg.delta = o.delta;
  const LossType loss_type = parse_loss_type(cfg.loss_type, "--loss-type");
  const auto level = kImportanceSamplingLevels.parse(cfg.importance_sampling_level, "--importance-sampling-level");
  if (const char* why = refused_loss_level(loss_type, level)) throw Error("bench grpo-step", std::string("loss_type ") + o.loss_type + " with " + why);
  check(!(loss_type == LossType::LUSPO && level != ImportanceSamplingLevel::Sequence), "bench grpo-step",
        "luspo below the sequence level averages over padded positions, and the baseline pads differently from our rows",
        "use --importance-sampling-level sequence (TRL's advice for luspo)");
  // Per-micro-batch normalisers need the baseline's micro-batches on our side too.
  const bool per_micro_batch = !(loss_type == LossType::DAPO || loss_type == LossType::CISPO || loss_type == LossType::VESPO);
  if (o.threads > 0) torch::set_num_threads(o.threads);
  const int threads = torch::get_num_threads();
  torch::manual_seed(0);
  const torch::Device device = model::bench_device(o.device, "bench grpo-step");
  at::globalContext().setAllowTF32CuBLAS(false);  // fp32 on both sides, as PyTorch's default

  model::CausalLM m{nullptr};
  if (!o.model_dir.empty()) {
    check(is_directory(o.model_dir), o.model_dir, "no such model directory",
          "give a Hugging Face model folder, or --size for a generated model");
    m = model::from_pretrained(o.model_dir, torch::kFloat32, device);
  } else {
    m = model::CausalLM(model::CausalLMOptions(model::bench_model_config(o.size)).device(device));
  }
  model::LoraConfig lc;
  lc.r = o.lora_r;
  lc.lora_alpha = o.lora_alpha;
  m->add_lora(lc);
  {
    torch::NoGradGuard ng;
    torch::Generator gen = at::detail::createCPUGenerator(99);
    for (auto& item : m->named_lora_parameters())
      if (item.key().find("lora_B") != std::string::npos)
        item.value().copy_(torch::randn(item.value().sizes(), gen, torch::kFloat32) * 0.02);
  }
  auto samples = make_batch(m, o);

  cfg.learning_rate = o.learning_rate;
  cfg.epsilon = o.epsilon;
  cfg.epsilon_high = o.epsilon_high;
  cfg.temperature = o.temperature;
  cfg.token_budget = per_micro_batch ? 0 : o.token_budget;
  cfg.share_prompts = o.share_prompts;
  cfg.per_device_train_batch_size = o.per_device_train_batch_size;
  cfg.max_grad_norm = 1.0;
  cfg.max_steps = 1000;
  cfg.r = o.lora_r;
  cfg.lora_alpha = o.lora_alpha;
  int64_t tokens = 0, completion_tokens = 0, longest = 0;
  for (const auto& s : samples) {
    tokens += int64_t(s.prompt_ids.size() + s.completion_ids.size());
    completion_tokens += int64_t(s.completion_ids.size());
    longest = std::max<int64_t>(longest, s.prompt_ids.size() + s.completion_ids.size());
  }
  if (cfg.token_budget > 0) cfg.token_budget = std::max(cfg.token_budget, longest);
  cfg.max_completion_length = o.completion_max;

  // Files for the baseline, written before our steps change the adapter.
  std::string tmpl = (std::filesystem::temp_directory_path() / "grpo-bench-step-XXXXXX").string();
  check(mkdtemp(tmpl.data()) != nullptr, tmpl, "cannot create a temporary folder");
  const std::string dir = tmpl;
  model::save_pretrained(*m, path_join(dir, "model"), torch::kFloat32);
  model::save_adapter(*m, path_join(dir, "adapter"));
  write_file_atomic(path_join(dir, "batch.json"), batch_json(samples, o, cfg, threads, dir).dump());

  GrpoTrainer trainer(m, cfg);
  const RowLayout layout = o.row_layout == "separate"   ? RowLayout::Separate
                           : o.row_layout == "padded"   ? RowLayout::Padded
                           : o.row_layout == "segments" ? RowLayout::Segments
                                                        : RowLayout::Auto;
  check(o.row_layout == "auto" || layout != RowLayout::Auto, "bench grpo-step",
        "--row-layout is '" + o.row_layout + "', expected auto, segments, separate or padded");
  trainer.set_row_layout(layout);

  std::vector<double> losses, times, grad_norms;
  double rows = 0, calls = 0, forwarded = 0, shared = 0, segmented = 0;
  const int steps = 1 + std::max(1, o.iters);
  for (int i = 0; i < steps + (o.trace.empty() ? 0 : 1); ++i) {
    const bool traced = i == steps;  // one step more, neither timed nor compared
    std::unique_ptr<torch::autograd::profiler::RecordProfile> profile;
    if (traced) profile = std::make_unique<torch::autograd::profiler::RecordProfile>(o.trace);
    auto t0 = Clock::now();
    auto metrics = trainer.step(samples);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    profile.reset();  // writes the trace
    if (traced) break;
    if (i > 0) times.push_back(s);
    losses.push_back(metrics.at("loss"));
    grad_norms.push_back(metrics.at("grad_norm"));
    rows = metrics.at("batch/microbatches_per_step");
    calls = metrics.at("batch/forward_calls_per_step");
    forwarded = metrics.at("batch/forwarded_tokens_per_step");
    shared = metrics.at("batch/shared_prompt_tokens_per_step");
    segmented = metrics.at("batch/segmented_rows_per_step");
  }
  const double step_s = median(times);

  json py;
  try {
    py = run_python(o, dir);
  } catch (...) {
    if (!o.keep_files) std::filesystem::remove_all(dir);
    throw;
  }
  if (!o.keep_files) std::filesystem::remove_all(dir);

  auto py_losses = py.at("losses").get<std::vector<double>>();
  auto py_norms = py.at("grad_norms").get<std::vector<double>>();
  const double py_step_s = py.at("median_step_s").get<double>();
  check(py_losses.size() == losses.size(), "bench grpo-step", "the baseline ran a different number of steps");
  // Scale of the loss when its terms do not cancel: sum |A_i| L_i / N.
  double scale = 0;
  for (const auto& s : samples) scale += std::fabs(s.advantage) * double(s.completion_ids.size());
  scale /= double(completion_tokens);
  const double diff = std::fabs(losses[0] - py_losses[0]);
  const double rel = diff / std::max(std::fabs(losses[0]), 1e-12);
  double worst = 0;  // every step, relative to max(|loss|, 1% of the scale)
  for (size_t i = 0; i < losses.size(); ++i)
    worst = std::max(worst, std::fabs(losses[i] - py_losses[i]) / std::max(std::fabs(losses[i]), 0.01 * scale));
  const double gn_rel = std::fabs(grad_norms[0] - py_norms[0]) / std::max(grad_norms[0], 1e-30);
  json result = {
      {"model", o.model_dir.empty() ? "generated-" + o.size : o.model_dir},
      {"params", m->num_base_parameters()},
      {"lora_params", [&] { int64_t n = 0; for (auto& p : m->lora_parameters()) n += p.numel(); return n; }()},
      {"lora_r", o.lora_r},
      {"threads", threads},
      {"device", device.str()},
      {"samples", int64_t(samples.size())},
      {"tokens", tokens},
      {"completion_tokens", completion_tokens},
      {"python_padded_tokens", py.value("padded_tokens", 0)},
      {"loss_type", cfg.loss_type},
      {"importance_sampling_level", cfg.importance_sampling_level},
      {"token_budget", cfg.token_budget},
      {"rows", rows},
      {"row_layout", o.row_layout},
      {"forward_calls", calls},
      {"segmented_rows", segmented},
      {"share_prompts", o.share_prompts},
      {"forwarded_tokens", forwarded},
      {"shared_prompt_tokens", shared},
      {"per_device_train_batch_size", o.per_device_train_batch_size},
      {"step_s", step_s},
      {"python_step_s", py_step_s},
      {"tok_s", double(tokens) / step_s},
      {"python_tok_s", double(tokens) / py_step_s},
      {"speedup", py_step_s / step_s},
      {"blas", blas_description()},
      {"loss", losses[0]},
      {"python_loss", py_losses[0]},
      {"loss_abs_diff", diff},
      {"loss_rel_diff", rel},
      {"loss_max_rel_diff_all_steps", worst},
      {"grad_norm", grad_norms[0]},
      {"python_grad_norm", py_norms[0]},
      {"grad_norm_rel_diff", gn_rel},
      {"losses", losses},
      {"python_losses", py_losses},
      {"torch_version", py.value("torch_version", "")},
  };
  if (o.keep_files) result["files"] = dir;
  check(rel <= o.loss_rtol || diff <= o.loss_rtol * 0.01 * scale, "bench grpo-step",
        "loss mismatch: ours " + std::to_string(losses[0]) + ", Python " + std::to_string(py_losses[0]) +
            " (" + result.dump() + ")");
  check(worst <= o.loss_rtol, "bench grpo-step", "loss mismatch after optimizer steps: " + result.dump());
  check(gn_rel <= 10 * o.loss_rtol, "bench grpo-step", "grad_norm mismatch: " + result.dump());
  return result;
}

}  // namespace grpo::grpo
