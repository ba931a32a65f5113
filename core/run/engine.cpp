// The async engine (engine.h): construction, events and the bucket, control and retunes, the
// trainer loop, publication and checkpoints. The pipeline threads are RolloutPipeline's.
#include "core/run/engine.h"
#include "core/run/hub_pusher.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include <torch/torch.h>

#include "core/common/blas_kernels.h"
#include "core/common/blas_threads.h"
#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/log.h"
#include "core/common/timing.h"
#include "core/grpo/config_schema_json.h"
#include "core/model/flops.h"
#include "core/model/peft_io.h"
#include "core/records/step_logger.h"
#include "core/run/checkpoint.h"
#include "core/run/local_generator.h"
#include "core/run/remote_source.h"
#include "core/run/run_setup.h"
#include "core/run/step_assembler.h"

namespace grpo::run {

Engine::Engine(grpo::TrainConfig cfg, const std::string& run_dir, EngineOptions options)
    : opts_(std::move(options)), dir_(run_dir), run_(prepare_run(std::move(cfg), /*fresh_start=*/!opts_.resume)) {
  // An event's "seq" numbers it within the run, across resumes: one past the largest in the file.
  for (const auto& e : dir_.read_events())
    if (e.contains("seq") && e["seq"].is_number_integer())
      next_event_seq_ = std::max(next_event_seq_, e["seq"].get<int64_t>() + 1);
  run_.rewards.set_event_sink([this](const nlohmann::json& e) { event(e); });  // reward_timeout and friends
  dir_.remove_stale_temporaries();  // left by a trainer that was killed mid-write
  PipelineOptions po;
  po.next_group_id = opts_.resume ? restore_from_checkpoint() : 0;
  po.policy = &run_.policy;
  po.stream = run_.stream.get();
  po.rewards = &run_.rewards;
  po.rewards_mutex = &rewards_mu_;
  po.event = [this](nlohmann::json e) { event(std::move(e)); };
  po.before_generate = opts_.before_generate;
  pipeline_ = std::make_unique<RolloutPipeline>(run_.config, std::move(po));
  write_resolved_config(dir_, config(), run_.policy);
  if (config().push_to_hub) {  // a run that could never push fails here, before it trains
    HubPusherOptions ho;
    ho.run_dir = dir_.root();
    ho.repo_id = config().hub_model_id;
    ho.revision = config().hub_revision;
    ho.private_repo = config().hub_private_repo;
    ho.strategy = grpo::kHubStrategies.parse(config().hub_strategy, "hub_strategy");
    ho.always_push = config().hub_always_push;
    ho.retry_base_ms = opts_.hub_retry_base_ms;
    ho.event = [this](nlohmann::json e) { event(std::move(e)); };
    hub_ = std::make_unique<HubPusher>(std::move(ho));
  }
  for (int i = 0; i < opts_.local_generators; ++i)
    add_source(std::make_unique<LocalGenerator>(run_.policy, "local-" + std::to_string(i), version_.load()));
  // Remote workers (by URL, discovered, or launched through Slurm and joining): one source over the
  // router. A served run has one too, empty until workers join (grpo workers launch, the app's
  // Launch on Slurm): it waits for them quietly, as nobody asked for any yet.
  const bool asked = !config().worker_urls.empty() || config().discovery || config().slurm_workers > 0;
  if (asked || !config().serve.empty()) {
    auto remote = remote_options_from_config(config(), run_dir);
    remote.on_event = [this](const nlohmann::json& e) { event(e); };
    remote.joins = true;
    if (config().slurm_workers > 0) remote.wait_for_workers_s = 300;  // queued jobs: warn less often
    if (!asked) remote.wait_for_workers_s = 1e9;
    add_source(std::make_unique<RemoteSource>(std::move(remote)));
  }
}

Engine::~Engine() {
  hub_.reset();  // its thread writes events: gone before the members it uses
  stop();
  if (pipeline_) pipeline_->join();
  try {
    stop_fleet();
  } catch (const std::exception& e) {
    log_error(std::string("engine: ") + e.what());
  }
}

void Engine::add_source(std::unique_ptr<RolloutSource> source) {
  check(state_.load() == EngineState::Idle, "engine", "sources must be added before run()");
  if (version_.load() > 0) source->on_version_published(version_.load(), dir_.adapter_dir(version_.load()));
  sources_.push_back(std::move(source));
}

void Engine::event(nlohmann::json e) {
  e["time"] = wall_time_s();
  e["step"] = step_.load();
  {
    std::lock_guard<std::mutex> lock(events_mu_);
    e["seq"] = next_event_seq_++;  // its identity: the live copy and the file's line carry the same
  }
  if (opts_.on_event) {
    try {
      opts_.on_event(e);
    } catch (const std::exception& err) {
      log_error(std::string("event listener: ") + err.what());
    }
  }
  // Events the bucket refused (full disk) wait here and go out first, in order, once it takes writes.
  std::lock_guard<std::mutex> lock(events_mu_);
  constexpr size_t kMaxUnwritten = 10000;
  if (unwritten_events_.size() >= kMaxUnwritten) unwritten_events_.pop_front();
  unwritten_events_.push_back(std::move(e));
  while (!unwritten_events_.empty()) {
    try {
      dir_.append_event(unwritten_events_.front());
    } catch (const Error& err) {
      if (unwritten_events_.size() == 1) log_error(std::string(err.what()) + " (events are kept and written later)");
      return;
    }
    unwritten_events_.pop_front();
  }
}

HeldEvents Engine::held_events() {
  std::lock_guard<std::mutex> lock(events_mu_);
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(dir_.events_path(), ec);
  return {ec ? 0 : static_cast<uint64_t>(bytes), unwritten_events_};
}

nlohmann::json Engine::config_schema() const { return grpo::config_schema_json(grpo::train_config_schema()); }

// A bucket that fills up (or hits a quota, a file-size limit, an I/O error) pauses the run instead
// of ending it: the trainer waits here and retries the same write with backoff (0.25 s doubling to
// 10 s), and carries on by itself once it succeeds. Writers go through temporary files and
// renames, so a failed attempt leaves nothing half-written visible. Other errors propagate.
// During the run stop() ends the wait (the run then fails, naming the write); during the final
// writes after a stop, a second stop() does.
void Engine::bucket_write(const std::string& what, const std::function<void()>& write) {
  const auto t0 = Clock::now();
  double backoff_s = 0.25;
  int attempts = 0;
  EngineState before = EngineState::Running;
  std::string last;
  for (;;) {
    std::string error, errno_text;  // the failure, and its errno text when the file system's doing
    try {
      write();
      break;
    } catch (const Error& e) {
      error = e.context().empty() ? e.message() : e.context() + ": " + e.message();  // no "disk full?" hint
      if ((errno_text = storage_fault_of(error)).empty()) throw;
    }
    if (++attempts == 1) {
      before = state_.exchange(EngineState::Paused);
      const std::string fs = describe_filesystem(dir_.root());
      event({{"event", "bucket_write_failed"}, {"severity", "error"},
             {"message", "cannot write " + what + " into the bucket " + dir_.root() + ": " + error + "; the run is paused"},
             {"advice", "free space on " + fs + (errno_text == std::strerror(EFBIG) ? " or raise the file-size limit (ulimit -f)" : "") +
                        " (or fix its quota or device); the run resumes by itself once writes succeed"},
             {"path", dir_.root()}, {"error", errno_text}, {"filesystem", fs}});
      log_error("bucket full or failing: cannot write " + what + ": " + error +
                "; the run is paused and retries until writes succeed");
    } else if (error != last || (attempts & (attempts - 1)) == 0) {
      log_warn("bucket: writing " + what + " still fails (attempt " + std::to_string(attempts) + "): " + error);
    }
    last = error;
    std::unique_lock<std::mutex> lock(mu_);
    const bool give_up = control_cv_.wait_for(lock, std::chrono::duration<double>(backoff_s), [&] {
      return stop_requests_at_end_ < 0 ? stopping_.load() : stop_requests_.load() > stop_requests_at_end_;
    });
    if (give_up) throw Error(what, "not written (" + error + "): stopped while the bucket refused writes");
    backoff_s = std::min(backoff_s * 2, 10.0);
  }
  if (attempts == 0) return;
  EngineState paused = EngineState::Paused;
  state_.compare_exchange_strong(paused, before);
  const double waited = seconds_since(t0);
  event({{"event", "bucket_write_failed_cleared"},
         {"message", "the bucket takes writes again: wrote " + what + " after " + std::to_string(attempts) +
                         " failed attempts over " + std::to_string(static_cast<int64_t>(waited)) + " s; the run continues"},
         {"attempts", attempts}, {"paused_s", waited}});
  log_info("bucket: " + what + " written after " + std::to_string(attempts) + " failed attempts; resuming");
}

// ---------------------------------------------------------------- control

void Engine::pause() {
  std::lock_guard<std::mutex> lock(mu_);
  if (paused_) return;
  paused_ = true;
  if (pipeline_) pipeline_->set_paused(true);
  control_cv_.notify_all();
}

void Engine::resume() {
  std::lock_guard<std::mutex> lock(mu_);
  paused_ = false;
  if (pipeline_) pipeline_->set_paused(false);
  control_cv_.notify_all();
}

void Engine::stop() {
  ++stop_requests_;
  stopping_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    control_cv_.notify_all();
  }
  if (pipeline_) pipeline_->stop();
}

