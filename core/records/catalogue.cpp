#include "core/records/catalogue.h"

#include "core/common/json_fields.h"
#include "core/common/strings.h"

namespace grpo::run {
namespace {

MetricSpec m(std::string name, std::string unit, std::string group, std::string doc) {
  return MetricSpec{std::move(name), "", std::move(unit), std::move(group), std::move(doc), ""};
}

MetricSpec pattern(std::string prefix, std::string suffix, std::string group, std::string doc) {
  return MetricSpec{std::move(prefix), std::move(suffix), "", std::move(group), std::move(doc), ""};
}

// What the loss and the optimizer step log (docs/formulas.md, "Reward metrics", "Loss metrics").
std::vector<MetricSpec> training_metrics() {
  return {
      // reward (docs/formulas.md, "Reward metrics")
      m("reward", "", "reward", "Mean weighted reward of the step's trained completions."),
      m("reward_std", "", "reward", "Mean over groups of the reward's standard deviation."),
      m("frac_reward_zero_std", "fraction", "reward", "Groups whose rewards are all equal (no learning signal)."),
      pattern("rewards/", "/mean", "reward", "One reward function's own (unweighted) mean score."),
      pattern("rewards/", "/std", "reward", "One reward function's own score standard deviation."),
      m("sample/unscorable_frac", "fraction", "reward", "Completions no reward function could score (NaN)."),
      // loss (docs/formulas.md, "Loss metrics")
      m("loss", "", "loss", "The GRPO loss of the step."),
      m("kl", "", "loss", "k3 estimate between the sampler's and the trainer's policy."),
      m("kl_ref", "", "loss", "KL to the reference model (beta > 0 only)."),
      m("entropy", "nats", "loss", "Mean token entropy of the trained completions."),
      m("ratio", "", "loss", "Mean importance ratio."),
      m("ratio_min", "", "loss", "Smallest importance ratio."),
      m("ratio_max", "", "loss", "Largest importance ratio."),
      m("clip_ratio/low_mean", "fraction", "loss", "Tokens clipped below 1 - epsilon with a negative advantage."),
      m("clip_ratio/high_mean", "fraction", "loss", "Tokens clipped above 1 + epsilon_high with a positive advantage."),
      m("clip_ratio/region_mean", "fraction", "loss", "Tokens clipped either way."),
      m("clip_ratio/low_min", "fraction", "loss", "Smallest per-completion low-clip fraction."),
      m("clip_ratio/high_max", "fraction", "loss", "Largest per-completion high-clip fraction."),
      m("cispo_clip_ratio", "fraction", "loss", "cispo: tokens whose ratio passed 1 + epsilon_high with a positive advantage (their weight is capped)."),
      m("vespo/phi_seq_mean", "", "loss", "vespo: mean of the per-sequence weight phi."),
      m("entropy_coef", "", "loss", "The entropy bonus's coefficient after the step (adaptive: the controller's)."),
      m("entropy_mask/frac_trained", "fraction", "loss", "top_entropy_quantile < 1: trained tokens at or above the entropy quantile (the rest take no gradient)."),
      m("off_policy_mask/frac_dropped", "fraction", "loss", "off_policy_mask_threshold: completions left out as negative-advantage and too far off-policy."),
      // the proximal-policy correction (docs/formulas.md, "Off-policy correction")
      m("sampling/sampling_logp_difference/mean", "nats", "loss", "Mean |log pi_prox - log pi_sampler| over trained tokens: the trainer-sampler gap."),
      m("sampling/sampling_logp_difference/max", "nats", "loss", "Largest trainer-sampler log-prob gap."),
      m("sampling/importance_sampling_ratio/min", "", "loss", "Smallest proximal/sampler importance weight (after truncation or masking)."),
      m("sampling/importance_sampling_ratio/mean", "", "loss", "Mean proximal/sampler importance weight."),
      m("sampling/importance_sampling_ratio/max", "", "loss", "Largest proximal/sampler importance weight."),
      m("sampling/importance_sampling_ratio/frac_masked", "fraction", "loss", "*_mask modes: weights zeroed outside [clip_min, clip_max] (tokens, or completions per sequence)."),
      m("sampling/importance_sampling_ratio/frac_truncated", "fraction", "loss", "*_truncate modes: weights moved into [clip_min, clip_max]."),
      // optimizer
      m("grad_norm", "", "optimizer", "Global L2 norm of the LoRA gradients before clipping."),
      m("learning_rate", "", "optimizer", "The learning rate the step used."),
      m("epoch", "epochs", "optimizer", "Passes over the training examples so far."),
      // completions
      m("completions/mean_length", "tokens", "completions", "Mean completion length."),
      m("completions/min_length", "tokens", "completions", "Shortest completion."),
      m("completions/max_length", "tokens", "completions", "Longest completion."),
      m("completions/mean_terminated_length", "tokens", "completions", "Mean length of the completions that ended by themselves."),
      m("completions/clipped_ratio", "fraction", "completions", "Completions cut off at max_completion_length."),
      m("num_tokens", "tokens", "completions", "Tokens forwarded by the trainer so far (TRL's num_tokens)."),
  };
}

// How the step's samples were packed, where they came from, and what the step cost.
std::vector<MetricSpec> pipeline_metrics() {
  return {
      // batch: how the step's samples were packed (docs/formulas.md, "Token budget packing")
      m("batch/samples_per_step", "samples", "batch", "Completions trained in the step."),
      m("batch/trained_tokens_per_step", "tokens", "batch", "Completion tokens the loss counts."),
      m("batch/forwarded_tokens_per_step", "tokens", "batch", "Prompt and completion tokens forwarded (a shared prompt once; padding not counted)."),
      m("batch/shared_prompt_tokens_per_step", "tokens", "batch", "Prompt tokens not forwarded because completions shared their prompt (share_prompts)."),
      m("batch/forward_calls_per_step", "calls", "batch", "Model forward calls of the step."),
      m("batch/segmented_rows_per_step", "rows", "batch", "Micro-batches forwarded as one row with attention per segment (the rest in binned sub-rows)."),
      m("batch/microbatches_per_step", "rows", "batch", "Micro-batches (packed rows) of the step."),
      m("batch/samples_per_row", "samples", "batch", "Mean completions per packed row."),
      m("batch/row_tokens_mean", "tokens", "batch", "Mean tokens per packed row."),
      m("batch/row_tokens_max", "tokens", "batch", "Longest packed row."),
      m("batch/row_fill_frac", "fraction", "batch", "How full the packed rows are against token_budget."),
      m("batch/row_imbalance", "", "batch", "Longest row over the mean row."),
      m("batch/dropped_oversize_total", "samples", "batch", "Completions longer than token_budget, left out (run total)."),
      m("batch/reuse_pass", "steps", "batch", "Steps already taken on this batch (num_iterations; 0: a fresh batch)."),
      // sample: the rollouts the step took (docs/formulas.md, "Staleness")
      m("sample/staleness_mean", "versions", "sample", "Mean policy versions between sampling and training."),
      m("sample/staleness_max", "versions", "sample", "Largest staleness trained."),
      m("sample/dropped_stale_total", "groups", "sample", "Groups dropped as older than max_staleness (run total)."),
      m("sample/rollout_queue_size", "groups", "sample", "Scored groups waiting for the trainer."),
      m("sample/time_in_queue_s", "s", "sample", "Mean time a trained group waited in the queue."),
      m("sample/trained_tokens_mean", "tokens", "sample", "Trained tokens per completion."),
      // rollout: generation and scoring since the previous step
      m("rollout/generated_tok_s", "tok/s", "rollout", "Completion tokens generated per second, every source together."),
      m("rollout/inflight", "completions", "rollout", "Completions being generated."),
      m("rollout/duration_s", "s", "rollout", "Mean time to generate one group."),
      m("rollout/backpressure_s", "s", "rollout", "Time the scorer waited for room in the rollout queue."),
      m("rollout/score_queue_size", "groups", "rollout", "Generated groups waiting to be scored."),
      m("rollout/score_s", "s", "rollout", "Time spent scoring."),
      m("rollout/score_wait_s", "s", "rollout", "Time a group waited for the scorer."),
      m("rollout/score_block_s", "s", "rollout", "Time a generator waited for room in the scorer's queue."),
      m("rollout/admission_wait_s", "s", "rollout", "Time a generator was held back: new work would be trained too stale (admission)."),
      m("rollout/outstanding_groups", "groups", "rollout", "Groups started and not yet taken by the trainer."),
      m("rollout/admission_limit_groups", "groups", "rollout", "The most outstanding groups admission allows."),
      // perf
      m("perf/step_s", "s", "perf", "Wall time of the step."),
      m("perf/fwd_bwd_s", "s", "perf", "Forward and backward passes of the step."),
      m("perf/optimizer_s", "s", "perf", "The optimizer update."),
      m("perf/rollout_wait_s", "s", "perf", "Time the trainer waited for rollouts."),
      m("perf/weight_sync_s", "s", "perf", "Publishing the adapter version."),
      m("perf/eval_s", "s", "perf", "The greedy eval after the step (when due)."),
      m("perf/generate_s", "s", "perf", "Generation inside the step (the synchronous loop)."),
      m("perf/train_flops", "FLOP", "perf", "Model FLOPs of the step's forward and backward."),
      m("perf/mfu_fwd_bwd", "fraction", "perf", "Model FLOPs utilisation over forward+backward time."),
      m("perf/mfu_wall_clock", "fraction", "perf", "Model FLOPs utilisation over the step's wall time."),
      m("trainer_idle_frac", "fraction", "perf", "Share of the step the trainer waited for rollouts."),
      m("generation_idle_frac", "fraction", "perf", "Share of the step generation was blocked by back-pressure."),
      m("scorer_idle_frac", "fraction", "perf", "Share of the step the scorer waited for room in the rollout queue."),
      {"trained_tok_s", "", "tok/s", "perf", "Completion tokens trained per second.",
       "batch/trained_tokens_per_step / perf/step_s"},
      // eval
      m("eval/accuracy", "fraction", "eval", "Greedy accuracy on the held-out examples."),
      // the record's own field, shown as a metric by TensorBoard
      m("policy_version", "versions", "run", "The adapter version the step trained (the record's own field)."),
  };
}

std::vector<MetricSpec> make_metrics() {
  std::vector<MetricSpec> all = training_metrics();
  for (auto& spec : pipeline_metrics()) all.push_back(std::move(spec));
  return all;
}

std::vector<EventKindSpec> make_events() {
  return {
      {"start", "started", "info", false},
      {"resume", "resumed", "info", true},
      {"pause", "paused", "info", true},
      {"retune", "retuned", "info", true, "applied_at_step"},
      {"stop", "stopped", "info", true},
      {"finished", "finished", "info", false},
      {"error", "error", "error", true},
      {"warning", "warning", "warning", false},
      {"bucket_write_failed", "bucket write failed", "error", false},
      {"bucket_write_failed_cleared", "bucket writable again", "info", false},
      {"bucket_unreadable", "a worker cannot read the bucket", "warning", false},
      {"bucket_unreadable_cleared", "a worker reads the bucket again", "info", false},
      {"adapter_load_failed", "a worker could not load an adapter", "error", false},
      {"worker_joined", "worker joined", "info", false},
      {"worker_left", "worker left", "warning", false},
      {"worker_quarantined", "worker quarantined", "error", false},
      {"worker_quarantined_cleared", "worker back from quarantine", "info", false},
      {"worker_draining", "worker draining", "info", false},
      {"worker_paused", "worker paused", "info", false},
      {"worker_resumed", "worker resumed", "info", false},
      {"remote_accounting", "remote workers' accounting", "info", false},
      {"worker_join", "a worker asked to join", "info", false},
      {"worker_leave", "a worker left the run", "info", false},
      // Workers launched through Slurm (core/run/worker_fleet.h); a task's end carries its own
      // severity (warning when it failed, was preempted or timed out).
      {"slurm_submitted", "workers submitted to Slurm", "info", true},
      {"slurm_submit_failed", "Slurm refused workers", "error", true},
      {"slurm_job_state", "a Slurm task changed state", "info", false},
      {"slurm_task_ended", "a Slurm worker's task ended", "info", true},
      {"slurm_worker_replaced", "a Slurm worker was replaced", "info", true},
      {"slurm_resubmit_limit", "no more Slurm replacements", "warning", true},
      {"slurm_cancelled", "Slurm jobs cancelled", "info", false},
      {"slurm_cancel_failed", "a Slurm job was not cancelled", "warning", false},
      {"slurm_orphans_cancelled", "a killed trainer's Slurm jobs cancelled", "warning", true},
      {"slurm_orphans_unchecked", "a killed trainer's Slurm jobs unchecked", "warning", false},
      {"slurm_poll_failed", "Slurm did not answer", "warning", false},
      {"reward_timeout", "reward program timed out", "warning", false},
      {"reward_timeout_cleared", "reward program answers again", "info", false},
      {"reward_crashed", "reward program crashed", "warning", false},
      {"reward_crashed_cleared", "reward program runs again", "info", false},
      {"reward_output_flood", "reward program wrote too much", "warning", false},
      {"reward_output_flood_cleared", "reward program output normal again", "info", false},
      {"reward_bad_reply", "reward program replied badly", "warning", false},
      {"reward_bad_reply_cleared", "reward program replies well again", "info", false},
      // Pushes to the Hub while training (core/run/hub_pusher.h): each carries the step it pushes.
      {"hub_push_started", "Hub push started", "info", false},
      {"hub_pushed", "pushed to the Hub", "info", true},
      {"hub_push_skipped", "Hub push skipped: the last one still runs", "info", false},
      {"hub_push_failed", "Hub push failed", "warning", true},
      {"hub_push_failed_cleared", "Hub pushes work again", "info", false},
      {"unreadable", "unreadable line", "warning", false},
  };
}

// A kind that ends in `tail` and has more before it ("_cleared" alone is not a cleared fault).
bool has_suffix(const std::string& s, const std::string& tail) { return s.size() > tail.size() && ends_with(s, tail); }

const std::string kClearedSuffix = "_cleared";

std::string kind_of(const nlohmann::json& e) { return json_string(e, "event"); }

}  // namespace

const std::vector<MetricSpec>& metric_catalogue() {
  static const std::vector<MetricSpec> metrics = make_metrics();
  return metrics;
}

const MetricSpec* find_metric(const std::string& name) {
  for (const auto& m : metric_catalogue())
    if (m.suffix.empty() && m.name == name) return &m;
  for (const auto& m : metric_catalogue())
    if (!m.suffix.empty() && name.size() > m.name.size() + m.suffix.size() && name.rfind(m.name, 0) == 0 &&
        has_suffix(name, m.suffix))
      return &m;
  return nullptr;
}

nlohmann::json metric_catalogue_json() {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& m : metric_catalogue())
    out.push_back({{"name", m.name}, {"suffix", m.suffix}, {"unit", m.unit}, {"group", m.group}, {"doc", m.doc},
                   {"derived", m.derived}});
  return out;
}

