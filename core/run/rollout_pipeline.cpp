// The engine's pipeline threads (rollout_pipeline.h): a producer per rollout source (batched, or
// streaming groups as room allows), the scorer, and the trainer's intake with the staleness filter.
#include "core/run/rollout_pipeline.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/common/log.h"
#include "core/common/timing.h"

namespace grpo::run {

RolloutPipeline::RolloutPipeline(grpo::SharedConfig cfg, PipelineOptions options)
    : opts_(std::move(options)),
      G_(cfg->num_generations),
      seed_(cfg->seed),
      max_prompt_length_(cfg->max_prompt_length),
      prompts_per_step_(cfg->prompts_per_step),
      cfg_(cfg),
      next_group_id_(opts_.next_group_id),
      score_queue_(static_cast<size_t>(std::max<int64_t>(2, cfg->prompts_per_step))),
      rollout_queue_(static_cast<size_t>(std::max<int64_t>(1, (cfg->queue_maxsize + G_ - 1) / G_))) {}

RolloutPipeline::~RolloutPipeline() {
  stop();
  join();
}

void RolloutPipeline::start(const std::vector<std::unique_ptr<RolloutSource>>& sources) {
  for (const auto& s : sources) sources_.push_back(s.get());
  threads_.emplace_back([this] { scorer_loop(); });
  for (RolloutSource* s : sources_) threads_.emplace_back([this, s] { producer_loop(s); });
}

void RolloutPipeline::set_paused(bool paused) {
  std::lock_guard<std::mutex> lock(mu_);
  paused_ = paused;
  cv_.notify_all();
}

void RolloutPipeline::set_config(grpo::SharedConfig cfg) {
  std::lock_guard<std::mutex> lock(mu_);
  cfg_ = std::move(cfg);
  cv_.notify_all();  // max_inflight_tasks may have grown
}

void RolloutPipeline::set_trainer_step(int64_t steps_done, int64_t published_version) {
  std::lock_guard<std::mutex> lock(mu_);
  trainer_steps_ = steps_done;
  published_version_ = published_version;
  cv_.notify_all();  // a publish fewer ahead may admit more
}

void RolloutPipeline::stop() {
  stopping_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
  score_queue_.close();
  rollout_queue_.close();
}

void RolloutPipeline::join() {
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

int64_t RolloutPipeline::inflight_samples() const {
  std::lock_guard<std::mutex> lock(mu_);
  return inflight_samples_;
}

int64_t RolloutPipeline::epoch() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(opts_.stream->epoch());
}

std::pair<nlohmann::json, int64_t> RolloutPipeline::cursor() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {opts_.stream->cursor().to_json(), next_group_id_};
}

PipelineCounters RolloutPipeline::counters() const {
  PipelineCounters c;
  for (RolloutSource* s : sources_) c.tokens_generated += s->tokens_generated();
  std::lock_guard<std::mutex> lock(mu_);
  c.backpressure_s = backpressure_s_;
  c.score_block_s = score_block_s_;
  c.admission_wait_s = admission_wait_s_;
  c.sources = static_cast<int64_t>(sources_.size());
  c.queue_capacity = static_cast<int64_t>(rollout_queue_.capacity());
  return c;
}

void RolloutPipeline::drain_window(std::map<std::string, double>& m) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [k, v] : window_.reduce()) m[k] = v;
  window_.clear();
  m["rollout/inflight"] = static_cast<double>(inflight_samples_);
  m["rollout/outstanding_groups"] = static_cast<double>(admitted_groups_ - settled_groups_);
  m["rollout/admission_limit_groups"] = static_cast<double>(admission_limit_locked(0));
}

int64_t RolloutPipeline::inflight_limit_locked() const {
  return std::max<int64_t>(G_, cfg_->resolved_max_inflight_tasks());
}

int64_t RolloutPipeline::outstanding_groups() const {
  std::lock_guard<std::mutex> lock(mu_);
  return admitted_groups_ - settled_groups_;
}

int64_t RolloutPipeline::admission_limit_groups(int64_t lag) const {
  std::lock_guard<std::mutex> lock(mu_);
  return admission_limit_locked(lag);
}

