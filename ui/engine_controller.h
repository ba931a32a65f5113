// EngineController: the GUI side of the engine (docs/ARCHITECTURE.md, "The threads of a run"). It
// owns an EngineSession (the engine on its own thread); commands go down as plain calls
// (thread-safe, non-blocking), results come up through a mutex-guarded inbox that is drained on the
// GUI thread at most ~25 times per second, so a fast engine never floods the event loop. Every
// signal carries copied value types and is emitted on the GUI thread.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>

#include <QElapsedTimer>
#include <QObject>
#include <QString>
#include <QVector>

#include "core/api/config.h"
#include "core/api/session.h"

namespace grpo::ui {

class EngineController : public QObject {
  Q_OBJECT
public:
  static constexpr int kDrainIntervalMs = 40;  // ~25 Hz
  static constexpr size_t kMaxPendingReports = 100000;

  explicit EngineController(QObject* parent = nullptr);
  ~EngineController() override;  // stops the run and waits for its threads

  // Starts a run; false (and lastError()) when the config does not validate or a run is active.
  bool start(const ::grpo::grpo::TrainConfig& cfg, const QString& runDir, run::SessionOptions options = {});
  void pause();
  void resume();
  void stop();
  QString retune(const nlohmann::json& changes);  // "" when accepted
  // Sends an operator command for one worker down to the run's router; "" when queued.
  QString workerCommand(run::WorkerAction action, const QString& url);
  // Asks the live run for `count` more Slurm workers, off the GUI thread (sbatch may take seconds):
  // workersLaunched reports the job or why not. "" when asked, else why not at once.
  QString launchWorkers(int count, const nlohmann::json& overrides);
  QString cancelWorkers(const QString& job);  // scancel: seconds at most, also off the GUI thread
  // Serves the run's browser view and HTTP API on HOST:PORT (EngineSession::serve); "" when
  // serving or queued until the model has loaded, else why not. servingChanged brings the link.
  QString serve(const QString& hostPort);
  void stopServing();
  QString servingLink() const { return servingLink_; }  // "" when not serving

  bool active() const { return session_.active(); }
  run::EngineState state() const { return state_; }
  int64_t step() const { return step_; }
  int64_t maxSteps() const { return maxSteps_; }
  QString runDir() const { return runDir_; }
  QString lastError() const { return lastError_; }
  QString finalAdapter() const { return adapter_; }
  const ::grpo::grpo::TrainConfig& config() const { return config_; }  // the running config

Q_SIGNALS:
  void started(const QString& runDir);
  void stepsReady(const QVector<::grpo::run::StepReport>& reports);  // in step order
  void eventsReady(const QVector<::grpo::run::EngineEvent>& events);
  void workersReady(const QVector<::grpo::run::WorkerInfo>& workers);  // the newest snapshot
  void stateChanged(::grpo::run::EngineState state);
  void finished(const QString& adapter, const QString& error);  // error "" on success
  // Serving started (the link, its token in the fragment), ended (link "", error ""), or could not
  // start (link "", the reason).
  void servingChanged(const QString& link, const QString& error);
  // A launch or cancel from launchWorkers/cancelWorkers ended: the job ("" for a cancel), or why not.
  void workersLaunched(const QString& job, const QString& error);

private:
  void schedule();
  void drain();

  run::EngineSession session_;
  ::grpo::grpo::TrainConfig config_;
  QString runDir_, lastError_, adapter_, servingLink_;
  run::EngineState state_ = run::EngineState::Idle;
  int64_t step_ = 0, maxSteps_ = 0;

  struct Inbox {
    std::deque<run::StepReport> reports;
    QVector<run::EngineEvent> events;
    bool workersChanged = false;
    QVector<run::WorkerInfo> workers;
    bool servingChanged = false;
    QString servingLink, servingError;
    bool stateChanged = false;
    run::EngineState state = run::EngineState::Idle;
    bool done = false;
    QString adapter, error;
  };
  std::mutex mu_;
  Inbox inbox_;
  std::atomic<bool> scheduled_{false};
  QElapsedTimer sinceDrain_;
};

}  // namespace grpo::ui

