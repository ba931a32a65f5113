// Reading a run directory (through run::RunFolder) into the dashboard's store: its metrics (one
// object per step) and its events (control events become chart markers). Also the conversions the live path
// shares: a StepReport or an event into store points and markers, and derived metrics
// (trained tok/s) computed the same way for live and past runs.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/api/session.h"
#include "ui/metric_store.h"

namespace grpo::ui {

// Adds one step's metrics (plus derived ones) to `store`.
void add_step(MetricStore& store, const run::StepReport& report);
// Adds a chart marker for the events the catalogue marks (run::event_is_marker: pause, resume,
// retune, stop, error, faults carrying "advice" and their "<kind>_cleared" ends); others are
// ignored. Returns whether a marker was added.
bool add_event_marker(MetricStore& store, const nlohmann::json& event);
// A fault's "advice" (one sentence: what the user can do), or "" when the event carries none.
QString event_advice(const nlohmann::json& event);
bool is_fault(const nlohmann::json& event);  // carries "advice"
// A one-line description of an event for logs and tooltips ("retune: learning_rate 0.001 -> 0.002").
QString describe_event(const nlohmann::json& event);

struct RunHistory {
  nlohmann::json config;      // config.json
  int64_t steps = 0;          // the last step recorded
  std::string last_verdict, state;
};
// Loads `run_dir` into `store` (cleared first), creating nothing. Throws grpo::Error naming the
// path when the directory is missing or not a run (no config); a torn last line is skipped.
RunHistory load_run_history(const std::string& run_dir, MetricStore& store);

}  // namespace grpo::ui
