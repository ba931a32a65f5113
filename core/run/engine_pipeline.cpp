// The engine's pipeline threads (DESIGN.md Threads): a producer per rollout source (batched, or
// streaming groups as room allows), the scorer, and the trainer's intake of scored groups with
// the staleness filter. The trainer itself, control and checkpoints are in engine.cpp.
#include <algorithm>
#include <cmath>
#include <map>

#include <torch/torch.h>

#include "core/common/error.h"
#include "core/common/log.h"
#include "core/common/timing.h"
#include "core/grpo/advantages.h"
#include "core/run/engine.h"
#include "core/run/engine_group.h"

namespace grpo::run {

// ---------------------------------------------------------------- producers and scorer

void Engine::producer_loop(RolloutSource* source) {
  if (source->streams()) return stream_loop(source);
  const int64_t G = cfg_.num_generations;
  while (!stopping_.load()) {
    if (!wait_while_paused_or_stopping()) break;
    std::vector<std::shared_ptr<Group>> groups;
    rollout::SamplingParams params;
    {
      std::unique_lock<std::mutex> lock(mu_);
      const int64_t limit = std::max<int64_t>(G, shared_cfg_.resolved_max_inflight_tasks());
      const int64_t k = std::max<int64_t>(1, std::min<int64_t>(shared_cfg_.prompts_per_step, limit / G));
      inflight_cv_.wait(lock, [&] { return stopping_.load() || paused_ || inflight_samples_ + k * G <= limit; });
      if (stopping_.load() || paused_) continue;
      inflight_samples_ += k * G;
      params = policy_.sampling_params(shared_cfg_, 0);
      for (int64_t i = 0; i < k; ++i) {
        auto g = std::make_shared<Group>();
        g->group_id = next_group_id_++;
        g->example = stream_->next();
        g->created = Clock::now();
        groups.push_back(std::move(g));
      }
    }
    std::vector<RolloutRequest> requests;
    for (auto& g : groups) {
      g->prompt_ids = policy_.encode_prompt(g->example, cfg_.max_prompt_length);
      requests.push_back({g->group_id, static_cast<uint64_t>(g->example.index), g->prompt_ids, G});
    }
    // Each group's RNG stream depends on the seed and its group id only: reproducible anywhere.
    params.seed = static_cast<uint64_t>(cfg_.seed) * 1000003ULL + static_cast<uint64_t>(groups.front()->group_id);
    std::vector<RolloutResult> results;
    try {
      if (opts_.before_generate) opts_.before_generate(source->name());
      results = source->generate(requests, params);
    } catch (const std::exception& e) {
      event({{"event", "error"}, {"source", source->name()}, {"message", e.what()}});
      log_warn(source->name() + ": " + e.what());
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      inflight_samples_ -= static_cast<int64_t>(groups.size()) * G;
      inflight_cv_.notify_all();
    }
    if (results.size() != groups.size()) continue;  // failed: these prompts are skipped, not retried
    for (size_t i = 0; i < groups.size(); ++i) {
      groups[i]->result = std::move(results[i]);
      groups[i]->generated = Clock::now();
      double blocked = 0;
      if (!score_queue_->push(groups[i], &blocked)) return;  // closed: stopping
      std::lock_guard<std::mutex> lock(mu_);
      score_block_s_ += blocked;
      rollout_metrics_.add("rollout/score_block_s", blocked);
      rollout_metrics_.add("rollout/duration_s", groups[i]->result.duration_s);
    }
  }
}

// Streaming sources (remote workers): a group goes out whenever max_inflight_tasks has room and
// comes back whenever it is done, in any order, so a slow worker delays only its own groups. The
// source never blocks on the scorer queue: a finished group it cannot hand over yet stays with it
// (still counted in flight), and nothing new goes out until it is taken.
void Engine::stream_loop(RolloutSource* source) {
  const int64_t G = cfg_.num_generations;
  std::map<int64_t, std::shared_ptr<Group>> out;  // by group id: sent, not yet handed over
  int64_t fed = 0;
  auto release = [&](int64_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    inflight_samples_ -= n * G;
    inflight_cv_.notify_all();
  };
  auto room = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t limit = std::max<int64_t>(G, shared_cfg_.resolved_max_inflight_tasks());
    return !stopping_.load() && !paused_ && inflight_samples_ + G <= limit;
  };
  RolloutSource::StreamHooks hooks;
  hooks.stop = [&] { return stopping_.load(); };
  hooks.next = [&](rollout::SamplingParams* params) -> std::optional<RolloutRequest> {
    if (!room()) return std::nullopt;
    // The test seam runs once per prompts_per_step groups, as it does per batch elsewhere.
    if (opts_.before_generate && fed % std::max<int64_t>(1, cfg_.prompts_per_step) == 0)
      opts_.before_generate(source->name());
    auto g = std::make_shared<Group>();
    {
      std::lock_guard<std::mutex> lock(mu_);
      const int64_t limit = std::max<int64_t>(G, shared_cfg_.resolved_max_inflight_tasks());
      if (stopping_.load() || paused_ || inflight_samples_ + G > limit) return std::nullopt;
      inflight_samples_ += G;
      *params = policy_.sampling_params(shared_cfg_, 0);
      g->group_id = next_group_id_++;
      g->example = stream_->next();
      g->created = Clock::now();
    }
    ++fed;
    g->prompt_ids = policy_.encode_prompt(g->example, cfg_.max_prompt_length);
    // Each group's RNG stream depends on the seed and its group id only: reproducible anywhere.
    params->seed = static_cast<uint64_t>(cfg_.seed) * 1000003ULL + static_cast<uint64_t>(g->group_id);
    out[g->group_id] = g;
    return RolloutRequest{g->group_id, static_cast<uint64_t>(g->example.index), g->prompt_ids, G};
  };
  hooks.offer = [&](RolloutResult& r) -> bool {
    auto it = out.find(r.group_id);
    if (it == out.end()) return true;  // not ours (cannot happen): nothing to hand over
    std::shared_ptr<Group> g = it->second;
    g->result = r;
    g->generated = Clock::now();
    const double duration = r.duration_s;
    if (!score_queue_->try_push(g)) return false;  // full: offered again later (g kept); closed: stopping
    out.erase(it);
    release(1);
    std::lock_guard<std::mutex> lock(mu_);
    rollout_metrics_.add("rollout/score_block_s", 0.0);
    rollout_metrics_.add("rollout/duration_s", duration);
    return true;
  };
  hooks.fail = [&](int64_t group_id, const std::string& why) {
    if (out.erase(group_id) == 0) return;
    release(1);
    if (!stopping_.load()) log_warn(source->name() + ": group " + std::to_string(group_id) + " skipped: " + why);
  };
  while (!stopping_.load()) {  // stream() returns once stopping; a failure is logged and retried
    try {
      source->stream(hooks);
    } catch (const std::exception& e) {
      event({{"event", "error"}, {"source", source->name()}, {"message", e.what()}});
      log_warn(source->name() + ": " + e.what());
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  release(static_cast<int64_t>(out.size()));
}

void Engine::scorer_loop() {
  const int64_t G = cfg_.num_generations;
  while (true) {
    auto item = score_queue_->pop_for(std::chrono::milliseconds(100));
    if (!item) {
      if (stopping_.load()) return;
      continue;
    }
    auto g = *item;
    const double wait = seconds_since(g->generated);
    const auto t0 = Clock::now();
    std::vector<rollout::RewardInput> inputs;
    for (const auto& c : g->result.completions) {
      g->texts.push_back(policy_.decode(c.token_ids));
      inputs.push_back({g->example.prompt_text, g->texts.back(), g->example.answer, g->example.metadata, c.token_ids});
    }
    grpo::ScaleRewards scale;
    {
      std::lock_guard<std::mutex> lock(mu_);
      scale = grpo::parse_scale_rewards(shared_cfg_.scale_rewards, "scale_rewards");
    }
    rollout::RewardScores scores;
    {
      std::lock_guard<std::mutex> lock(rewards_mu_);  // reward weights may be retuned
      scores = rewards_.score(inputs);
    }
    const int64_t F = static_cast<int64_t>(scores.per_function.size());
    auto per_func = torch::empty({F, G}, torch::kFloat64);
    for (int64_t f = 0; f < F; ++f)
      for (int64_t b = 0; b < G; ++b) per_func[f][b] = scores.per_function[f][b];
    // Each group is scored alone, as AsyncGRPO's rollout worker does ("batch" scaling uses the group).
    auto adv = grpo::compute_advantages(per_func, scores.weights, G, scale);
    for (int64_t b = 0; b < G; ++b) {
      g->rewards.push_back(adv.rewards[b].item<double>());
      g->advantages.push_back(adv.advantages[b].item<double>());
    }
    g->per_function = scores.per_function;
    g->function_names = scores.names;
    const double score_s = seconds_since(t0);
    g->enqueued = Clock::now();
    double blocked = 0;
    if (!rollout_queue_->push(g, &blocked)) return;
    std::lock_guard<std::mutex> lock(mu_);
    backpressure_s_ += blocked;
    rollout_metrics_.add("rollout/backpressure_s", blocked);
    rollout_metrics_.add("rollout/score_s", score_s);
    rollout_metrics_.add("rollout/score_wait_s", wait);
    rollout_metrics_.add("rollout/score_queue_size", static_cast<double>(score_queue_->size()));
  }
}

// ---------------------------------------------------------------- trainer side

std::vector<std::shared_ptr<Engine::Group>> Engine::collect_groups(int64_t want, std::map<std::string, double>& m) {
  std::vector<std::shared_ptr<Group>> out;
  double wait_s = 0, staleness_sum = 0, staleness_max = 0, in_queue_sum = 0;
  int64_t dropped = 0;
  double queue_seen = 0;
  int64_t pops = 0;
  while (static_cast<int64_t>(out.size()) < want && !stopping_.load()) {
    queue_seen += static_cast<double>(rollout_queue_->size());
    ++pops;
    const auto t0 = Clock::now();
    auto item = rollout_queue_->pop_for(std::chrono::milliseconds(50));
    wait_s += seconds_since(t0);
    if (!item) continue;
    auto g = *item;
    const int64_t staleness = version_.load() - g->result.policy_version;
    if (staleness > cfg_.max_staleness) {
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