const std::vector<EventKindSpec>& event_catalogue() {
  static const std::vector<EventKindSpec> kinds = make_events();
  return kinds;
}

const EventKindSpec* find_event_kind(const std::string& kind) {
  for (const auto& k : event_catalogue())
    if (k.kind == kind) return &k;
  return nullptr;
}

nlohmann::json event_catalogue_json() {
  nlohmann::json kinds = nlohmann::json::array();
  for (const auto& k : event_catalogue())
    kinds.push_back({{"kind", k.kind}, {"label", k.label}, {"severity", k.severity}, {"marker", k.marker},
                     {"step_field", k.step_field}});
  return {{"kinds", std::move(kinds)}, {"fault_field", "advice"}, {"cleared_suffix", kClearedSuffix}};
}

bool event_is_marker(const nlohmann::json& event) {
  const std::string kind = kind_of(event);
  if (kind.empty()) return false;
  if (const auto* k = find_event_kind(kind); k && k->marker) return true;
  if (!json_string(event, "advice").empty()) return true;
  return has_suffix(kind, kClearedSuffix);
}

std::string event_severity(const nlohmann::json& event) {
  const std::string kind = kind_of(event);
  if (has_suffix(kind, kClearedSuffix)) return "cleared";
  if (const std::string own = json_string(event, "severity"); !own.empty()) return own;
  const auto* k = find_event_kind(kind);
  return k ? k->severity : "info";
}

double event_marker_step(const nlohmann::json& event) {
  const auto* k = find_event_kind(kind_of(event));
  for (const char* field : {k ? k->step_field.c_str() : "step", "step"})
    if (const nlohmann::json* v = json_field(event, field); v && v->is_number()) return v->get<double>();
  return NAN;
}

std::string event_label(const nlohmann::json& event) {
  const std::string kind = kind_of(event);
  if (kind.empty()) return "?";
  const auto* k = find_event_kind(kind);
  return k ? k->label : kind;
}

}  // namespace grpo::run
