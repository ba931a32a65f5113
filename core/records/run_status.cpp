#include "core/records/run_status.h"

#include <cstdio>

#include "core/common/json_fields.h"
#include "core/records/engine_types.h"
#include "core/records/run_dir.h"

namespace grpo::run {

// The state's name, as /grpo/run, the events and the views write it (engine_types.h).
const char* to_string(EngineState s) {
  switch (s) {
    case EngineState::Idle: return "idle";
    case EngineState::Running: return "running";
    case EngineState::Paused: return "paused";
    case EngineState::Stopping: return "stopping";
    case EngineState::Finished: return "finished";
    case EngineState::Failed: return "failed";
  }
  return "?";
}

nlohmann::json read_run_status(const std::string& run_dir) {
  const RunFolder run = RunFolder::open_existing(run_dir);  // reads only: creates nothing
  const nlohmann::json cfg = run.read_config();

  // config.json may be another tool's or hand-edited: a mistyped key shows as its fallback.
  nlohmann::json st = {{"run_dir", run_dir}, {"model", json_string(cfg, "model_name_or_path")},
                       {"max_steps", json_integer(cfg, "max_steps")}};
  const auto metrics = run.read_metrics();
  const auto events = run.read_events();
  st["step"] = metrics.empty() ? 0 : json_integer(metrics.back(), "step");
  st["last_metrics"] = metrics.empty() ? nlohmann::json::object() : metrics.back();

  std::string state = "created";
  nlohmann::json last_event = nlohmann::json::object();
  for (const auto& e : events) {
    state = run_state_after(state, e);
    if (!(e.contains("event") && e["event"] == "warning")) last_event = e;
  }
  st["state"] = state;
  st["last_event"] = last_event;

  const auto versions = run.adapter_versions();
  st["adapter_versions"] = versions;
  st["policy_version"] = versions.empty() ? 0 : versions.back();
  std::vector<std::string> ckpts;
  for (int64_t s : run.checkpoint_steps()) ckpts.push_back(RunFolder::checkpoint_name(s));
  st["checkpoints"] = ckpts;
  return st;
}

std::string run_state_after(const std::string& state, const nlohmann::json& event) {
  const auto kind = event.is_object() ? event.find("event") : event.end();
  const std::string ev = kind != event.end() && kind->is_string() ? kind->get<std::string>() : std::string();
  if (ev == "start" || ev == "resume") return "running";
  if (ev == "pause") return "paused";
  if (ev == "stop") return "stopped";
  if (ev == "finished") return "finished";
  if (ev == "error") return "failed";
  return state == "created" ? "running" : state;
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
