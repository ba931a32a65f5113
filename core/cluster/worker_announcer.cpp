// WorkerAnnouncer: a BeaconSender on a thread of its own.
#include "core/cluster/worker_announcer.h"

#include <QCryptographicHash>
#include <QEventLoop>
#include <QTimer>

#include "core/cluster/discovery.h"
#include "core/common/error.h"
#include "core/common/files.h"

namespace grpo::cluster {

WorkerAnnouncer::WorkerAnnouncer(const std::string& cluster_token, const std::string& target,
                                 std::function<Beacon()> make_beacon, double interval_s) {
  const HostPort hp = parse_host_port(target, "--announce");
  const std::string key = beacon_key(cluster_token);
  thread_ = std::thread([this, hp, key, make_beacon = std::move(make_beacon), interval_s] {
    QEventLoop loop;
    BeaconSender sender(key, hp, make_beacon, interval_s);
    QTimer count;  // mirrors the sender's count for sent()
    QObject::connect(&count, &QTimer::timeout, &loop, [&] { sent_ = sender.sent(); });
    count.start(50);
    {
      std::lock_guard<std::mutex> lock(mu_);
      loop_ = &loop;
      started_ = true;
    }
    cv_.notify_all();
    sender.start();
    sent_ = sender.sent();
    bool stop;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop = stopping_;
    }
    if (!stop) loop.exec();
    std::lock_guard<std::mutex> lock(mu_);
    loop_ = nullptr;
  });
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return started_; });
}

WorkerAnnouncer::~WorkerAnnouncer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    if (loop_) QMetaObject::invokeMethod(loop_, "quit", Qt::QueuedConnection);
  }
  if (thread_.joinable()) thread_.join();
}

Beacon beacon_from_status(const nlohmann::json& status) {
  Beacon b;
  if (!status.is_object()) return b;
  b.name = status.value("name", "");
  b.url = status.value("url", "");
  b.model = status.value("model_fingerprint", "");
  b.version = status.value("version", "");
  if (status.contains("devices") && status["devices"].is_array()) {
    for (const auto& d : status["devices"])
      if (d.is_string()) b.devices += (b.devices.empty() ? "" : ", ") + d.get<std::string>();
  }
  if (status.contains("load") && status["load"].is_object()) {
    const auto& l = status["load"];
    b.load = static_cast<double>(l.value("queued", int64_t(0)) + l.value("running", int64_t(0)));
  }
  return b;
}

std::string model_fingerprint(const std::string& model_dir) {
  const std::string config = read_file(path_join(model_dir, "config.json"));
  return QCryptographicHash::hash(QByteArray::fromStdString(config), QCryptographicHash::Sha256)
      .toHex()
      .left(16)
      .toStdString();
}

}  // namespace grpo::cluster
