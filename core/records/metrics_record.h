// One record of a run's metrics file, read one way by everything that shows a run: the desktop's
// history (ui/run_history.cpp) and remote runs (ui/remote_run_client.cpp), the browser view's
// series (RunCache, core/serve/dashboard_routes.cpp) and the TensorBoard export. The file's format
// is docs/formats.md's; the record's own fields are not metrics. No Qt, no torch.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "core/records/engine_types.h"

namespace grpo::run {

struct MetricsRecord {
  int64_t step = 0;            // "step": an integer (a record without one is not a metrics record)
  double time = NAN;           // "time" (wall-clock seconds since the epoch), else TRL's "wall_time", else NaN
  int64_t policy_version = 0;  // "policy_version": the adapter version that step trained
  std::string verdict;         // "verdict": the throughput advisor's, "" when absent
  std::map<std::string, double> metrics;  // every other field that is a number
};

// Reads `rec` into *out; false (and *out untouched) when it is not an object with an integer
// "step".
bool read_metrics_record(const nlohmann::json& rec, MetricsRecord* out);

// A record as the desktop's views take a step (max_steps, advice and samples are not in it).
StepReport step_report_of(const MetricsRecord& r);

}  // namespace grpo::run
