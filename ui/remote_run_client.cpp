#include "ui/remote_run_client.h"

#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QNetworkRequest>
#include <QTimer>
#include <QUrlQuery>

#include "core/api/util.h"
#include "core/api/cluster.h"
#include "core/api/run_folder.h"

namespace grpo::ui {
namespace {

// A reply body as JSON; discarded when malformed or nested deeper than kMaxJsonDepth (the trainer
// is a peer: what it sends is bounded before a DOM is built or printed).
nlohmann::json parse_reply(const QByteArray& body) {
  const std::string text = body.toStdString();
  if (::grpo::json_depth(text) > ::grpo::kMaxJsonDepth) return nlohmann::json::value_t::discarded;
  return nlohmann::json::parse(text, nullptr, false);
}

// The engine's own state: a pause that was asked for holds the run only at the next step boundary,
// so "paused": true beside "running" is a pause still pending, not a paused run.
run::EngineState parse_state(const std::string& s) {
  using run::EngineState;
  for (auto e : {EngineState::Idle, EngineState::Running, EngineState::Paused, EngineState::Stopping,
                 EngineState::Finished, EngineState::Failed})
    if (s == run::to_string(e)) return e;
  return EngineState::Running;
}

// The server's {"error":{"message":...}} body, else the transport's error text.
QString reply_error(QNetworkReply* r, const QByteArray& body) {
  auto j = parse_reply(body);
  if (j.is_object() && j.contains("error") && j["error"].is_object() && j["error"].contains("message") &&
      j["error"]["message"].is_string())
    return QString::fromStdString(j["error"]["message"].get<std::string>());
  const int status = r->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
  const std::string tls = cluster::tls_refusal(r);  // the certificate and what it should have been
  if (status == 0 && !tls.empty()) return QString::fromStdString(tls);
  return status > 0 ? QString("HTTP %1: %2").arg(status).arg(r->errorString()) : r->errorString();
}

}  // namespace

RemoteRunClient::RemoteRunClient(QObject* parent) : QObject(parent) {
  nam_ = new QNetworkAccessManager(this);
  timer_ = new QTimer(this);
  timer_->setInterval(kPollIntervalMs);
  connect(timer_, &QTimer::timeout, this, &RemoteRunClient::poll);
}

RemoteRunClient::~RemoteRunClient() = default;

bool RemoteRunClient::attach(const QUrl& base, const QByteArray& token, QString* error) {
  auto refuse = [&](const QString& e) {
    if (error) *error = e;
    return false;
  };
  if (!base.isValid() || (base.scheme() != "http" && base.scheme() != "https") || base.host().isEmpty() ||
      base.port() <= 0)
    return refuse(tr("%1: expected http(s)://HOST:PORT (what `grpo train --serve` printed)").arg(base.toString()));
  if (token.trimmed().isEmpty()) return refuse(tr("the cluster token is empty"));
  std::vector<std::string> pins;
  if (base.hasFragment()) {
    const QString f = base.fragment();
    if (!f.startsWith("sha256=")) return refuse(tr("%1: the only URL fragment understood is #sha256=FINGERPRINT").arg(base.toString()));
    // A pin on a plain-HTTP URL would protect nothing while looking as if it did (issue 18).
    if (base.scheme() != "https")
      return refuse(tr("%1: a certificate pin (#sha256=) needs an https:// URL; this one would send the token "
                       "in clear text").arg(base.toString()));
    try {
      pins = cluster::parse_tls_pins(f.mid(7).toStdString(), "#sha256=");
    } catch (const std::exception& e) {
      return refuse(QString::fromStdString(e.what()));
    }
  }
  detach();
  base_ = base;
  base_.setPath("");
  base_.setFragment(QString());
  pins_ = std::move(pins);
  token_ = token.trimmed();
  attached_ = true;
  ++generation_;
  state_ = run::EngineState::Idle;
  pausePending_ = false;
  step_ = maxSteps_ = 0;
  eventsSeen_ = 0;
  runDir_.clear();
  error_.clear();
  failures_ = 0;
  t0_ = -1;
  stopSent_ = false;
  inFlight_ = false;
  timer_->start();
  poll();
  return true;
}

void RemoteRunClient::detach() {
  if (!attached_) return;
  attached_ = false;
  ++generation_;
  timer_->stop();
  inFlight_ = false;
  Q_EMIT detached();
}

QNetworkReply* RemoteRunClient::send(const QByteArray& method, const QString& path, const QByteArray& body) {
  QUrl u = base_;
  const int q = path.indexOf('?');
  u.setPath(q < 0 ? path : path.left(q));
  if (q >= 0) u.setQuery(path.mid(q + 1));
  QNetworkRequest req(u);
  req.setRawHeader("Authorization", "Bearer " + token_);
  req.setTransferTimeout(kRequestTimeoutMs);
  if (!body.isEmpty()) req.setHeader(QNetworkRequest::ContentTypeHeader, "application/json");
  return cluster::send_request(*nam_, req, method, body, pins_);
}

void RemoteRunClient::poll() {
  if (!attached_ || inFlight_) return;
  inFlight_ = true;
  const uint64_t gen = generation_;
  QNetworkReply* r = send("GET", "/grpo/run");
  connect(r, &QNetworkReply::finished, this, [this, r, gen] {
    r->deleteLater();
    if (gen != generation_) return;
    onRun(r);
  });
}

void RemoteRunClient::onRun(QNetworkReply* r) {
  const QByteArray body = r->readAll();
  if (r->error() != QNetworkReply::NoError) {
    inFlight_ = false;
    // A run that was stopping (or finished) closes its endpoint when the process exits.
    if ((stopSent_ || state_ == run::EngineState::Stopping || state_ == run::EngineState::Finished) &&
        (r->error() == QNetworkReply::ConnectionRefusedError || r->error() == QNetworkReply::RemoteHostClosedError)) {
      setState(run::EngineState::Finished);
      timer_->stop();
      return;
    }
    fail(reply_error(r, body));
    return;
  }
  auto j = parse_reply(body);
  if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) {
    inFlight_ = false;
    fail(tr("%1/grpo/run: expected a JSON object with \"step\"").arg(base_.toString()));
    return;
  }
  // A peer's answer: typed lookups that never throw (a mistyped field is its fallback).
  maxSteps_ = json_integer(j, "max_steps", maxSteps_);
  runDir_ = QString::fromStdString(json_string(j, "run_dir"));
  const auto st = parse_state(json_string(j, "state"));
  const bool pending = st == run::EngineState::Running && json_bool(j, "paused", false);
  const uint64_t gen = generation_;
  QNetworkReply* m = send("GET", QString("/grpo/metrics?since=%1").arg(step_));
  connect(m, &QNetworkReply::finished, this, [this, m, gen, st, pending] {
    m->deleteLater();
    if (gen != generation_) return;
    onMetrics(m);
    // A poll that left before the stop was accepted may still say "running".
    if (attached_)
      setState(stopSent_ && st == run::EngineState::Running ? run::EngineState::Stopping : st, pending && !stopSent_);
    if (!attached_) {
      inFlight_ = false;
      return;
    }
    QNetworkReply* e = send("GET", QString("/grpo/events?since=%1").arg(eventsSeen_));
    connect(e, &QNetworkReply::finished, this, [this, e, gen] {
      e->deleteLater();
      if (gen != generation_) return;
      inFlight_ = false;
      onEvents(e);
    });
  });
}

