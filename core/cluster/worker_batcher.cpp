#include "core/cluster/worker_batcher.h"

#include <chrono>
#include <cstdint>
#include <iterator>
#include <random>

#include <torch/torch.h>

#include "core/common/log.h"
#include "core/text/tokenizer.h"

namespace grpo::cluster {
namespace {

// The sampler's RNG key of prompt `index` of a request with `seed`: a pure function of the two.
uint64_t prompt_key(uint64_t seed, size_t index) { return rollout::splitmix64(rollout::splitmix64(seed) ^ static_cast<uint64_t>(index)); }

}  // namespace

WorkerBatcher::WorkerBatcher(model::CausalLM base, std::shared_ptr<const text::Tokenizer> tokenizer,
                             BatcherOptions options)
    : base_(std::move(base)), tokenizer_(std::move(tokenizer)), options_(std::move(options)) {
  thread_ = std::thread([this] { run(); });
}

WorkerBatcher::~WorkerBatcher() { stop(); }

void WorkerBatcher::submit(CompletionJob job, std::shared_ptr<const LoadedAdapter> adapter, Done done) {
  Pending p;
  if (job.seed) {
    p.seed = *job.seed;
  } else {
    std::random_device rd;
    p.seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }
  p.sequences = static_cast<int64_t>(job.prompts.size()) * job.n;  // both bounded by ModelLimits
  p.job = std::move(job);
  p.adapter = std::move(adapter);
  p.done = std::move(done);
  p.queued_at = std::chrono::steady_clock::now();
  int64_t waiting = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      waiting = -1;
    } else if (queued_sequences_ + p.sequences > options_.max_queued_sequences && !queue_.empty()) {
      waiting = queued_sequences_;
    } else {
      p.seq = ++next_seq_;
      queued_sequences_ += p.sequences;
      queue_.push_back(std::move(p));
      cv_.notify_all();
      return;
    }
  }
  if (waiting < 0) return p.done(HttpResponse::error(503, "the worker is shutting down"));
  p.done(HttpResponse::busy("the worker's queue is full (" + std::to_string(waiting) + " sequences waiting, limit " +
                            std::to_string(options_.max_queued_sequences) + "); retry later"));
}

void WorkerBatcher::pause(PauseMode mode, std::function<void()> paused) {
  std::vector<Pending> aborted;
  bool call_now = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    paused_ = true;
    drain_until_ = 0;
    if (mode == PauseMode::Abort) {
      aborted.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
      queue_.clear();
      queued_sequences_ = 0;
    }
    if (mode == PauseMode::Wait) {
      // Everything submitted so far still runs (vLLM drains its in-flight requests); what
      // arrives from now on waits for /resume.
      drain_until_ = next_seq_;
      if (!drained_locked()) {
        idle_waiters_.push_back(std::move(paused));
        call_now = false;
        cv_.notify_all();
      }
    }
  }
  for (auto& p : aborted) p.done(HttpResponse::error(503, "request aborted by POST /pause?mode=abort; retry after /resume"));
  if (call_now && paused) paused();
}

bool WorkerBatcher::drained_locked() const {
  return running_ == 0 && (queue_.empty() || queue_.front().seq > drain_until_);
}

void WorkerBatcher::resume() {
  std::vector<std::function<void()>> waiters;  // a pause(wait) still draining is answered too
  {
    std::lock_guard<std::mutex> lock(mu_);
    paused_ = false;
    drain_until_ = 0;
    waiters.swap(idle_waiters_);
    cv_.notify_all();
  }
  for (auto& w : waiters) w();
}

void WorkerBatcher::set_worker_name(std::string name) {
  std::lock_guard<std::mutex> lock(mu_);
  options_.worker_name = std::move(name);
}

bool WorkerBatcher::is_paused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return paused_;
}

BatcherStats WorkerBatcher::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  BatcherStats s = totals_;
  s.queued = static_cast<int64_t>(queue_.size());
  s.running = running_;
  s.paused = paused_;
  return s;
}

void WorkerBatcher::stop() {
  std::deque<Pending> left;
  std::vector<std::function<void()>> waiters;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    left.swap(queue_);
    queued_sequences_ = 0;
    cv_.notify_all();
  }
  for (auto& p : left) p.done(HttpResponse::error(503, "the worker is shutting down"));
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    waiters.swap(idle_waiters_);
  }
  for (auto& w : waiters) w();
}

bool WorkerBatcher::same_batch(const Pending& a, const Pending& b) {
  const auto& x = a.job.params;
  const auto& y = b.job.params;
  return a.adapter == b.adapter && a.job.n == b.job.n && x.temperature == y.temperature && x.top_p == y.top_p &&
         x.top_k == y.top_k && x.min_p == y.min_p && x.max_tokens == y.max_tokens &&
         x.stop_token_ids == y.stop_token_ids && x.stop == y.stop;
}

