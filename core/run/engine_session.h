// EngineSession: the Engine on its own thread behind a torch-free facade, for front ends that must
// not see torch (ui/, docs/ARCHITECTURE.md "Layers"). start() returns at once; the model loads and
// the run proceeds on the session's thread. Step reports, run events (as the engine raises them,
// even while a full bucket holds them back from the run's events file, plus lines other writers
// append there) and state changes come back through callbacks invoked on session threads: the
// receiver copies them and hands them to its own thread (EngineController queues them to the GUI).
// Control calls are thread-safe and may come before the engine exists (a pause or stop given while
// the model loads is applied once it has).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/grpo/config.h"
#include "core/records/engine_types.h"

namespace grpo::run {

struct SessionOptions {
  int local_generators = -1;  // -1: the config's local_generators
  bool resume = false;        // continue the run directory from its newest intact checkpoint
  // "HOST:PORT": serve the run's HTTP API and browser view while it runs, as `grpo train --serve`
  // does (see EngineSession::serve); "" = not served.
  std::string serve;
};

// One line of the run's events file: {"event": kind, "time", "step", ...}.
struct EngineEvent {
  std::string kind;   // start, pause, resume, retune, stop, finished, error, warning, ...
  double time = 0;    // wall seconds since the epoch
  int64_t step = 0;   // the step the engine had completed when it happened
  nlohmann::json data;  // the whole record
};

struct SessionCallbacks {
  std::function<void(const StepReport&)> on_step;      // engine thread, after each optimizer step
  std::function<void(const EngineEvent&)> on_event;    // watcher thread
  std::function<void(EngineState)> on_state;          // watcher thread, on every change
  // Watcher thread, every kWorkersIntervalMs while the run has remote workers: copied snapshots
  // of the router's workers (tok_s rated here), never a view into the router.
  std::function<void(const std::vector<WorkerInfo>&)> on_workers;
  // When serving starts (the browser view's link, the token in its fragment) and when it ends or
  // fails to start (link "", and the reason or ""): the thread that started or stopped it.
  std::function<void(const std::string& link, const std::string& error)> on_serving;
  // Once per start(), last: the final adapter directory, or "" and the error text.
  std::function<void(const std::string& adapter, const std::string& error)> on_done;
};

class EngineSession {
public:
  static constexpr int kWorkersIntervalMs = 500;

  EngineSession();
  ~EngineSession();  // stops the run and joins its threads
  EngineSession(const EngineSession&) = delete;
  EngineSession& operator=(const EngineSession&) = delete;

  // Starts a run of `cfg` in `run_dir`. Throws grpo::Error when a run is still active or the
  // config does not validate; later errors (a bad model folder, a failed step) arrive in on_done.
  void start(const grpo::TrainConfig& cfg, const std::string& run_dir, SessionOptions options,
             SessionCallbacks callbacks);

  void pause();
  void resume();
  void stop();
  // "" when accepted (applied at the next step boundary), else the reason (names the key).
  std::string retune(const nlohmann::json& changes);
  // Queues an operator command for one worker into the run's router (it lives in the engine's
  // producer thread and applies it between dispatches). "" when queued, else why not.
  std::string worker_command(WorkerAction action, const std::string& url);
  // Asks Slurm for `count` more workers for the live run (Engine::launch_workers: sbatch runs in
  // the caller's thread, seconds at most). "" with `job` set, else why not.
  std::string launch_workers(int count, const nlohmann::json& overrides, std::string* job = nullptr);
  std::string cancel_workers(const std::string& job);  // "" when cancelled, else why not
  // Serves the run's HTTP API and browser view (RunEndpoint, run_endpoint.h) on HOST:PORT, behind
  // the config's cluster token (made on first use), from now until the run ends or stop_serving();
  // while the model loads, from once it has loaded. "" when serving (or queued), else why not (a
  // malformed address, a port in use, already serving, no run). The link arrives in on_serving.
  std::string serve(const std::string& host_port);
  void stop_serving();
  std::string serving_link() const;  // the browser view's link while serving, else ""

  bool active() const;        // started and on_done not yet delivered
  EngineState state() const;  // Idle before the engine exists
  int64_t step() const;
  std::string run_dir() const;
  std::string final_adapter() const;  // after on_done
  std::string error() const;          // after on_done; "" on success
  void wait();                        // blocks until the run thread has ended

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace grpo::run