void RemoteRunClient::onEvents(QNetworkReply* r) {
  const QByteArray body = r->readAll();
  // An endpoint from before /grpo/events: the run is followed without its events.
  if (r->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt() == 404) return;
  if (r->error() != QNetworkReply::NoError) return fail(reply_error(r, body));
  auto j = parse_reply(body);
  if (!j.is_array()) return fail(tr("%1/grpo/events: expected a JSON array").arg(base_.toString()));
  QVector<run::EngineEvent> events;
  for (auto& rec : j) {
    if (!rec.is_object()) rec = nlohmann::json::object();
    const auto time = rec.contains("time") && rec["time"].is_number() ? rec["time"].get<double>() : 0.0;
    const auto step = rec.contains("step") && rec["step"].is_number_integer() ? rec["step"].get<int64_t>() : int64_t{0};
    const auto kind = rec.contains("event") && rec["event"].is_string() ? rec["event"].get<std::string>() : std::string();
    events.push_back(run::EngineEvent{kind, time, step, rec});
  }
  eventsSeen_ += static_cast<int64_t>(j.size());
  if (!events.isEmpty()) Q_EMIT eventsReady(events);
}

void RemoteRunClient::onMetrics(QNetworkReply* r) {
  const QByteArray body = r->readAll();
  if (r->error() != QNetworkReply::NoError) return fail(reply_error(r, body));
  auto j = parse_reply(body);
  if (!j.is_array()) return fail(tr("%1/grpo/metrics: expected a JSON array").arg(base_.toString()));
  QVector<run::StepReport> reports;
  for (const auto& rec : j) {
    run::StepReport rep;
    if (report_from_record(rec, maxSteps_, &rep) && rep.step > step_) {
      // A metrics record's "time" is wall-clock: the elapsed time counts from the first record.
      if (t0_ < 0) t0_ = rep.elapsed_s;
      rep.elapsed_s -= t0_;
      step_ = rep.step;
      reports.push_back(std::move(rep));
    }
  }
  failures_ = 0;
  setError(QString());
  if (!reports.isEmpty()) Q_EMIT stepsReady(reports);
}

