#include "ui/run_history.h"

#include <cmath>

#include "core/api/charts.h"
#include "core/api/util.h"
#include "core/api/run_folder.h"

namespace grpo::ui {
namespace {

QString value_text(const nlohmann::json& v) {
  if (v.is_number_float()) return QString::number(v.get<double>(), 'g', 4);
  return QString::fromStdString(v.dump());
}

}  // namespace

void add_step(MetricStore& store, const run::StepReport& report) {
  const double x = static_cast<double>(report.step);
  for (const auto& [k, v] : report.metrics) store.add(x, k, v);
  store.add(x, "policy_version", static_cast<double>(report.policy_version));
  for (const auto& [k, v] : run::derived_metrics(report.metrics)) store.add(x, k, v);
}

QString describe_event(const nlohmann::json& e) {
  const std::string kind = json_string(e, "event");
  QString text = QString::fromStdString(kind);
  if (kind == "retune" && e.contains("new") && e["new"].is_object()) {
    QStringList parts;
    for (const auto& [k, v] : e["new"].items()) {
      QString old = e.contains("old") && e["old"].contains(k) ? value_text(e["old"][k]) : "?";
      parts << QString::fromStdString(k) + " " + old + " → " + value_text(v);
    }
    text += ": " + parts.join(", ");
  } else if (e.contains("message") && e["message"].is_string()) {
    text += ": " + QString::fromStdString(e["message"].get<std::string>());
  } else if (e.contains("worker") && e["worker"].is_string()) {
    text += ": " + QString::fromStdString(e["worker"].get<std::string>());
  }
  return text;
}

QString event_advice(const nlohmann::json& e) { return QString::fromStdString(json_string(e, "advice")); }

bool is_fault(const nlohmann::json& e) { return !event_advice(e).isEmpty(); }

bool add_event_marker(MetricStore& store, const nlohmann::json& e) {
  if (!run::event_is_marker(e)) return false;  // the catalogue's rule, the browser's too (catalogue.h)
  Marker m;
  m.kind = QString::fromStdString(json_string(e, "event"));
  m.severity = QString::fromStdString(run::event_severity(e));
  m.label = QString::fromStdString(run::event_label(e));
  m.step = run::event_marker_step(e);
  if (!std::isfinite(m.step)) m.step = 0;
  QString d = describe_event(e);
  const int colon = d.indexOf(": ");
  m.text = colon >= 0 ? d.mid(colon + 2) : QString();
  if (is_fault(e)) m.text += (m.text.isEmpty() ? "" : " — ") + event_advice(e);
  store.add_marker(std::move(m));
  return true;
}

RunHistory load_run_history(const std::string& run_dir, MetricStore& store) {
  const run::RunFolder run = run::RunFolder::open_existing(run_dir);  // reads only: creates nothing
  RunHistory h;
  h.config = run.read_config();
  store.clear();
  for (const auto& j : run.read_metrics()) {
    run::MetricsRecord rec;
    if (!run::read_metrics_record(j, &rec)) continue;
    if (!rec.verdict.empty()) h.last_verdict = rec.verdict;
    h.steps = rec.step;
    add_step(store, run::step_report_of(rec));
  }
  for (const auto& j : run.read_events()) add_event_marker(store, j);
  try {
    h.state = run::read_run_status(run_dir).value("state", "");
  } catch (const std::exception&) {
  }
  return h;
}

}  // namespace grpo::ui