std::string Engine::retune(const nlohmann::json& changes) {
  if (!changes.is_object() || changes.empty()) return "a retune is a non-empty object of settings";
  for (const auto& [key, value] : changes.items())
    if (!grpo::is_retunable(key)) {
      auto known = grpo::config_keys();
      bool exists = std::find(known.begin(), known.end(), key) != known.end();
      return exists ? "key \"" + key + "\" cannot change on a live run" : "unknown key \"" + key + "\"";
    }
  std::lock_guard<std::mutex> lock(mu_);
  grpo::TrainConfig probe = *run_.config;  // the trainer thread replaces the pointer under mu_ only
  try {
    nlohmann::json merged = pending_retune_;
    merged.update(changes);
    probe.apply(merged, "retune");
    probe.validate("retune");
    check_fits_context(run_.policy, probe, "retune");
    check(probe.reward_weights.empty() || probe.reward_weights.size() == run_.rewards.size(), "retune",
          "reward_weights needs " + std::to_string(run_.rewards.size()) + " values");
    pending_retune_ = merged;
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void Engine::apply_pending_retunes(int64_t step) {
  nlohmann::json changes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_retune_.empty()) return;
    changes = std::exchange(pending_retune_, nlohmann::json::object());
    nlohmann::json old_values = nlohmann::json::object();
    const auto before = run_.config->to_json();
    for (const auto& [k, v] : changes.items()) old_values[k] = before.at(k);
    grpo::TrainConfig next = *run_.config;
    next.apply(changes, "retune");
    run_.config = std::make_shared<const grpo::TrainConfig>(std::move(next));
    const grpo::TrainConfig& cfg = *run_.config;
    if (changes.contains("reward_weights")) {
      std::lock_guard<std::mutex> rlock(rewards_mu_);
      run_.rewards.set_weights(cfg.reward_weights);
    }
    run_.trainer->retune(run_.config);
    pipeline_->set_config(run_.config);
    if (changes.contains("max_staleness"))
      for (auto& s : sources_) s->on_max_staleness(cfg.max_staleness);
    event({{"event", "retune"}, {"applied_at_step", step}, {"old", old_values}, {"new", changes}});
  }
}

