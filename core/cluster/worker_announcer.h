// WorkerAnnouncer: the `grpo worker` side of discovery. Runs a BeaconSender (discovery.h) on its
// own thread with its own event loop, so a worker whose main thread only waits can announce
// itself every few seconds. `make_beacon` is called on that thread before each send (name, url,
// model fingerprint, devices, load); it must be thread-safe.
//
// Wiring in app/cmd_worker.cpp (a flag and three lines, after worker.start()):
//   cmd->add_option("--announce", args->announce, "Send signed discovery beacons to GROUP:PORT");
//   std::unique_ptr<cluster::WorkerAnnouncer> announcer;
//   if (!args->announce.empty())
//     announcer = std::make_unique<cluster::WorkerAnnouncer>(
//         o.token, args->announce, [&worker] { return cluster::beacon_from_status(worker.status_json()); });
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/cluster/beacon.h"

class QEventLoop;

namespace grpo::cluster {

class WorkerAnnouncer {
public:
  // `target`: "group:port" or "host:port" (parse_host_port); throws grpo::Error when malformed.
  WorkerAnnouncer(const std::string& cluster_token, const std::string& target, std::function<Beacon()> make_beacon,
                  double interval_s = 3.0);
  ~WorkerAnnouncer();  // stops the thread
  WorkerAnnouncer(const WorkerAnnouncer&) = delete;
  WorkerAnnouncer& operator=(const WorkerAnnouncer&) = delete;
  int64_t sent() const { return sent_.load(); }

private:
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  QEventLoop* loop_ = nullptr;
  bool started_ = false, stopping_ = false;
  std::atomic<int64_t> sent_{0};
};

// The beacon for a worker from WorkerServer::status_json(): name, url, model_fingerprint,
// devices (joined with ", "), version, load = queued + running requests. Missing fields stay empty.
Beacon beacon_from_status(const nlohmann::json& status);

// A short fingerprint of a model directory (sha256 of config.json, first 16 hex digits), so the
// trainer can tell workers that serve another base model.
std::string model_fingerprint(const std::string& model_dir);

}  // namespace grpo::cluster
