// The async engine (engine.h): construction, events and the bucket, control and retunes, the
// trainer loop, publication and checkpoints. The pipeline threads (producers, scorer, the
// trainer's intake of scored groups) are in engine_pipeline.cpp.
#include "core/run/engine.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <dlfcn.h>
#include <filesystem>
#include <thread>

#include <torch/torch.h>

#include "core/common/error.h"
#include "core/common/timing.h"
#include "core/common/log.h"
#include "core/model/peft_io.h"
#include "core/run/adapter_import.h"
#include "core/run/checkpoint.h"
#include "core/run/engine_group.h"
#include "core/run/local_generator.h"
#include "core/run/remote_source.h"
#include "core/run/sync_trainer.h"
#include "core/run/tensorboard.h"

namespace grpo::run {
namespace {

// OpenBLAS keeps one global thread pool; when the trainer and local generators multiply
// matrices at the same time, its threads oversubscribe the cores (and older versions serialize
// callers). Splitting the cores between the concurrent callers is faster (BENCHMARKS.md, async).
// Looked up at run time, so other BLAS libraries are simply left alone.
class BlasThreadScope {
public:
  explicit BlasThreadScope(int concurrent_callers) {
    set_ = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
    auto get = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
    if (!set_ || !get || concurrent_callers <= 1) { set_ = nullptr; return; }
    before_ = get();
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    set_(std::max(1, cores / concurrent_callers));
  }
  ~BlasThreadScope() { if (set_) set_(before_); }
private:
  void (*set_)(int) = nullptr;
  int before_ = 1;
};

}  // namespace

const char* to_string(EngineState s) {
  switch (s) {
    case EngineState::Idle: return "idle";
    case EngineState::Running: return "running";
    case EngineState::Paused: return "paused";
    case EngineState::Stopping: return "stopping";
    case EngineState::Finished: return "finished";
    case EngineState::Failed: return "failed";
  }
  return "?";
}

Engine::Engine(grpo::TrainConfig cfg, const std::string& run_dir, EngineOptions options)
    : cfg_(std::move(cfg)), opts_(std::move(options)), dir_(run_dir), policy_(load_policy(cfg_)) {
  if (!opts_.resume) seed_from_init_adapter(policy_, cfg_);  // before the trainer holds the adapter
  torch::manual_seed(static_cast<uint64_t>(cfg_.seed));
  trainer_ = std::make_unique<grpo::GrpoTrainer>(policy_.model, cfg_);
  data_ = load_examples(cfg_);
  check(!data_.train.empty(), "dataset", "no training examples");
  stream_ = std::make_unique<rollout::DatasetStream>(data_.train, static_cast<uint64_t>(cfg_.seed));
  rewards_ = rollout::RewardSet::from_json(cfg_.reward_funcs, cfg_.reward_weights);
  rewards_.set_event_sink([this](const nlohmann::json& e) { event(e); });  // reward_timeout and friends
  dir_.remove_stale_temporaries();  // left by a trainer that was killed mid-write
  if (opts_.resume) restore_from_checkpoint();
  shared_cfg_ = cfg_;
  const int64_t G = cfg_.num_generations;
  score_queue_ = std::make_unique<BoundedQueue<std::shared_ptr<Group>>>(
      static_cast<size_t>(std::max<int64_t>(2, cfg_.prompts_per_step)));
  rollout_queue_ = std::make_unique<BoundedQueue<std::shared_ptr<Group>>>(
      static_cast<size_t>(std::max<int64_t>(1, (cfg_.queue_maxsize + G - 1) / G)));
  nlohmann::json resolved = cfg_.to_json();
  resolved["output_dir"] = run_dir;
  if (!policy_.model_commit.empty()) resolved["model_revision"] = policy_.model_commit;  // the Hub snapshot, pinned
  if (!cfg_.dataset_name.empty())  // the dataset's snapshot too, so the run can be reproduced
    if (auto c = rollout::dataset_commit(dataset_ref(cfg_, cfg_.dataset_train_split)); !c.empty()) resolved["dataset_revision"] = c;
  dir_.write_config(resolved);
  for (int i = 0; i < opts_.local_generators; ++i)
    add_source(std::make_unique<LocalGenerator>(policy_, "local-" + std::to_string(i), version_.load()));
  if (!cfg_.worker_urls.empty() || cfg_.discovery) {  // remote workers: one source over the router
    auto remote = remote_options_from_config(cfg_, run_dir);
    remote.on_event = [this](const nlohmann::json& e) { event(e); };
    add_source(std::make_unique<RemoteSource>(std::move(remote)));
  }
}

Engine::~Engine() {
  stop();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

void Engine::add_source(std::unique_ptr<RolloutSource> source) {
  check(state_.load() == EngineState::Idle, "engine", "sources must be added before run()");
  if (version_.load() > 0) source->on_version_published(version_.load(), dir_.adapter_dir(version_.load()));
  sources_.push_back(std::move(source));
}

void Engine::event(nlohmann::json e) {
  e["time"] = wall_time_s();
  e["step"] = step_.load();
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
      dir_.append_jsonl("events.jsonl", unwritten_events_.front());
    } catch (const Error& err) {
      if (unwritten_events_.size() == 1) log_error(std::string(err.what()) + " (events are kept and written later)");
      return;
    }
    unwritten_events_.pop_front();
  }
}

