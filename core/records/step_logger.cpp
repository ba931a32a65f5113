#include "core/records/step_logger.h"

#include <cmath>

#include "core/common/timing.h"

namespace grpo::run {

StepLogger::StepLogger(RunDirectory& dir, WriteGuard guard)
    : dir_(dir), guard_(std::move(guard)), tensorboard_(dir.root()) {
  if (!guard_) guard_ = [](const std::string&, const std::function<void()>& write) { write(); };
}

nlohmann::json StepLogger::metrics_record(const StepReport& report) {
  nlohmann::json rec = {{"step", report.step}, {"time", wall_time_s()}, {"policy_version", report.policy_version}};
  if (!report.verdict.empty()) rec["verdict"] = report.verdict;
  for (const auto& [k, v] : report.metrics) rec[k] = std::isfinite(v) ? nlohmann::json(v) : nlohmann::json();
  return rec;
}

void StepLogger::log(const StepReport& report) {
  for (const auto& s : report.samples)  // one write each: a retry never repeats a written line
    guard_(RunDirectory::kSamplesFile, [&] { dir_.append_sample(sample_to_json(s)); });
  const nlohmann::json rec = metrics_record(report);
  guard_(RunDirectory::kMetricsFile, [&] { dir_.append_metrics(rec); });
  tensorboard_.log_metrics(rec);
}

}  // namespace grpo::run
