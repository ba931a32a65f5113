// The chart catalogue: every chart a run's views draw (title, unit, lines), in the order they are
// shown, and the metrics the views derive from a metrics record. The desktop Dashboard builds its
// charts from it, and the browser view gets it as JSON from the run's endpoint
// (GET /grpo/dashboard/charts), so a chart added here appears in both. No Qt, no torch.
// docs/dashboard.md lists what each chart shows.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace grpo::run {

struct ChartLine {
  std::string key;       // a metric name; with `suffix` set, a prefix: every key prefix*suffix is a line
  std::string label;     // the legend's text ("" for pattern lines: the matched middle part)
  std::string suffix;    // pattern lines only
  std::string band_std;  // draw key +- this metric as a band (mean +- std)
  bool dashed = false;   // a secondary line (drawn dashed)
  bool points = false;   // sparse values (eval): draw points as well
};

struct ChartSpec {
  std::string id;     // stable name (the browser's data-chart attribute, tests)
  std::string title;  // what the user reads, the unit included
  std::string unit;   // the y axis ("" = none)
  std::vector<ChartLine> lines;
};

// The catalogue, in display order.
const std::vector<ChartSpec>& chart_catalogue();
// The catalogue as the browser view receives it: [{id, title, unit, help, lines: [{key, label,
// suffix, band_std, dashed, points}]}].
nlohmann::json chart_catalogue_json();
// What a chart's lines are, one line of text each ("generated: Completion tokens generated per
// second, every source together. [tok/s]"), from the metric catalogue (catalogue.h): the hover
// text of the chart in both views.
std::string chart_help(const ChartSpec& chart);
// The chart with this id, or nullptr.
const ChartSpec* find_chart(const std::string& id);

// Metrics the views compute from one metrics record's metrics (MetricsRecord::metrics,
// core/records/metrics_record.h), beside what the trainer logged: trained_tok_s =
// batch/trained_tokens_per_step / perf/step_s. Only those whose inputs are present and finite
// (and step time > 0) are returned.
std::map<std::string, double> derived_metrics(const std::map<std::string, double>& record);

}  // namespace grpo::run
