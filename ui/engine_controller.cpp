#include "ui/engine_controller.h"

#include <QThreadPool>

#include <QTimer>

#include "core/api/util.h"

namespace grpo::ui {

EngineController::EngineController(QObject* parent) : QObject(parent) {
  sinceDrain_.start();
}

EngineController::~EngineController() {
  session_.stop();
  session_.wait();
}

bool EngineController::start(const ::grpo::grpo::TrainConfig& cfg, const QString& runDir, run::SessionOptions options) {
  lastError_.clear();
  if (session_.active()) {
    lastError_ = tr("a run is still active: stop it first");
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_ = Inbox{};
  }
  run::SessionCallbacks cb;
  // Callbacks run on engine threads: they only copy into the inbox and ask for a drain.
  cb.on_step = [this](const run::StepReport& r) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (inbox_.reports.size() >= kMaxPendingReports) inbox_.reports.pop_front();
      inbox_.reports.push_back(r);
    }
    schedule();
  };
  cb.on_event = [this](const run::EngineEvent& e) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (inbox_.events.size() < 10000) inbox_.events.push_back(e);
    }
    schedule();
  };
  cb.on_workers = [this](const std::vector<run::WorkerInfo>& ws) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      inbox_.workersChanged = true;
      inbox_.workers = QVector<run::WorkerInfo>(ws.begin(), ws.end());  // only the newest counts
    }
    schedule();
  };
  cb.on_state = [this](run::EngineState s) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      inbox_.stateChanged = true;
      inbox_.state = s;
    }
    schedule();
  };
  cb.on_serving = [this](const std::string& link, const std::string& error) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      inbox_.servingChanged = true;
      inbox_.servingLink = QString::fromStdString(link);
      inbox_.servingError = QString::fromStdString(error);
    }
    schedule();
  };
  cb.on_done = [this](const std::string& adapter, const std::string& error) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      inbox_.done = true;
      inbox_.adapter = QString::fromStdString(adapter);
      inbox_.error = QString::fromStdString(error);
    }
    schedule();
  };
  try {
    session_.start(cfg, runDir.toStdString(), options, std::move(cb));
  } catch (const std::exception& e) {
    lastError_ = QString::fromStdString(e.what());
    return false;
  }
  config_ = cfg;
  config_.output_dir = runDir.toStdString();
  runDir_ = runDir;
  adapter_.clear();
  servingLink_.clear();
  step_ = 0;
  maxSteps_ = cfg.max_steps;
  state_ = run::EngineState::Idle;
  Q_EMIT started(runDir_);
  return true;
}

void EngineController::pause() { session_.pause(); }
void EngineController::resume() { session_.resume(); }
void EngineController::stop() { session_.stop(); }

QString EngineController::retune(const nlohmann::json& changes) {
  return QString::fromStdString(session_.retune(changes));
}

QString EngineController::serve(const QString& hostPort) {
  return QString::fromStdString(session_.serve(hostPort.trimmed().toStdString()));
}

void EngineController::stopServing() { session_.stop_serving(); }

QString EngineController::workerCommand(run::WorkerAction action, const QString& url) {
  return QString::fromStdString(session_.worker_command(action, url.toStdString()));
}

QString EngineController::launchWorkers(int count, const nlohmann::json& overrides) {
  if (!session_.active()) return tr("no run is active");
  QThreadPool::globalInstance()->start([this, count, overrides] {
    std::string job;
    const std::string err = session_.launch_workers(count, overrides, &job);
    QMetaObject::invokeMethod(this, [this, job, err] {
      Q_EMIT workersLaunched(QString::fromStdString(job), QString::fromStdString(err));
    }, Qt::QueuedConnection);
  });
  return {};
}

QString EngineController::cancelWorkers(const QString& job) {
  if (!session_.active()) return tr("no run is active");
  QThreadPool::globalInstance()->start([this, job = job.toStdString()] {
    const std::string err = session_.cancel_workers(job);
    QMetaObject::invokeMethod(this, [this, err] { Q_EMIT workersLaunched({}, QString::fromStdString(err)); },
                              Qt::QueuedConnection);
  });
  return {};
}

// Any thread: asks the GUI thread for one drain, no sooner than kDrainIntervalMs after the last.
void EngineController::schedule() {
  if (scheduled_.exchange(true)) return;
  QMetaObject::invokeMethod(this, [this] {
    const qint64 wait = std::max<qint64>(0, kDrainIntervalMs - sinceDrain_.elapsed());
    QTimer::singleShot(static_cast<int>(wait), this, [this] { drain(); });
  }, Qt::QueuedConnection);
}

void EngineController::drain() {
  Inbox in;
  {
    std::lock_guard<std::mutex> lock(mu_);
    scheduled_ = false;  // under the lock: a callback after this point schedules a new drain
    std::swap(in, inbox_);
  }
  sinceDrain_.restart();
  if (!in.reports.empty()) {
    QVector<run::StepReport> reports(in.reports.begin(), in.reports.end());
    step_ = reports.back().step;
    maxSteps_ = reports.back().max_steps;
    Q_EMIT stepsReady(reports);
  }
  if (!in.events.isEmpty()) Q_EMIT eventsReady(in.events);
  if (in.workersChanged) Q_EMIT workersReady(in.workers);
  if (in.servingChanged) {
    servingLink_ = in.servingLink;
    Q_EMIT servingChanged(in.servingLink, in.servingError);
  }
  if (in.stateChanged && in.state != state_) {
    state_ = in.state;
    Q_EMIT stateChanged(state_);
  }
  if (in.done) {
    session_.wait();
    adapter_ = in.adapter;
    if (!in.error.isEmpty()) lastError_ = in.error;
    const auto final_state = in.error.isEmpty() ? run::EngineState::Finished : run::EngineState::Failed;
    if (state_ != final_state) {
      state_ = final_state;
      Q_EMIT stateChanged(state_);
    }
    Q_EMIT finished(in.adapter, in.error);
  }
}

}  // namespace grpo::ui
