// RemoteRunClient: the desktop app attached to a headless `grpo train --serve HOST:PORT` over its
// HTTP endpoint (core/serve/run_endpoint.h documents the routes; this file speaks HTTP only, no
// engine headers). Polls GET /grpo/run, GET /grpo/metrics?since=<last step> and GET
// /grpo/events?since=<events seen> about once a second on the GUI thread's event loop
// (asynchronous QNetworkAccessManager, never blocking), turns the run's metrics records into
// StepReports and its events lines into EngineEvents like a local run's, and sends pause, resume,
// stop and retune as POSTs with the cluster token. Failures are reported through errorChanged (shown
// in place); after kMaxFailures consecutive failed polls it stops polling.
#pragma once

#include <QByteArray>
#include <QObject>
#include <QString>
#include <QUrl>
#include <QVector>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/api/session.h"

class QNetworkAccessManager;
class QNetworkReply;
class QTimer;

namespace grpo::ui {

class RemoteRunClient : public QObject {
  Q_OBJECT
public:
  static constexpr int kPollIntervalMs = 1000;
  static constexpr int kMaxFailures = 10;   // consecutive failed polls before giving up
  static constexpr int kRequestTimeoutMs = 10000;

  explicit RemoteRunClient(QObject* parent = nullptr);
  ~RemoteRunClient() override;

  // Starts polling `base` (http://HOST:PORT, or https://HOST:PORT, optionally with the pinned
  // certificate fingerprint as a fragment: https://HOST:PORT#sha256=HEX, core/cluster/tls.h) with
  // the bearer token; false with *error when the URL is not an http(s) URL, the fingerprint is
  // malformed or the token is empty. The first poll's outcome arrives by signal.
  bool attach(const QUrl& base, const QByteArray& token, QString* error = nullptr);
  void detach();

  bool attached() const { return attached_; }
  QUrl url() const { return base_; }
  run::EngineState state() const { return state_; }  // the remote engine's own state
  // A pause was accepted but the engine is still finishing its step (state() says Running): the run
  // holds at the next step boundary. Resume cancels it.
  bool pausePending() const { return pausePending_; }
  int64_t step() const { return step_; }
  int64_t maxSteps() const { return maxSteps_; }
  QString runDir() const { return runDir_; }
  QString lastError() const { return error_; }
  int failures() const { return failures_; }

  void pause();
  void resume();
  void stop();
  void retune(const nlohmann::json& changes);  // result through retuneDone

  // One metrics record -> a StepReport (numeric fields except step/time/policy_version).
  static bool report_from_record(const nlohmann::json& rec, int64_t maxSteps, run::StepReport* out);

Q_SIGNALS:
  void stepsReady(const QVector<::grpo::run::StepReport>& reports);  // in step order
  void eventsReady(const QVector<::grpo::run::EngineEvent>& events);  // in file order
  void stateChanged(::grpo::run::EngineState state);  // also when pausePending() changes
  void errorChanged(const QString& error);  // "" when the endpoint answers again
  void retuneDone(const QString& error);    // "" when accepted
  void detached();

private:
  QNetworkReply* send(const QByteArray& method, const QString& path, const QByteArray& body = {});
  void poll();
  void onRun(QNetworkReply* r);
  void onMetrics(QNetworkReply* r);
  void onEvents(QNetworkReply* r);
  void control(const char* route);
  void fail(const QString& message);
  void setError(const QString& e);
  void setState(run::EngineState s, bool pausePending = false);

  QNetworkAccessManager* nam_;
  QTimer* timer_;
  QUrl base_;
  QByteArray token_;
  std::vector<std::string> pins_;  // from the URL's #sha256= fragment
  bool attached_ = false, inFlight_ = false;
  bool stopSent_ = false;  // the endpoint accepted a stop: the process exits after the final save
  uint64_t generation_ = 0;  // replies from a previous attachment are ignored
  run::EngineState state_ = run::EngineState::Idle;
  bool pausePending_ = false;
  int64_t step_ = 0, maxSteps_ = 0;
  int64_t eventsSeen_ = 0;  // event lines received (the next ?since=)
  QString runDir_, error_;
  int failures_ = 0;
  double t0_ = -1;  // wall time of the first record seen: elapsed_s counts from it
};

}  // namespace grpo::ui