Engine::HeldEvents Engine::held_events() {
  std::lock_guard<std::mutex> lock(events_mu_);
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(dir_.path("events.jsonl"), ec);
  return {ec ? 0 : static_cast<uint64_t>(bytes), unwritten_events_};
}

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
  control_cv_.notify_all();
}

void Engine::resume() {
  std::lock_guard<std::mutex> lock(mu_);
  paused_ = false;
  control_cv_.notify_all();
}

void Engine::stop() {
  ++stop_requests_;
  stopping_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    control_cv_.notify_all();
    inflight_cv_.notify_all();
  }
  if (score_queue_) score_queue_->close();
  if (rollout_queue_) rollout_queue_->close();
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
  grpo::TrainConfig probe = shared_cfg_;
  try {
    nlohmann::json merged = pending_retune_;
    merged.update(changes);
    probe.apply(merged, "retune");
    probe.validate("retune");
    check(probe.reward_weights.empty() || probe.reward_weights.size() == rewards_.size(), "retune",
          "reward_weights needs " + std::to_string(rewards_.size()) + " values");
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
    const auto before = cfg_.to_json();
    for (const auto& [k, v] : changes.items()) old_values[k] = before.at(k);
    cfg_.apply(changes, "retune");
    shared_cfg_ = cfg_;
    if (changes.contains("reward_weights")) {
      std::lock_guard<std::mutex> rlock(rewards_mu_);
      rewards_.set_weights(cfg_.reward_weights);
    }
    trainer_->retune(cfg_);
    inflight_cv_.notify_all();  // max_inflight_tasks may have grown
    event({{"event", "retune"}, {"applied_at_step", step}, {"old", old_values}, {"new", changes}});
  }
}

// Blocks while paused; returns false when stopping.
bool Engine::wait_while_paused_or_stopping() {
  std::unique_lock<std::mutex> lock(mu_);
  control_cv_.wait(lock, [&] { return !paused_ || stopping_.load(); });
  return !stopping_.load();
}

double Engine::evaluate(int64_t limit) {
  if (data_.eval.empty()) return NAN;
  const int64_t n = limit > 0 ? limit : cfg_.eval_size;
  return greedy_accuracy(policy_, rewards_, data_.eval, cfg_, static_cast<size_t>(std::max<int64_t>(0, n)), &rewards_mu_);
}

