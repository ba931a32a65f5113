// A run's metrics file -> CSV and -> TensorBoard.
#include "core/records/metrics_export.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/error.h"
#include "core/records/run_dir.h"
#include "core/records/tensorboard.h"

namespace grpo::run {
namespace {

using json = nlohmann::json;

// Every record; an export refuses a malformed line rather than silently drop a step.
std::vector<json> read_records(const std::string& run_dir) {
  const RunFolder run(run_dir);
  check(run.has_file(RunFolder::kMetricsFile), run.metrics_path(), "not found",
        "is this a run directory with at least one finished step?");
  return run.read_metrics(Malformed::Refuse);
}

std::string csv_field(const json& v) {
  if (v.is_null()) return "";
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d)) return "";
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", d);
    return buf;
  }
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  const std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

std::string metrics_csv(const std::string& run_dir) {
  const auto records = read_records(run_dir);
  const std::vector<std::string> first = {"step", "time", "policy_version"};
  std::set<std::string> rest;
  for (const auto& r : records)
    for (const auto& [k, v] : r.items())
      if (std::find(first.begin(), first.end(), k) == first.end()) rest.insert(k);
  std::vector<std::string> columns = first;
  columns.insert(columns.end(), rest.begin(), rest.end());
  std::string out;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (i) out += ",";
    out += csv_field(json(columns[i]));
  }
  out += "\n";
  for (const auto& r : records) {
    for (size_t i = 0; i < columns.size(); ++i) {
      if (i) out += ",";
      auto it = r.find(columns[i]);
      if (it != r.end()) out += csv_field(*it);
    }
    out += "\n";
  }
  return out;
}

std::string metrics_to_tensorboard(const std::string& run_dir, const std::string& log_dir) {
  const auto records = read_records(run_dir);
  TensorBoardWriter writer(log_dir.empty() ? run_dir : log_dir);
  for (const auto& r : records) writer.add_metrics_record(r);
  return writer.path();
}

}  // namespace grpo::run
