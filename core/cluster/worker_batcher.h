// WorkerBatcher: the worker's generation thread. Completion requests queue up while a batch runs;
// the thread then takes the oldest one together with every queued request that can share its
// Sampler call (same adapter, same sampling options and n) and generates them all at once, so
// requests that arrive together are batched together (the G requests of one GRPO group share
// one prefill). Each request keeps its own seed: its prompts' RNG keys are derived from it, and
// the sampler's randomness is counter-based, so a request's tokens do not depend on what it
// was batched with.
//
// Pause/resume follow vLLM's /pause modes: keep (queued requests wait; the answer is immediate),
// wait (every request submitted before the pause still runs; answered once they are done),
// abort (queued requests are answered 503 "aborted" at once, where vLLM would return them with
// finish_reason "abort"; the running batch finishes). Requests that arrive while paused wait.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/cluster/adapter_store.h"
#include "core/cluster/completion_api.h"
#include "core/cluster/http_message.h"

namespace grpo::cluster {

enum class PauseMode { Abort, Wait, Keep };

struct BatcherOptions {
  std::string worker_name;
  int64_t max_batch_sequences = 256;  // prompts x n per Sampler call
  // The queue is bounded: a request that would bring the sequences waiting above this is answered
  // 503 with Retry-After at once, and one that waited longer than max_wait_ms before its batch
  // started is answered 503 instead of being generated for a client that has long given up.
  int64_t max_queued_sequences = 4096;
  int64_t max_wait_ms = 300000;
};

struct BatcherStats {
  int64_t queued = 0;       // requests waiting
  int64_t running = 0;      // requests in the batch being generated
  int64_t batches = 0;
  int64_t requests = 0;     // finished
  int64_t completions = 0;  // choices generated
  int64_t tokens = 0;       // completion tokens generated
  bool paused = false;
};

class WorkerBatcher {
public:
  using Done = std::function<void(HttpResponse)>;

  WorkerBatcher(model::CausalLM base, std::shared_ptr<const text::Tokenizer> tokenizer, BatcherOptions options);
  ~WorkerBatcher();  // stop()

  // `adapter` null = the base model. `done` is called once, on the generation thread (or on the
  // caller's for an immediate failure).
  void submit(CompletionJob job, std::shared_ptr<const LoadedAdapter> adapter, Done done);

  // `paused` is called once the pause has taken effect (see the header comment).
  void pause(PauseMode mode, std::function<void()> paused);
  void resume();
  bool is_paused() const;
  BatcherStats stats() const;
  void set_worker_name(std::string name);  // reported in each response's "grpo" field
  // Answers queued requests with 503 and joins the thread (after the running batch).
  void stop();

private:
  struct Pending {
    CompletionJob job;
    std::shared_ptr<const LoadedAdapter> adapter;
    Done done;
    uint64_t seed = 0;
    uint64_t seq = 0;  // submission order
    int64_t sequences = 0;  // prompts x n
    std::chrono::steady_clock::time_point queued_at;
  };
  void run();
  void generate(std::vector<Pending>& batch);
  static bool same_batch(const Pending& a, const Pending& b);
  bool drained_locked() const;  // pause(wait) is done: nothing up to drain_until_ is left

  model::CausalLM base_;
  std::shared_ptr<const text::Tokenizer> tokenizer_;
  BatcherOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  int64_t queued_sequences_ = 0;  // sum of queue_[i].sequences
  bool paused_ = false;
  bool stopping_ = false;
  int64_t running_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t drain_until_ = 0;  // while paused: requests with seq <= this still run (pause wait)
  std::vector<std::function<void()>> idle_waiters_;  // pause(wait): called once drained
  BatcherStats totals_;
  std::thread thread_;
};

}  // namespace grpo::cluster
