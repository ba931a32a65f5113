#include "core/run/run_status.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/strings.h"
#include "core/run/run_dir.h"

namespace fs = std::filesystem;

namespace grpo::run {
namespace {

// The parseable JSON objects of a .jsonl file (a torn last line is skipped).
std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  if (!file_exists(path)) return out;
  for (const auto& line : split(read_file(path), '\n')) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.is_object()) out.push_back(std::move(j));
  }
  return out;
}

}  // namespace

nlohmann::json read_run_status(const std::string& run_dir) {
  check(is_directory(run_dir), run_dir, "not a directory", "give the run directory `grpo train` printed");
  const std::string cfg_path = path_join(run_dir, "config.json");
  check(file_exists(cfg_path), cfg_path, "missing: this is not a run directory");
  auto cfg = nlohmann::json::parse(read_file(cfg_path), nullptr, false);
  check(!cfg.is_discarded(), cfg_path, "not valid JSON");

  nlohmann::json st = {{"run_dir", run_dir}, {"model", cfg.value("model_name_or_path", "")},
                       {"max_steps", cfg.value("max_steps", 0)}};
  auto metrics = read_jsonl(path_join(run_dir, "metrics.jsonl"));
  auto events = read_jsonl(path_join(run_dir, "events.jsonl"));
  st["step"] = metrics.empty() ? 0 : metrics.back().value("step", 0);
  st["last_metrics"] = metrics.empty() ? nlohmann::json::object() : metrics.back();

  // State from the newest control event.
  std::string state = events.empty() ? "created" : "running";
  nlohmann::json last_event = nlohmann::json::object();
  for (const auto& e : events) {
    const std::string ev = e.value("event", "");
    if (ev == "start" || ev == "resume") state = "running";
    else if (ev == "pause") state = "paused";
    else if (ev == "stop") state = "stopped";
    else if (ev == "finished") state = "finished";
    if (ev != "warning") last_event = e;
  }
  st["state"] = state;
  st["last_event"] = last_event;

  RunDirectory dir(run_dir);
  auto versions = dir.adapter_versions();
  st["adapter_versions"] = versions;
  st["policy_version"] = versions.empty() ? 0 : versions.back();
  std::vector<std::string> ckpts;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(path_join(run_dir, "checkpoints"), ec))
    if (e.is_directory() && starts_with(e.path().filename().string(), "step-")) ckpts.push_back(e.path().filename().string());
  std::sort(ckpts.begin(), ckpts.end(), [](const std::string& a, const std::string& b) {
    return std::stoll(a.substr(5)) < std::stoll(b.substr(5));
  });
  st["checkpoints"] = ckpts;
  return st;
}

std::string format_run_status(const nlohmann::json& s) {
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "run       %s\nmodel     %s\nstate     %s\nstep      %lld / %lld\npolicy    v%lld\n",
                s["run_dir"].get<std::string>().c_str(), s["model"].get<std::string>().c_str(),
                s["state"].get<std::string>().c_str(), static_cast<long long>(s["step"].get<int64_t>()),
                static_cast<long long>(s["max_steps"].get<int64_t>()),
                static_cast<long long>(s["policy_version"].get<int64_t>()));
  out += buf;
  const auto& m = s["last_metrics"];
  for (const char* k : {"reward", "loss", "eval/accuracy", "sample/staleness_mean", "perf/step_s", "verdict"}) {
    if (!m.contains(k) || m[k].is_null()) continue;
    if (m[k].is_number()) std::snprintf(buf, sizeof buf, "%-22s %.4f\n", k, m[k].get<double>());
    else std::snprintf(buf, sizeof buf, "%-22s %s\n", k, m[k].dump().c_str());
    out += buf;
  }
  if (!s["checkpoints"].empty()) out += "checkpoint " + s["checkpoints"].back().get<std::string>() + "\n";
  return out;
}

}  // namespace grpo::run