double Engine::evaluate(int64_t limit) {
  if (run_.data.eval.empty()) return NAN;
  const int64_t n = limit > 0 ? limit : config().eval_size;
  return eval_accuracy(run_.policy, run_.rewards, run_.data.eval, config(), std::max<int64_t>(0, n), &rewards_mu_);
}

int64_t Engine::queued_groups() const { return pipeline_ ? static_cast<int64_t>(pipeline_->queued_groups()) : 0; }

void Engine::publish_version() {
  const int64_t v = version_.load() + 1;
  // base_model_name_or_path is the name the run was given (a repo id stays a repo id), as
  // transformers' config._name_or_path is the string passed to from_pretrained.
  const std::string d = dir_.publish_adapter(v, [&](const std::string& tmp) { model::save_adapter(*run_.policy.model, tmp, config().model_name_or_path); },
                                             RunDirectory::keep_versions(config().max_staleness));
  version_ = v;
  for (auto& s : sources_) s->on_version_published(v, d);
}

std::string Engine::save_checkpoint_now() {
  CheckpointState st;
  st.step = step_.load();
  st.policy_version = version_.load();
  std::tie(st.data_cursor, st.next_group_id) = pipeline_->cursor();
  st.config = config().to_json();
  st.trainer = run_.trainer->controller_state();
  return save_checkpoint(dir_, *run_.policy.model, run_.trainer->optimizer(), st);
}

