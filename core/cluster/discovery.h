// Discovery over UDP (docs/workers.md, "Discovery beacons"). A worker runs a BeaconSender that
// sends its signed beacon (beacon.h) every few seconds to a group:port (multicast by default; tests
// use 127.0.0.1 unicast). The trainer runs a WorkerDirectory that listens on that port, keeps the
// workers whose beacons verify, and forgets a worker that has been silent for `forget_after_s`.
// Both are QObjects living in the thread that created them; they need that thread's event loop, or
// WorkerDirectory::poll() called from time to time.
#pragma once

#include <QObject>
#include <QTimer>
#include <QUdpSocket>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/cluster/beacon.h"

namespace grpo::cluster {

struct HostPort {
  std::string host;
  uint16_t port = 0;
};
// "239.255.77.42:29517", "127.0.0.1:0", "[::1]:29517". Throws grpo::Error naming `what`.
HostPort parse_host_port(const std::string& text, const std::string& what);

class BeaconSender : public QObject {
  Q_OBJECT
public:
  // `make_beacon` is asked for the current beacon (load, url...) before each send; time is
  // filled in here. Sends once at start(), then every `interval_s`.
  BeaconSender(std::string key, HostPort target, std::function<Beacon()> make_beacon, double interval_s = 3.0,
               QObject* parent = nullptr);
  void start();
  void stop();
  void send_now();
  int64_t sent() const { return sent_; }

private:
  std::string key_;
  HostPort target_;
  std::function<Beacon()> make_beacon_;
  QUdpSocket socket_;
  QTimer timer_;
  int64_t sent_ = 0;
};

struct KnownWorker {
  Beacon beacon;      // the newest verified beacon
  double last_seen = 0;  // our wall time when it arrived
};

class WorkerDirectory : public QObject {
  Q_OBJECT
public:
  // Binds `listen` (port 0 picks a free one; a multicast host binds the port on every interface
  // and joins the group). Throws grpo::Error when the port cannot be bound.
  // `self_timed`: forget silent workers from a timer; off for owners that call poll() instead
  // (a timer cannot be stopped from another thread, e.g. when the owner is destroyed elsewhere).
  WorkerDirectory(std::string key, HostPort listen, double forget_after_s = 15.0, bool self_timed = true,
                  QObject* parent = nullptr);
  uint16_t port() const;
  // Reads queued datagrams and forgets silent workers now (for threads without an event loop).
  void poll();
  std::vector<KnownWorker> workers() const;  // ordered by URL
  int64_t rejected() const { return rejected_; }
  const std::string& last_rejection() const { return last_rejection_; }

Q_SIGNALS:
  void workerJoined(const QString& url, const QString& name);
  void workerLeft(const QString& url, const QString& name);

private:
  void read_pending();
  void expire();

  BeaconVerifier verifier_;
  double forget_after_s_;
  QUdpSocket socket_;
  QTimer expiry_;
  std::map<std::string, KnownWorker> by_url_;
  int64_t rejected_ = 0;
  std::string last_rejection_;
};

}  // namespace grpo::cluster