bool RemoteRunClient::report_from_record(const nlohmann::json& rec, int64_t maxSteps, run::StepReport* out) {
  run::MetricsRecord r;
  if (!run::read_metrics_record(rec, &r)) return false;
  *out = run::step_report_of(r);
  out->max_steps = maxSteps;
  return true;
}

void RemoteRunClient::fail(const QString& message) {
  ++failures_;
  if (failures_ >= kMaxFailures) {
    timer_->stop();
    setError(tr("%1: %2 (gave up after %3 failed polls; attach again to retry)")
                 .arg(base_.toString(), message).arg(failures_));
  } else {
    setError(tr("%1: %2 (retrying, %3/%4)").arg(base_.toString(), message).arg(failures_).arg(kMaxFailures));
  }
}

void RemoteRunClient::setError(const QString& e) {
  if (e == error_) return;
  error_ = e;
  Q_EMIT errorChanged(e);
}

void RemoteRunClient::setState(run::EngineState s, bool pausePending) {
  if (s == state_ && pausePending == pausePending_) return;
  state_ = s;
  pausePending_ = pausePending;
  Q_EMIT stateChanged(s);
}

void RemoteRunClient::control(const char* route) {
  if (!attached_) return;
  const uint64_t gen = generation_;
  const QString what = QString::fromLatin1(route);
  QNetworkReply* r = send("POST", "/grpo/run/" + what, "{}");
  connect(r, &QNetworkReply::finished, this, [this, r, gen, what] {
    r->deleteLater();
    if (gen != generation_) return;
    const QByteArray body = r->readAll();
    if (r->error() != QNetworkReply::NoError) {
      setError(tr("%1 %2: %3").arg(base_.toString(), what, reply_error(r, body)));
      return;
    }
    if (what == "stop") {
      stopSent_ = true;
      setState(run::EngineState::Stopping);
    }
    poll();  // show the new state without waiting for the timer
  });
}

void RemoteRunClient::pause() { control("pause"); }
void RemoteRunClient::resume() { control("resume"); }
void RemoteRunClient::stop() { control("stop"); }

void RemoteRunClient::retune(const nlohmann::json& changes) {
  if (!attached_) return;
  const uint64_t gen = generation_;
  QNetworkReply* r = send("POST", "/grpo/run/retune", QByteArray::fromStdString(changes.dump()));
  connect(r, &QNetworkReply::finished, this, [this, r, gen] {
    r->deleteLater();
    if (gen != generation_) return;
    const QByteArray body = r->readAll();
    Q_EMIT retuneDone(r->error() == QNetworkReply::NoError ? QString() : reply_error(r, body));
  });
}

}  // namespace grpo::ui