void WorkerBatcher::run() {
  for (;;) {
    std::vector<Pending> batch, expired;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Paused: only requests submitted before a pause(wait) may still run.
      cv_.wait(lock, [&] {
        return stopping_ || (!queue_.empty() && (!paused_ || queue_.front().seq <= drain_until_));
      });
      if (stopping_) return;
      // Requests that waited past their budget are answered, not generated (the client gave up).
      const auto too_old = std::chrono::steady_clock::now() - std::chrono::milliseconds(options_.max_wait_ms);
      for (auto it = queue_.begin(); it != queue_.end();) {
        if (it->queued_at >= too_old) {
          ++it;
          continue;
        }
        queued_sequences_ -= it->sequences;
        expired.push_back(std::move(*it));
        it = queue_.erase(it);
      }
      const uint64_t limit = paused_ ? drain_until_ : UINT64_MAX;
      if (!queue_.empty() && queue_.front().seq <= limit) {
        // The oldest request and every queued one that can share its Sampler call.
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
        int64_t sequences = batch[0].sequences;
        for (auto it = queue_.begin(); it != queue_.end();) {
          if (it->seq <= limit && same_batch(batch[0], *it) && sequences + it->sequences <= options_.max_batch_sequences) {
            sequences += it->sequences;
            batch.push_back(std::move(*it));
            it = queue_.erase(it);
          } else {
            ++it;
          }
        }
        queued_sequences_ -= sequences;
      }
      running_ = static_cast<int64_t>(batch.size());
    }
    for (auto& p : expired)
      p.done(HttpResponse::busy("the request waited more than " + std::to_string(options_.max_wait_ms) +
                                " ms in the worker's queue; retry later"));
    if (!batch.empty()) generate(batch);
    std::vector<std::function<void()>> waiters;
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_ = 0;
      if (paused_ && drained_locked()) waiters.swap(idle_waiters_);
    }
    for (auto& w : waiters) w();
  }
}

void WorkerBatcher::generate(std::vector<Pending>& batch) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<int64_t>> prompts;
  std::vector<uint64_t> keys;
  for (const auto& p : batch)
    for (size_t i = 0; i < p.job.prompts.size(); ++i) {
      prompts.push_back(p.job.prompts[i]);
      keys.push_back(prompt_key(p.seed, i));
    }
  rollout::SamplingParams params = batch[0].job.params;
  params.seed = 0;  // the per-request seeds are in the keys
  std::vector<std::vector<rollout::Completion>> groups;
  try {
    torch::NoGradGuard no_grad;
    rollout::Sampler sampler(batch[0].adapter ? batch[0].adapter->model : base_, tokenizer_.get());
    groups = sampler.generate(prompts, batch[0].job.n, params, /*share_prefix=*/true, keys);
  } catch (const std::exception& e) {
    log_warn("generation failed: " + std::string(e.what()));
    for (auto& p : batch) p.done(HttpResponse::error(500, std::string("generation failed: ") + e.what()));
    return;
  }
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string worker_name;
  {
    std::lock_guard<std::mutex> lock(mu_);
    worker_name = options_.worker_name;
  }
  int64_t completions = 0, tokens = 0;
  size_t next = 0;
  for (auto& p : batch) {
    std::vector<std::vector<rollout::Completion>> mine;
    for (size_t i = 0; i < p.job.prompts.size(); ++i) {
      for (const auto& c : groups[next]) tokens += static_cast<int64_t>(c.token_ids.size());
      completions += static_cast<int64_t>(groups[next].size());
      mine.push_back(std::move(groups[next++]));
    }
    ResponseInfo info;
    info.adapter = p.adapter ? p.adapter->name : std::string();
    info.sha256 = p.adapter ? p.adapter->sha256 : std::string();
    info.worker = worker_name;
    info.batch_requests = static_cast<int64_t>(batch.size());
    info.generation_s = dt;
    HttpResponse r;
    try {
      r = HttpResponse::json(200, completion_response(p.job, mine, tokenizer_.get(), info));
    } catch (const std::exception& e) {
      r = HttpResponse::error(500, std::string("cannot build the response: ") + e.what());
    }
    p.done(std::move(r));
  }
  std::lock_guard<std::mutex> lock(mu_);
  totals_.batches += 1;
  totals_.requests += static_cast<int64_t>(batch.size());
  totals_.completions += completions;
  totals_.tokens += tokens;
}

}  // namespace grpo::cluster
