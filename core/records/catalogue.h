// The catalogue of what a run records, beside its charts (charts.h): every metric a step logs
// (name, unit, group, doc, and how the views compute it when it is derived) and every kind of
// event (label, severity, whether the charts mark it). The desktop Dashboard and the browser view
// both read it (the browser as JSON from the run's endpoint: GET /grpo/dashboard/metrics and
// GET /grpo/dashboard/event-kinds), so a metric's unit, an event's label or whether it is drawn on
// the charts is decided here once. docs/formats.md lists both; docs/formulas.md defines the
// metrics. No Qt, no torch.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace grpo::run {

struct MetricSpec {
  std::string name;     // the metric's TRL name; with `suffix` set, a prefix (rewards/<f>/mean)
  std::string suffix;   // pattern metrics only
  std::string unit;     // "s", "tok/s", "versions", "fraction", "tokens", ... ("" = a plain number)
  std::string group;    // reward, loss, completions, batch, sample, rollout, perf, optimizer, eval, run
  std::string doc;      // one line
  std::string derived;  // "" when the trainer logs it; else how the views compute it (charts.h)
};

// Every metric, grouped, in the order docs/formats.md lists them.
const std::vector<MetricSpec>& metric_catalogue();
// The entry a metric name belongs to (exact, else the pattern whose prefix and suffix it has), or
// nullptr: a name the catalogue does not know.
const MetricSpec* find_metric(const std::string& name);
// [{name, suffix, unit, group, doc, derived}], as GET /grpo/dashboard/metrics serves it.
nlohmann::json metric_catalogue_json();

struct EventKindSpec {
  std::string kind;      // the event's "event" field
  std::string label;     // what a person reads ("worker quarantined")
  std::string severity;  // "info", "warning" or "error": the default when the event carries none
  bool marker = false;   // drawn on every chart at its step
  std::string step_field = "step";  // the field holding the step a marker is drawn at (a retune: applied_at_step)
};

// Every event kind the trainer, its sources and its workers write, in no particular order.
const std::vector<EventKindSpec>& event_catalogue();
const EventKindSpec* find_event_kind(const std::string& kind);
// {kinds: [{kind, label, severity, marker, step_field}], fault_field: "advice", cleared_suffix: "_cleared"}, as
// GET /grpo/dashboard/event-kinds serves it: the browser applies event_is_marker's rule with it.
nlohmann::json event_catalogue_json();

// The one rule both views follow: an event is marked on the charts when its kind says so, when it
// is a fault (it carries "advice", what the user should do), or when it clears one (its kind ends
// in "_cleared"). A line that is not an object with a string "event" is never marked.
bool event_is_marker(const nlohmann::json& event);
// "cleared" for a cleared fault, else the event's own "severity" when it has one, else its kind's,
// else "info".
std::string event_severity(const nlohmann::json& event);
// The step a marker for the event is drawn at: its kind's step_field when that is a number, else
// its "step"; NaN when neither is.
double event_marker_step(const nlohmann::json& event);
// The kind's label, else the kind itself ("?" for a line without one).
std::string event_label(const nlohmann::json& event);

}  // namespace grpo::run