int64_t Engine::restore_from_checkpoint() {
  auto ckpt = find_latest_checkpoint(dir_.root());
  if (!ckpt) {
    // Killed before its first checkpoint: start over at step 0, keeping version names unique.
    dir_.truncate_metrics(0);
    for (int64_t v : dir_.adapter_versions()) version_ = std::max(version_.load(), v);
    event({{"event", "resume"}, {"checkpoint", nullptr}, {"policy_version", version_.load()},
           {"note", "no intact checkpoint: starting from step 0"}});
    return 0;
  }
  for (const auto& s : ckpt->skipped) event({{"event", "warning"}, {"message", "skipped checkpoint " + s}});
  restore_checkpoint(*ckpt, *run_.policy.model, run_.trainer->optimizer());
  if (!ckpt->state.trainer.empty())  // checkpoints written before the controller was kept have none
    run_.trainer->restore_controller_state(ckpt->state.trainer, path_join(ckpt->dir, "state.json"));
  step_ = ckpt->state.step;
  run_.stream->restore(rollout::DataCursor::from_json(ckpt->state.data_cursor));
  const int64_t kept = dir_.truncate_metrics(ckpt->state.step);
  // Adapter names are never reused: versions published after this checkpoint belong to an
  // abandoned timeline, so the checkpoint's weights are published as the next new version.
  int64_t newest = ckpt->state.policy_version;
  for (int64_t v : dir_.adapter_versions()) newest = std::max(newest, v);
  version_ = newest;
  publish_version();
  event({{"event", "resume"}, {"checkpoint", ckpt->dir}, {"step", ckpt->state.step},
         {"checkpoint_policy_version", ckpt->state.policy_version}, {"policy_version", version_.load()},
         {"metrics_lines_kept", kept}});
  return ckpt->state.next_group_id;
}

void Engine::start_pipeline() {
  check(state_.load() == EngineState::Idle, "engine", "run() called twice");
  check(!sources_.empty(), "engine", "no rollout sources", "use local_generators >= 1 or add workers");
  state_ = EngineState::Running;
  bool measured = false;  // before the generators start, so the measurement has the machine to itself
  peak_flops_ = model::mfu_peak_flops(config().mfu_peak_tflops, run_.policy.model->device(), run_.policy.model->dtype(), &measured);
  if (const auto advice = blas_advice(); !advice.empty()) log_warn(advice);
  started_ = Clock::now();
  event({{"event", "start"}, {"mode", "async"}, {"max_steps", config().max_steps}, {"sources", sources_.size()},
         {"policy_version", version_.load()}, {"mfu_peak_tflops", peak_flops_ / 1e12},
         {"mfu_peak", measured ? "measured" : "mfu_peak_tflops"}, {"blas", blas_description()}});
  pipeline_->set_trainer_step(step_.load(), version_.load());  // a resumed run counts from its step
  pipeline_->start(sources_);
}

// A pause holds the trainer here, at a step boundary (the event first, so a reader that sees
// Paused finds it logged).
bool Engine::hold_if_paused() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!paused_) return false;
  event({{"event", "pause"}, {"inflight_samples", pipeline_->inflight_samples()}, {"queued_groups", pipeline_->queued_groups()}});
  state_ = EngineState::Paused;
  control_cv_.wait(lock, [&] { return !paused_ || stopping_.load(); });
  if (stopping_.load()) return true;
  state_ = EngineState::Running;
  event({{"event", "resume"}, {"queued_groups", pipeline_->queued_groups()}});
  return true;
}

std::string Engine::run(const std::function<void(const StepReport&)>& on_step) {
  int local = 0;
  for (auto& s : sources_) local += dynamic_cast<LocalGenerator*>(s.get()) ? 1 : 0;
  // With no local generator the trainer still shares the cores with torch's own intra-op pool (and
  // often with workers on this machine): OpenBLAS's default pool, spinning on every core, made a
  // step of the demo 2.5x slower on 2 cores (fwd+bwd 4.2 s against 1.7 s with half the threads).
  BlasThreadScope blas_threads(1 + std::max(local, 1));
  start_pipeline();
  try {
    start_fleet();
  } catch (const std::exception& e) {  // no workers and nothing else to generate: the run ends here
    stop();
    pipeline_->join();
    state_ = EngineState::Failed;
    event({{"event", "error"}, {"message", e.what()}});
    throw;
  }
  StepLogger logger(dir_, [this](const std::string& what, const std::function<void()>& write) { bucket_write(what, write); });
  ThroughputAdvisor advisor;
  bool unpublished = false;
  std::string failure;
  // The batch being trained and the steps taken on it: num_iterations steps share one batch
  // (TRL's mu). A resumed run starts a fresh batch.
  std::optional<AssembledStep> batch;
  int64_t passes = 0;
  try {
    while (step_.load() < config().max_steps && !stopping_.load()) {
      if (hold_if_paused()) advisor.restart_window();  // paused time is not step time
      if (stopping_.load()) break;
      const int64_t step = step_.load() + 1;
      apply_pending_retunes(step);
      std::map<std::string, double> m;
      if (!batch || passes >= config().num_iterations) {
        auto groups = pipeline_->collect(config().prompts_per_step, version_.load(), config().max_staleness, m);
        if (static_cast<int64_t>(groups.size()) < config().prompts_per_step) break;  // stopping
        std::vector<const ScoredGroup*> scored;
        for (const auto& g : groups) scored.push_back(g.get());
        batch = assemble_step(step, scored);
        passes = 0;
      }
      const StepReport report = train_step(step, *batch, passes++, std::move(m), advisor, unpublished);
      pipeline_->set_trainer_step(step, version_.load());
      logger.log(report);
      // The checkpoint comes after the step's metrics line: a kill -9 between the two then resumes
      // from the previous checkpoint, where the other order left that step missing from the
      // metrics (its checkpoint existed, its line did not).
      if (config().save_steps > 0 && step % config().save_steps == 0) {
        std::string saved;
        bucket_write("checkpoint step-" + std::to_string(step), [&] { saved = save_checkpoint_now(); });
        if (hub_ && !saved.empty()) hub_->on_checkpoint(step, saved);  // snapshots it; the push runs beside
      }
      if (on_step) on_step(report);
    }
  } catch (const std::exception& e) {
    failure = e.what();
  }
  return finish_run(failure, unpublished);
}

