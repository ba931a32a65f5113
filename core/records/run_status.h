// `grpo status`: a run's state read from its directory alone (its config, metrics and events
// files, adapters/, checkpoints/; through RunFolder, which creates nothing), safe while another
// process is training it: files are only ever replaced atomically or appended whole lines, and a
// torn last line is ignored.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace grpo::run {

// {"run_dir","state","step","max_steps","policy_version","adapter_versions","checkpoints",
//  "last_metrics":{...},"last_event":{...},"model"}
nlohmann::json read_run_status(const std::string& run_dir);
std::string format_run_status(const nlohmann::json& status);

}  // namespace grpo::run
