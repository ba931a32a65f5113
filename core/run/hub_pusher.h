// HubPusher: TRL's push_to_hub while a run trains (docs/hub.md, "Pushing while training"). The
// trainer thread hands it each checkpoint as it is saved and the final adapter at the end; a
// thread of its own exports and uploads (core/hub/hub_upload.h), so a step never waits on the
// network. What hub_strategy pushes, as transformers' Trainer does (_push_from_checkpoint):
//   end              nothing while training; the final adapter at the end
//   every_save       at each checkpoint, the adapter and its model card at the repo's root
//   checkpoint       that, and the checkpoint (optimizer state, RNG, state.json) as last-checkpoint/
//   all_checkpoints  that, with each checkpoint in a folder of its own name (step-50/, step-100/)
// A checkpoint saved while a push still runs is skipped (hub_always_push: queued instead). A
// failed push is an event with advice and is tried again with backoff; the run goes on. The final
// push waits for the one in progress, then pushes, and run() returns after it.
//
// The checkpoint's files are hard-linked (else copied) into <run>/hub-push/ when it is handed
// over, so the rotation of checkpoints/ cannot pull them away from a push in progress; that
// folder is emptied as pushes end.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/grpo/choices.h"

namespace grpo::run {

struct HubPusherOptions {
  std::string run_dir;
  std::string repo_id;                   // namespace/name
  std::string revision;                  // "" = main
  bool private_repo = false;
  grpo::HubStrategy strategy = grpo::HubStrategy::EverySave;
  bool always_push = false;
  std::function<void(nlohmann::json)> event;  // thread-safe (Engine::event)
  int attempts = 3;                      // tries of one push (push_folder retries each call within)
  int retry_base_ms = 2000;              // backoff between tries: base * 4^(try - 1)
  size_t max_queued = 8;                 // hub_always_push: checkpoints waiting their turn, at most
};

class HubPusher {
public:
  // Checks that a token is there (HF_TOKEN or the token file) and the repo id is valid: a run that
  // could never push fails at its start, not after hours of training. Starts the thread.
  explicit HubPusher(HubPusherOptions o);
  ~HubPusher();  // abandons what is queued; waits for the push in progress (its own time limits)
  HubPusher(const HubPusher&) = delete;
  HubPusher& operator=(const HubPusher&) = delete;

  // Trainer thread, after checkpoints/step-<step> is written: snapshots it and returns at once.
  void on_checkpoint(int64_t step, const std::string& checkpoint_dir);
  // Trainer thread, at the end, after adapter/ is written: waits for the push in progress, then
  // pushes the final adapter (tried `attempts` times). True when it is on the Hub.
  bool push_final(int64_t step, const std::string& adapter_dir);


private:
  struct Job {
    int64_t step = 0;
    std::string snapshot;    // a copy of the checkpoint or final adapter folder
    bool final = false;
  };
  void thread_main();
  bool run_job(const Job& job);  // every try; events
  std::string push_once(const Job& job, nlohmann::json& done);  // "" on success, else the error
  void drop(const Job& job);
  static std::string what_of(const Job& job);  // "checkpoint step-20", "the final adapter"
  // Snapshots `from` into job.snapshot; when that fails, an event says why and it is false.
  bool snapshot(const Job& job, const std::string& from);

  HubPusherOptions o_;
  std::string staging_;  // <run>/hub-push
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool busy_ = false, stopping_ = false;
  bool failing_ = false;  // the last try failed: the next success says the fault cleared
  std::optional<bool> final_result_;
  std::thread thread_;
};

}  // namespace grpo::run
