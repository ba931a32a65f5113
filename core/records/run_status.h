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

// A run's state as its events say it, one event at a time: the state after `event`, given the
// state before it ("created" before any event). start and resume -> running, pause -> paused,
// stop -> stopped, finished -> finished, error -> failed; any other event leaves the state as it
// was, except that a run with events is no longer "created". `grpo status`, the browser view and
// `grpo serve` all fold a run's events through this one function (docs/formats.md, "events.jsonl").
// An event that is not an object, or whose "event" is not a string, changes nothing but "created".
std::string run_state_after(const std::string& state, const nlohmann::json& event);

}  // namespace grpo::run