// Admission (docs/formulas.md, "Admission"): a group started now is taken b whole batches from now
// (b = the outstanding groups ahead of it / prompts_per_step), after at most (b + 1) *
// num_iterations more optimizer steps; the trainer publishes one version per weight_sync_steps
// steps, counted from the r steps since its last publish. It is trained at most max_staleness
// versions stale when r + (b + 1) * num_iterations <= (max_staleness + 1) * weight_sync_steps - 1;
// a source sampling `lag` versions behind the newest has that much less room. At least one batch
// is always admitted, or a run with max_staleness 0 could never start.
int64_t RolloutPipeline::admission_limit_locked(int64_t lag) const {
  const int64_t S = std::max<int64_t>(0, cfg_->max_staleness), W = std::max<int64_t>(1, cfg_->weight_sync_steps);
  const int64_t mu = std::max<int64_t>(1, cfg_->num_iterations), P = std::max<int64_t>(1, cfg_->prompts_per_step);
  const int64_t r = trainer_steps_ % W;
  // The key table bounds S (1000), W (1e6) and P (2^20), and lag is at most the versions published
  // (clamped to S + 1 here): every product fits in 64 bits.
  const int64_t behind = std::clamp<int64_t>(lag, 0, S + 1);
  const int64_t batches = std::max<int64_t>(1, ((S + 1 - behind) * W - 1 - r) / mu);
  return batches * P;
}

bool RolloutPipeline::admits_locked(int64_t groups, int64_t lag) const {
  return admitted_groups_ - settled_groups_ + groups <= admission_limit_locked(lag);
}

int64_t RolloutPipeline::lag_locked(std::optional<int64_t> sampling_version) const {
  return sampling_version ? std::max<int64_t>(0, published_version_ - *sampling_version) : 0;
}

void RolloutPipeline::note_admission_wait_locked(double seconds) {
  admission_wait_s_ += seconds;
  window_.add("rollout/admission_wait_s", seconds);
}

void RolloutPipeline::settle(int64_t groups) {
  std::lock_guard<std::mutex> lock(mu_);
  settled_groups_ += groups;
  cv_.notify_all();
}

std::shared_ptr<PipelineGroup> RolloutPipeline::new_group_locked() {
  auto g = std::make_shared<PipelineGroup>();
  g->group_id = next_group_id_++;
  ++admitted_groups_;
  g->example = opts_.stream->next();
  g->created = Clock::now();
  return g;
}

// ---------------------------------------------------------------- producers and scorer

void RolloutPipeline::producer_loop(RolloutSource* source) {
  if (source->streams()) return stream_loop(source);
  while (!stopping_.load()) {
    std::vector<std::shared_ptr<PipelineGroup>> groups;
    rollout::SamplingParams params;
    {
      std::unique_lock<std::mutex> lock(mu_);
      const int64_t limit = inflight_limit_locked();
      const int64_t k = std::max<int64_t>(1, std::min<int64_t>(cfg_->prompts_per_step, limit / G_));
      // Time held back by admission alone is generation idling for want of a trainer.
      const bool held = !stopping_.load() && !paused_ && !admits_locked(k, lag_locked(source->sampling_version()));
      const auto t_wait = Clock::now();
      cv_.wait(lock, [&] {
        return stopping_.load() || (!paused_ && inflight_samples_ + k * G_ <= inflight_limit_locked() &&
                                    admits_locked(k, lag_locked(source->sampling_version())));
      });
      if (held) note_admission_wait_locked(seconds_since(t_wait));
      if (stopping_.load()) break;
      inflight_samples_ += k * G_;
      params = opts_.policy->sampling_params(*cfg_, 0);
      for (int64_t i = 0; i < k; ++i) groups.push_back(new_group_locked());
    }
    std::vector<RolloutRequest> requests;
    for (auto& g : groups) {
      g->prompt_ids = opts_.policy->encode_prompt(g->example, max_prompt_length_);
      requests.push_back({g->group_id, static_cast<uint64_t>(g->example.index), g->prompt_ids, G_});
    }
    // Each group's RNG stream depends on the seed and its group id only: reproducible anywhere.
    params.seed = static_cast<uint64_t>(seed_) * 1000003ULL + static_cast<uint64_t>(groups.front()->group_id);
    std::vector<RolloutResult> results;
    try {
      if (opts_.before_generate) opts_.before_generate(source->name());
      results = source->generate(requests, params);
    } catch (const std::exception& e) {
      if (opts_.event) opts_.event({{"event", "error"}, {"source", source->name()}, {"message", e.what()}});
      log_warn(source->name() + ": " + e.what());
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      inflight_samples_ -= static_cast<int64_t>(groups.size()) * G_;
      if (results.size() != groups.size()) settled_groups_ += static_cast<int64_t>(groups.size());
      cv_.notify_all();
    }
    if (results.size() != groups.size()) continue;  // failed: these prompts are skipped, not retried
    for (size_t i = 0; i < groups.size(); ++i) {
      groups[i]->result = std::move(results[i]);
      groups[i]->generated = Clock::now();
      double blocked = 0;
      if (!score_queue_.push(groups[i], &blocked)) return;  // closed: stopping
      std::lock_guard<std::mutex> lock(mu_);
      score_block_s_ += blocked;
      window_.add("rollout/score_block_s", blocked);
      window_.add("rollout/duration_s", groups[i]->result.duration_s);
    }
  }
}