void Engine::publish_version() {
  const int64_t v = version_.load() + 1;
  // base_model_name_or_path is the name the run was given (a repo id stays a repo id), as
  // transformers' config._name_or_path is the string passed to from_pretrained.
  const std::string d = dir_.publish_adapter(v, [&](const std::string& tmp) { model::save_adapter(*policy_.model, tmp, cfg_.model_name_or_path); },
                                             cfg_.max_staleness + 2);
  version_ = v;
  for (auto& s : sources_) s->on_version_published(v, d);
}

void Engine::save_checkpoint_now() {
  CheckpointState st;
  st.step = step_.load();
  st.policy_version = version_.load();
  {
    std::lock_guard<std::mutex> lock(mu_);
    st.data_cursor = stream_->cursor().to_json();
    st.next_group_id = next_group_id_;
  }
  st.config = cfg_.to_json();
  save_checkpoint(dir_, *policy_.model, trainer_->optimizer(), st);
}

void Engine::restore_from_checkpoint() {
  auto ckpt = find_latest_checkpoint(dir_.root());
  if (!ckpt) {
    // Killed before its first checkpoint: start over at step 0, keeping version names unique.
    truncate_metrics(dir_.root(), 0);
    for (int64_t v : dir_.adapter_versions()) version_ = std::max(version_.load(), v);
    event({{"event", "resume"}, {"checkpoint", nullptr}, {"policy_version", version_.load()},
           {"note", "no intact checkpoint: starting from step 0"}});
    return;
  }
  for (const auto& s : ckpt->skipped) event({{"event", "warning"}, {"message", "skipped checkpoint " + s}});
  restore_checkpoint(*ckpt, *policy_.model, trainer_->optimizer());
  step_ = ckpt->state.step;
  stream_->restore(rollout::DataCursor::from_json(ckpt->state.data_cursor));
  next_group_id_ = ckpt->state.next_group_id;
  const int64_t kept = truncate_metrics(dir_.root(), ckpt->state.step);
  // Adapter names are never reused: versions published after this checkpoint belong to an
  // abandoned timeline, so the checkpoint's weights are published as the next new version.
  int64_t newest = ckpt->state.policy_version;
  for (int64_t v : dir_.adapter_versions()) newest = std::max(newest, v);
  version_ = newest;
  publish_version();
  event({{"event", "resume"}, {"checkpoint", ckpt->dir}, {"step", ckpt->state.step},
         {"checkpoint_policy_version", ckpt->state.policy_version}, {"policy_version", version_.load()},
         {"metrics_lines_kept", kept}});
}

