#include "core/records/metrics_record.h"

namespace grpo::run {

bool read_metrics_record(const nlohmann::json& rec, MetricsRecord* out) {
  if (!rec.is_object()) return false;
  const auto step = rec.find("step");
  if (step == rec.end() || !step->is_number_integer()) return false;
  MetricsRecord r;
  r.step = step->get<int64_t>();
  for (const auto& [k, v] : rec.items()) {
    if (k == "step") continue;
    if (k == "time" || k == "wall_time") {
      if (v.is_number() && (k == "time" || !rec.contains("time"))) r.time = v.get<double>();
    } else if (k == "policy_version") {
      if (v.is_number_integer()) r.policy_version = v.get<int64_t>();
    } else if (k == "verdict") {
      if (v.is_string()) r.verdict = v.get<std::string>();
    } else if (v.is_number()) {
      r.metrics[k] = v.get<double>();
    }
  }
  *out = std::move(r);
  return true;
}

StepReport step_report_of(const MetricsRecord& r) {
  StepReport s;
  s.step = r.step;
  s.elapsed_s = std::isfinite(r.time) ? r.time : 0.0;
  s.policy_version = r.policy_version;
  s.metrics = r.metrics;
  s.verdict = r.verdict;
  return s;
}

}  // namespace grpo::run