// Streaming sources (remote workers): a group goes out whenever max_inflight_tasks has room and
// comes back whenever it is done, in any order, so a slow worker delays only its own groups. The
// source never blocks on the scorer queue: a finished group it cannot hand over yet stays with it
// (still counted in flight), and nothing new goes out until it is taken.
void RolloutPipeline::stream_loop(RolloutSource* source) {
  std::map<int64_t, std::shared_ptr<PipelineGroup>> out;  // by group id: sent, not yet handed over
  int64_t fed = 0;
  std::optional<Clock::time_point> held_since;  // admission alone has said no since then
  auto release = [&](int64_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    inflight_samples_ -= n * G_;
    cv_.notify_all();
  };
  RolloutSource::StreamHooks hooks;
  hooks.stop = [&] { return stopping_.load(); };
  hooks.next = [&](rollout::SamplingParams* params) -> std::optional<RolloutRequest> {
    const std::optional<int64_t> sampling = source->sampling_version();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_.load() || paused_ || inflight_samples_ + G_ > inflight_limit_locked()) return std::nullopt;
      if (!admits_locked(1, lag_locked(sampling))) {
        if (!held_since) held_since = Clock::now();
        return std::nullopt;
      }
      if (held_since) {
        note_admission_wait_locked(seconds_since(*held_since));
        held_since.reset();
      }
    }
    // The test seam runs once per prompts_per_step groups, as it does per batch elsewhere.
    if (opts_.before_generate && fed % std::max<int64_t>(1, prompts_per_step_) == 0)
      opts_.before_generate(source->name());
    std::shared_ptr<PipelineGroup> g;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_.load() || paused_ || inflight_samples_ + G_ > inflight_limit_locked() ||
          !admits_locked(1, lag_locked(sampling)))
        return std::nullopt;
      inflight_samples_ += G_;
      *params = opts_.policy->sampling_params(*cfg_, 0);
      g = new_group_locked();
    }
    ++fed;
    g->prompt_ids = opts_.policy->encode_prompt(g->example, max_prompt_length_);
    // Each group's RNG stream depends on the seed and its group id only: reproducible anywhere.
    params->seed = static_cast<uint64_t>(seed_) * 1000003ULL + static_cast<uint64_t>(g->group_id);
    out[g->group_id] = g;
    return RolloutRequest{g->group_id, static_cast<uint64_t>(g->example.index), g->prompt_ids, G_};
  };
  hooks.offer = [&](RolloutResult& r) -> bool {
    auto it = out.find(r.group_id);
    if (it == out.end()) return true;  // not ours (cannot happen): nothing to hand over
    std::shared_ptr<PipelineGroup> g = it->second;
    g->result = r;
    g->generated = Clock::now();
    const double duration = r.duration_s;
    if (!score_queue_.try_push(g)) return false;  // full: offered again later (g kept); closed: stopping
    out.erase(it);
    release(1);
    std::lock_guard<std::mutex> lock(mu_);
    window_.add("rollout/score_block_s", 0.0);
    window_.add("rollout/duration_s", duration);
    return true;
  };
  hooks.fail = [&](int64_t group_id, const std::string& why) {
    if (out.erase(group_id) == 0) return;
    release(1);
    settle(1);
    if (!stopping_.load()) log_warn(source->name() + ": group " + std::to_string(group_id) + " skipped: " + why);
  };
  while (!stopping_.load()) {  // stream() returns once stopping; a failure is logged and retried
    try {
      source->stream(hooks);
    } catch (const std::exception& e) {
      if (opts_.event) opts_.event({{"event", "error"}, {"source", source->name()}, {"message", e.what()}});
      log_warn(source->name() + ": " + e.what());
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  release(static_cast<int64_t>(out.size()));
  settle(static_cast<int64_t>(out.size()));
}

void RolloutPipeline::scorer_loop() {
  while (true) {
    auto item = score_queue_.pop_for(std::chrono::milliseconds(100));
    if (!item) {
      if (stopping_.load()) return;
      continue;
    }
    auto g = *item;
    const double wait = seconds_since(g->generated);
    const auto t0 = Clock::now();
    grpo::ScaleRewards scale;
    grpo::MultiObjective aggregation;
    {
      std::lock_guard<std::mutex> lock(mu_);
      scale = grpo::parse_scale_rewards(cfg_->scale_rewards, "scale_rewards");
      aggregation = grpo::kMultiObjective.parse(cfg_->multi_objective_aggregation, "multi_objective_aggregation");
    }
    // Each group is scored alone, as AsyncGRPO's rollout worker does ("batch" scaling uses the group).
    score_groups(*opts_.policy, *opts_.rewards, scale, {g.get()}, opts_.rewards_mutex, aggregation);
    const double score_s = seconds_since(t0);
    g->enqueued = Clock::now();
    double blocked = 0;
    if (!rollout_queue_.push(g, &blocked)) return;
    std::lock_guard<std::mutex> lock(mu_);
    backpressure_s_ += blocked;
    window_.add("rollout/backpressure_s", blocked);
    window_.add("rollout/score_s", score_s);
    window_.add("rollout/score_wait_s", wait);
    window_.add("rollout/score_queue_size", static_cast<double>(score_queue_.size()));
  }
}

// ---------------------------------------------------------------- trainer side

std::vector<std::shared_ptr<PipelineGroup>> RolloutPipeline::collect(int64_t want, int64_t version, int64_t max_staleness,
                                                                     std::map<std::string, double>& m) {
  std::vector<std::shared_ptr<PipelineGroup>> out;
  double wait_s = 0, staleness_sum = 0, staleness_max = 0, in_queue_sum = 0, queue_seen = 0;
  int64_t dropped = 0, pops = 0;
  while (static_cast<int64_t>(out.size()) < want && !stopping_.load()) {
    queue_seen += static_cast<double>(rollout_queue_.size());
    ++pops;
    const auto t0 = Clock::now();
    auto item = rollout_queue_.pop_for(std::chrono::milliseconds(50));
    wait_s += seconds_since(t0);
    if (!item) continue;
    auto g = *item;
    settle(1);  // taken, trained or dropped: room for one more group
    const int64_t staleness = version - g->result.policy_version;
    if (staleness > max_staleness) {
      dropped += static_cast<int64_t>(g->result.completions.size());
      continue;
    }
    staleness_sum += static_cast<double>(staleness);
    staleness_max = std::max(staleness_max, static_cast<double>(staleness));
    in_queue_sum += seconds_since(g->enqueued);
    out.push_back(std::move(g));
  }
  dropped_stale_total_ += dropped;
  const double n = static_cast<double>(std::max<size_t>(1, out.size()));
  m["perf/rollout_wait_s"] = wait_s;
  m["sample/staleness_mean"] = staleness_sum / n;
  m["sample/staleness_max"] = staleness_max;
  m["sample/time_in_queue_s"] = in_queue_sum / n;
  m["sample/dropped_stale_total"] = static_cast<double>(dropped);
  m["sample/rollout_queue_size"] = pops ? queue_seen / static_cast<double>(pops) : 0.0;
  return out;
}

}  // namespace grpo::run