// One optimizer step on scored groups: train, publish when due, the step's metrics and verdict,
// and the eval when due. `m` holds the intake metrics of collect().
StepReport Engine::train_step(int64_t step, AssembledStep& assembled, int64_t pass, std::map<std::string, double> m,
                              ThroughputAdvisor& advisor, bool& unpublished) {
  m.merge(run_.trainer->step(assembled.samples, pass));
  // The batch's rewards and sample traces belong to the step that took it in (TRL logs them at
  // generation too); a reuse pass logs what training measured.
  if (pass == 0)
    for (const auto& [k, v] : assembled.metrics) m[k] = v;
  step_ = step;
  unpublished = true;
  if (step % config().weight_sync_steps == 0) {
    const auto t_sync = Clock::now();
    bucket_write("adapter policy-v" + std::to_string(version_.load() + 1), [&] { publish_version(); });
    unpublished = false;
    m["perf/weight_sync_s"] = seconds_since(t_sync);
  }
  pipeline_->drain_window(m);
  m["epoch"] = static_cast<double>(pipeline_->epoch());
  const Verdict verdict = advisor.close_window(m, pipeline_->counters());
  add_mfu(m, peak_flops_);
  StepReport report{step, config().max_steps, seconds_since(started_), version_.load(), std::move(m), verdict.verdict, verdict.advice};
  if (config().eval_steps > 0 && !run_.data.eval.empty() && (step % config().eval_steps == 0 || step == config().max_steps)) {
    // Greedy eval on the trainer's own weights (the generators keep running meanwhile).
    const auto t_eval = Clock::now();
    const double acc = evaluate();
    report.metrics["perf/eval_s"] = seconds_since(t_eval);
    if (!std::isnan(acc)) report.metrics["eval/accuracy"] = acc;
  }
  if (pass == 0) report.samples = std::move(assembled.traces);
  return report;
}

// After the loop: the threads stop, and the final adapter version, checkpoint and adapter/ copy
// are written (a stop during these writes ends a bucket wait). Rethrows a failure of the loop.
std::string Engine::finish_run(const std::string& failure, bool unpublished) {
  const bool stopped_early = step_.load() < config().max_steps;
  stop();
  pipeline_->join();
  stop_fleet();  // no job of the run is left behind, failed or not
  if (!failure.empty()) {
    state_ = EngineState::Failed;
    event({{"event", "error"}, {"message", failure}});
    throw Error("engine", failure);
  }
  state_ = EngineState::Stopping;
  stop_requests_at_end_ = stop_requests_.load();  // from here a further stop() ends a bucket wait
  if (unpublished || version_.load() == 0)
    bucket_write("adapter policy-v" + std::to_string(version_.load() + 1), [&] { publish_version(); });
  bucket_write("the final checkpoint", [&] { save_checkpoint_now(); });
  bucket_write("adapter/", [&] { model::save_adapter(*run_.policy.model, dir_.path("adapter"), config().model_name_or_path); });
  nlohmann::json end = {{"event", stopped_early ? "stop" : "finished"}, {"policy_version", version_.load()},
              {"dropped_stale_total", pipeline_->dropped_stale_total()}, {"adapter", dir_.path("adapter")}};
  // The final push is waited for (TRL's end-of-training push_to_hub); a failure is its own event,
  // with advice, and the run still ends as it did: the adapter is on disk.
  if (hub_) end["hub_pushed"] = hub_->push_final(step_.load(), dir_.path("adapter"));
  event(std::move(end));
  state_ = EngineState::Finished;
  return dir_.adapter_dir(version_.load());
}

}  // namespace grpo::run