std::string Engine::run(const std::function<void(const StepReport&)>& on_step) {
  check(state_.load() == EngineState::Idle, "engine", "run() called twice");
  check(!sources_.empty(), "engine", "no rollout sources", "use local_generators >= 1 or add workers");
  state_ = EngineState::Running;
  event({{"event", "start"}, {"mode", "async"}, {"max_steps", cfg_.max_steps}, {"sources", sources_.size()},
         {"policy_version", version_.load()}});
  int local = 0;
  for (auto& s : sources_) local += dynamic_cast<LocalGenerator*>(s.get()) ? 1 : 0;
  BlasThreadScope blas_threads(1 + local);
  threads_.emplace_back([this] { scorer_loop(); });
  for (auto& s : sources_) threads_.emplace_back([this, src = s.get()] { producer_loop(src); });

  const auto t_start = Clock::now();
  auto last_end = Clock::now();
  TensorBoardWriter tensorboard(dir_.root());  // events.out.tfevents.* beside metrics.jsonl
  double bp_before = 0, block_before = 0;
  int64_t tokens_before = 0;
  bool unpublished = false;
  std::string failure;
  try {
    while (step_.load() < cfg_.max_steps && !stopping_.load()) {
      // Step boundary: pause holds here; retunes apply here.
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (paused_) {
          event({{"event", "pause"}, {"inflight_samples", inflight_samples_}, {"queued_groups", rollout_queue_->size()}});
          state_ = EngineState::Paused;  // after the event, so a reader that sees Paused finds it logged
          control_cv_.wait(lock, [&] { return !paused_ || stopping_.load(); });
          if (stopping_.load()) break;
          state_ = EngineState::Running;
          event({{"event", "resume"}, {"queued_groups", rollout_queue_->size()}});
          last_end = Clock::now();  // paused time is not step time
        }
      }
      const int64_t step = step_.load() + 1;
      apply_pending_retunes(step);
      std::map<std::string, double> m;
      auto groups = collect_groups(cfg_.prompts_per_step, m);
      if (static_cast<int64_t>(groups.size()) < cfg_.prompts_per_step) break;  // stopping

      std::vector<grpo::TrainSample> samples;
      std::vector<SampleRecord> traces;  // a few per step, as TRL logs a few per version
      grpo::MetricsWindow reward_window;
      for (const auto& g : groups) {
        const auto& cs = g->result.completions;
        for (size_t i = 0; i < cs.size(); ++i) {
          if (traces.size() < 8)
            traces.push_back({step, g->result.policy_version, g->group_id, g->example.prompt_text, g->texts[i],
                              g->example.answer.value_or(""), cs[i].finish_reason, g->rewards[i], g->advantages[i]});
          // Unscorable (every reward None: timeout, crash, ...): trained with advantage 0, and counted.
          reward_window.add("sample/unscorable_frac", std::isnan(g->rewards[i]) ? 1.0 : 0.0);
          if (cs[i].token_ids.empty()) continue;
          samples.push_back({g->prompt_ids, cs[i].token_ids, cs[i].logprobs, g->advantages[i],
                             cs[i].finish_reason == "length", g->result.policy_version});
          reward_window.add("reward", g->rewards[i]);
          for (size_t f = 0; f < g->function_names.size(); ++f)
            reward_window.add("rewards/" + g->function_names[f] + "/mean", g->per_function[f][i]);
        }
        double sd = 0, mean = 0, n = 0;
        for (double r : g->rewards) if (!std::isnan(r)) { mean += r; n += 1; }
        mean = n > 0 ? mean / n : 0;
        for (double r : g->rewards) if (!std::isnan(r)) sd += (r - mean) * (r - mean);
        sd = n > 1 ? std::sqrt(sd / (n - 1)) : 0;
        reward_window.add("reward_std", sd);
        reward_window.add("frac_reward_zero_std", sd < 1e-12 ? 1.0 : 0.0);
      }
      auto train_metrics = trainer_->step(samples);
      m.insert(train_metrics.begin(), train_metrics.end());
      for (const auto& [k, v] : reward_window.reduce()) m[k] = v;
      step_ = step;
      unpublished = true;
      if (step % cfg_.weight_sync_steps == 0) {
        const auto t_sync = Clock::now();
        bucket_write("adapter policy-v" + std::to_string(version_.load() + 1), [&] { publish_version(); });
        unpublished = false;
        m["perf/weight_sync_s"] = seconds_since(t_sync);
      }

      // Producer-side metrics of this step's window, and the bottleneck verdict.
      const auto now = Clock::now();
      const double step_s = std::chrono::duration<double>(now - last_end).count();
      last_end = now;
      int64_t tokens = 0;
      for (auto& s : sources_) tokens += s->tokens_generated();
      double bp, block;
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto& [k, v] : rollout_metrics_.reduce()) m[k] = v;
        rollout_metrics_.clear();
        bp = backpressure_s_ - bp_before;
        block = score_block_s_ - block_before;
        bp_before = backpressure_s_;
        block_before = score_block_s_;
        m["rollout/inflight"] = static_cast<double>(inflight_samples_);
      }
      m["rollout/generated_tok_s"] = step_s > 0 ? static_cast<double>(tokens - tokens_before) / step_s : 0.0;
      tokens_before = tokens;
      m["perf/step_s"] = step_s;
      m["epoch"] = static_cast<double>(stream_->epoch());
      m["trainer_idle_frac"] = step_s > 0 ? m["perf/rollout_wait_s"] / step_s : 0.0;
      // Producers blocked on a full pipeline (the scorer's own back-pressure is what blocks them,
      // so it is not added again).
      m["generation_idle_frac"] = step_s > 0 ? std::min(1.0, block / step_s / static_cast<double>(sources_.size())) : 0.0;
      m["scorer_idle_frac"] = step_s > 0 ? std::min(1.0, bp / step_s) : 0.0;
      const double fill = m["sample/rollout_queue_size"] / static_cast<double>(rollout_queue_->capacity());
      StepReport report{step, cfg_.max_steps, seconds_since(t_start), version_.load(), m, "balanced", ""};
      if (m["trainer_idle_frac"] < 0.05 && (fill > 0.8 || m["generation_idle_frac"] > 0.2)) {
        report.verdict = "trainer-bound";
        report.advice = "generation waits on a full queue: speed up training (larger token_budget, no gradient "
                        "checkpointing, a faster device) or spend less on generation (fewer local generators)";
      } else if (m["trainer_idle_frac"] > 0.2 && m["generation_idle_frac"] < 0.05) {
        report.verdict = "generation-bound";
        report.advice = "the trainer waits for rollouts: add workers, lower max_completion_length or "
                        "num_generations, or raise max_staleness and max_inflight_tasks";
      } else {
        report.advice = "generation and training keep pace";
      }
      if (cfg_.eval_steps > 0 && !data_.eval.empty() && (step % cfg_.eval_steps == 0 || step == cfg_.max_steps)) {
        // Greedy eval on the trainer's own weights (the generators keep running meanwhile).
        const double acc = evaluate();
        if (!std::isnan(acc)) report.metrics["eval/accuracy"] = acc;
      }
      for (const auto& t : traces)
        bucket_write("samples.jsonl", [&] { dir_.append_jsonl("samples.jsonl", {{"step", t.step}, {"policy_version", t.policy_version}, {"group", t.group},
                                            {"prompt", t.prompt}, {"completion", t.completion}, {"answer", t.answer},
                                            {"reward", std::isnan(t.reward) ? nlohmann::json() : nlohmann::json(t.reward)},
                                            {"advantage", t.advantage}, {"finish_reason", t.finish_reason}}); });
      report.samples = std::move(traces);
      nlohmann::json rec = {{"step", step}, {"time", wall_time_s()}, {"policy_version", version_.load()},
                            {"verdict", report.verdict}};
      for (const auto& [k, v] : report.metrics) rec[k] = std::isfinite(v) ? nlohmann::json(v) : nlohmann::json();
      bucket_write("metrics.jsonl", [&] { dir_.append_jsonl("metrics.jsonl", rec); });
      // The checkpoint comes after the step's metrics line: a kill -9 between the two then resumes
      // from the previous checkpoint, where the other order left that step missing from
      // metrics.jsonl (its checkpoint existed, its line did not).
      if (cfg_.save_steps > 0 && step % cfg_.save_steps == 0)
        bucket_write("checkpoint step-" + std::to_string(step), [&] { save_checkpoint_now(); });
      tensorboard.log_metrics(rec);
      if (on_step) on_step(report);
    }
  } catch (const std::exception& e) {
    failure = e.what();
  }
  const bool stopped_early = step_.load() < cfg_.max_steps;
  stopping_ = true;
  stop();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
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
  bucket_write("adapter/", [&] { model::save_adapter(*policy_.model, dir_.path("adapter"), cfg_.model_name_or_path); });
  event({{"event", stopped_early ? "stop" : "finished"}, {"policy_version", version_.load()},
         {"dropped_stale_total", dropped_stale_total_}, {"adapter", dir_.path("adapter")}});
  state_ = EngineState::Finished;
  return dir_.adapter_dir(version_.load());
}

}  // namespace grpo::run
