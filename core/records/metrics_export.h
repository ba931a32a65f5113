// A run's metrics file (RunFolder::read_metrics) in other shapes: a wide CSV table (one row per
// step, one column per metric key, as LAION-style *_metrics_table.csv exports; docs/formats.md,
// "Metrics tables") and TensorBoard event files rebuilt from it (for runs recorded before event
// files existed, or copied without them).
#pragma once

#include <string>

namespace grpo::run {

// Columns: step, time, policy_version first, then every other key in sorted order (the union over
// all records). Numbers are written with enough digits to round-trip (%.17g for doubles), strings
// CSV-quoted when needed, missing or null values empty. Throws naming the file and line of a
// malformed record; a run without a metrics file is an error.
std::string metrics_csv(const std::string& run_dir);

// Writes one new events.out.tfevents.* file into `log_dir` (default: the run directory) holding
// every record of the run's metrics file; returns its path.
std::string metrics_to_tensorboard(const std::string& run_dir, const std::string& log_dir = {});

}  // namespace grpo::run
