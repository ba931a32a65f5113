// RunControl: what the serving library needs of a live run, and all it knows of one. The training
// library's Engine implements it; RunEndpoint (run_endpoint.h) serves it. So the serving code
// (endpoint, dashboard routes) links no trainer, model or LibTorch (docs/ARCHITECTURE.md, "Layers").
// Every method is called from the HTTP server's threads, so each must be thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/records/engine_types.h"

namespace grpo::run {

// The events a full bucket keeps out of the events file for now (they go to the file next, in
// this order) and the file's size, taken together while no event can be written: the file's first
// `file_bytes` bytes, then `held`, are the events file to be (RunEndpoint's /grpo/events). (Past
// 10,000 held events the oldest are dropped unwritten; a client that saw them then skips as many
// later lines.)
struct HeldEvents {
  uint64_t file_bytes = 0;
  std::deque<nlohmann::json> held;
};

class RunControl {
public:
  virtual ~RunControl() = default;

  virtual std::string run_dir() const = 0;
  virtual EngineState state() const = 0;
  virtual int64_t step() const = 0;
  virtual int64_t policy_version() const = 0;
  virtual HeldEvents held_events() = 0;
  // The run's remote workers with raw counters (tok_s left 0: the dashboard rates them).
  virtual std::vector<WorkerInfo> workers() const = 0;
  // The key table the run checks retunes against, as GET /grpo/config/schema serves it.
  virtual nlohmann::json config_schema() const = 0;

  virtual void pause() = 0;
  virtual void resume() = 0;
  virtual void stop() = 0;
  // Validates `changes` now and applies them at the next step boundary: "" when accepted, else an
  // error naming the key and the reason (nothing changes).
  virtual std::string retune(const nlohmann::json& changes) = 0;
};

}  // namespace grpo::run
