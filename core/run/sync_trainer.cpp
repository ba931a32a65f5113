#include "core/run/sync_trainer.h"

#include <chrono>
#include <cmath>

#include <torch/torch.h>

#include "core/common/blas_kernels.h"
#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/log.h"
#include "core/common/timing.h"
#include "core/grpo/advantages.h"
#include "core/model/flops.h"
#include "core/model/peft_io.h"
#include "core/records/step_logger.h"
#include "core/records/throughput_advisor.h"
#include "core/rollout/dataset_source.h"
#include "core/run/step_assembler.h"

namespace grpo::run {

SyncTrainer::SyncTrainer(grpo::TrainConfig cfg, const std::string& run_dir)
    : dir_(run_dir), run_(prepare_run(std::move(cfg), /*fresh_start=*/true)) {
  sampler_ = std::make_unique<rollout::Sampler>(run_.policy.model, run_.policy.tokenizer.get());
  write_resolved_config(dir_, this->cfg(), run_.policy);
}

SyncTrainer::~SyncTrainer() = default;

double SyncTrainer::evaluate(int64_t limit) {
  return eval_accuracy(run_.policy, run_.rewards, run_.data.eval, cfg(), limit);
}

// One synchronous step: generate every group with the current weights, score them together,
// train. Returns the step's report (without its timing, which run() adds).
StepReport SyncTrainer::one_step(int64_t step) {
  if (batch_ && passes_ < cfg().num_iterations) {
    // A later step on the same batch (num_iterations): no generation; rewards were logged when
    // the batch was sampled.
    auto metrics = run_.trainer->step(batch_->samples, passes_++);
    return StepReport{step, cfg().max_steps, 0, version_, std::move(metrics), "", ""};
  }
  const int64_t G = cfg().num_generations;
  auto examples = run_.stream->next_batch(cfg().prompts_per_step);
  std::vector<std::vector<int64_t>> prompts;
  std::vector<uint64_t> keys;
  for (const auto& ex : examples) {
    prompts.push_back(run_.policy.encode_prompt(ex, cfg().max_prompt_length));
    keys.push_back(static_cast<uint64_t>(ex.index));
  }
  const auto t_gen = std::chrono::steady_clock::now();
  const int64_t tokens_before = sampler_->tokens_generated();
  auto params = run_.policy.sampling_params(cfg(), static_cast<uint64_t>(cfg().seed) * 1000003ULL + static_cast<uint64_t>(step));
  auto completions = sampler_->generate(prompts, G, params, /*share_prefix=*/true, keys);
  const double gen_s = seconds_since(t_gen);
  const double generated = static_cast<double>(sampler_->tokens_generated() - tokens_before);

  const auto t_score = std::chrono::steady_clock::now();
  std::vector<ScoredGroup> groups(examples.size());
  std::vector<ScoredGroup*> to_score;
  for (size_t p = 0; p < examples.size(); ++p) {
    groups[p].group_id = static_cast<int64_t>(p);
    groups[p].example = examples[p];
    groups[p].prompt_ids = prompts[p];
    groups[p].result.completions = std::move(completions[p]);
    groups[p].result.policy_version = version_;
    to_score.push_back(&groups[p]);
  }
  // The whole step is scored together ("batch" scaling spans it).
  score_groups(run_.policy, run_.rewards, grpo::parse_scale_rewards(cfg().scale_rewards, "scale_rewards"), to_score,
               nullptr, grpo::kMultiObjective.parse(cfg().multi_objective_aggregation, "multi_objective_aggregation"));
  const double score_s = seconds_since(t_score);

  batch_ = assemble_step(step, std::vector<const ScoredGroup*>(to_score.begin(), to_score.end()));
  passes_ = 0;
  AssembledStep& assembled = *batch_;
  auto metrics = run_.trainer->step(assembled.samples, passes_++);
  for (const auto& [k, v] : assembled.metrics) metrics[k] = v;
  metrics["perf/generate_s"] = gen_s;
  metrics["rollout/score_s"] = score_s;
  metrics["rollout/generated_tok_s"] = gen_s > 0 ? generated / gen_s : 0.0;
  metrics["sample/staleness_mean"] = 0.0;
  metrics["sample/staleness_max"] = 0.0;
  StepReport report{step, cfg().max_steps, 0, version_, std::move(metrics), "", ""};
  report.samples = std::move(assembled.traces);
  return report;
}

std::string SyncTrainer::run(const std::function<void(const StepReport&)>& on_step, const std::atomic<bool>* stop) {
  const auto t_start = std::chrono::steady_clock::now();
  auto publish = [&](int64_t version) {
    return dir_.publish_adapter(version, [&](const std::string& d) {
      model::save_adapter(*run_.policy.model, d, cfg().model_name_or_path);
    }, RunDirectory::keep_versions(cfg().max_staleness));
  };
  bool measured = false;
  if (const auto advice = blas_advice(); !advice.empty()) log_warn(advice);
  const double peak = model::mfu_peak_flops(cfg().mfu_peak_tflops, run_.policy.model->device(), run_.policy.model->dtype(), &measured);
  dir_.append_event({{"time", wall_time_s()}, {"event", "start"}, {"mode", "sync"}, {"max_steps", cfg().max_steps},
                     {"mfu_peak_tflops", peak / 1e12}, {"mfu_peak", measured ? "measured" : "mfu_peak_tflops"},
                     {"blas", blas_description()}});
  auto last_end = std::chrono::steady_clock::now();
  bool unpublished = false;
  StepLogger logger(dir_);
  for (int64_t step = 1; step <= cfg().max_steps; ++step) {
    if (stop && stop->load()) {
      dir_.append_event({{"time", wall_time_s()}, {"event", "stop"}, {"step", step - 1}});
      break;
    }
    StepReport report = one_step(step);
    unpublished = true;
    if (step % cfg().weight_sync_steps == 0) {
      const auto t_sync = std::chrono::steady_clock::now();
      publish(++version_);
      unpublished = false;
      report.metrics["perf/weight_sync_s"] = seconds_since(t_sync);
    }
    report.policy_version = version_;
    if (cfg().eval_steps > 0 && !run_.data.eval.empty() && (step % cfg().eval_steps == 0 || step == cfg().max_steps)) {
      const auto t_eval = std::chrono::steady_clock::now();
      report.metrics["eval/accuracy"] = evaluate(cfg().eval_size);
      report.metrics["perf/eval_s"] = seconds_since(t_eval);
    }
    const auto now = std::chrono::steady_clock::now();
    report.metrics["perf/step_s"] = std::chrono::duration<double>(now - last_end).count();
    last_end = now;
    add_mfu(report.metrics, peak);
    report.metrics["epoch"] = static_cast<double>(run_.stream->epoch());
    report.elapsed_s = seconds_since(t_start);
    logger.log(report);
    if (on_step) on_step(report);
  }
  // The final weights are always a published version, and a copy stays in <run>/adapter.
  if (unpublished || version_ == 0) publish(++version_);
  const std::string final_dir = dir_.adapter_dir(version_);
  model::save_adapter(*run_.policy.model, dir_.path("adapter"), cfg().model_name_or_path);
  dir_.append_event({{"time", wall_time_s()}, {"event", "finished"}, {"policy_version", version_}, {"adapter", dir_.path("adapter")}});
  return final_dir;
}

}  // namespace grpo::run
