#include "core/run/step_logger.h"

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

nlohmann::json StepLogger::sample_record(const SampleRecord& s) {
  return {{"step", s.step}, {"policy_version", s.policy_version}, {"group", s.group},
          {"prompt", s.prompt}, {"completion", s.completion}, {"answer", s.answer},
          {"reward", std::isnan(s.reward) ? nlohmann::json() : nlohmann::json(s.reward)},
          {"advantage", s.advantage}, {"finish_reason", s.finish_reason}};
}

void StepLogger::log(const StepReport& report) {
  for (const auto& s : report.samples)  // one write each: a retry never repeats a written line
    guard_(RunDirectory::kSamplesFile, [&] { dir_.append_sample(sample_record(s)); });
  const nlohmann::json rec = metrics_record(report);
  guard_(RunDirectory::kMetricsFile, [&] { dir_.append_metrics(rec); });
  tensorboard_.log_metrics(rec);
}

}  // namespace grpo::run
