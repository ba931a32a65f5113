// BeaconSender and WorkerDirectory: signed UDP beacons out, verified workers in.
#include "core/cluster/discovery.h"

#include <QAbstractEventDispatcher>
#include <QEventLoop>
#include <QHostAddress>
#include <QNetworkDatagram>
#include <QUrl>
#include <QVariant>

#include "core/common/error.h"
#include "core/common/log.h"
#include "core/common/timing.h"

namespace grpo::cluster {

HostPort parse_host_port(const std::string& text, const std::string& what) {
  HostPort hp;
  std::string port;
  if (!text.empty() && text[0] == '[') {
    const auto close = text.find(']');
    check(close != std::string::npos && close + 1 < text.size() && text[close + 1] == ':', what,
          "'" + text + "' is not [IPv6]:PORT", "e.g. [::1]:29517");
    hp.host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    check(colon != std::string::npos && colon > 0, what, "'" + text + "' is not HOST:PORT", "e.g. 239.255.77.42:29517");
    hp.host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  check(!port.empty() && port.find_first_not_of("0123456789") == std::string::npos && port.size() <= 5 &&
            std::stoi(port) <= 65535,
        what, "port '" + port + "' is not a number 0..65535");
  hp.port = static_cast<uint16_t>(std::stoi(port));
  check(!QHostAddress(QString::fromStdString(hp.host)).isNull(), what,
        "'" + hp.host + "' is not an IP address", "beacons go to an IP group or address, not a host name");
  return hp;
}

BeaconSender::BeaconSender(std::string key, HostPort target, std::function<Beacon()> make_beacon, double interval_s,
                           QObject* parent)
    : QObject(parent), key_(std::move(key)), target_(std::move(target)), make_beacon_(std::move(make_beacon)) {
  timer_.setInterval(static_cast<int>(interval_s * 1000));
  connect(&timer_, &QTimer::timeout, this, &BeaconSender::send_now);
  const QHostAddress addr(QString::fromStdString(target_.host));
  socket_.bind(addr.protocol() == QAbstractSocket::IPv6Protocol ? QHostAddress::AnyIPv6 : QHostAddress::AnyIPv4, 0);
  if (addr.isMulticast()) socket_.setSocketOption(QAbstractSocket::MulticastTtlOption, QVariant(1));  // stay on the LAN
}

void BeaconSender::start() {
  send_now();
  timer_.start();
}

void BeaconSender::stop() { timer_.stop(); }

void BeaconSender::send_now() {
  Beacon b = make_beacon_();
  b.time = wall_time_s();
  b.nonce.clear();
  const std::string bytes = sign_beacon(b, key_);
  const auto n = socket_.writeDatagram(bytes.data(), static_cast<qint64>(bytes.size()),
                                       QHostAddress(QString::fromStdString(target_.host)), target_.port);
  if (n < 0) log_warn("beacon to " + target_.host + ":" + std::to_string(target_.port) + ": " +
                      socket_.errorString().toStdString());
  else ++sent_;
}

WorkerDirectory::WorkerDirectory(std::string key, HostPort listen, double forget_after_s, bool self_timed,
                                 QObject* parent)
    : QObject(parent), verifier_(std::move(key)), forget_after_s_(forget_after_s) {
  // A thread that is not a QThread (an engine producer) has no event dispatcher until its first
  // QEventLoop; the socket's notifier needs one, so make it now.
  if (!QAbstractEventDispatcher::instance()) QEventLoop make_dispatcher;
  const QHostAddress addr(QString::fromStdString(listen.host));
  bool ok;
  if (addr.isMulticast()) {
    const bool v6 = addr.protocol() == QAbstractSocket::IPv6Protocol;
    ok = socket_.bind(v6 ? QHostAddress::AnyIPv6 : QHostAddress::AnyIPv4, listen.port,
                      QUdpSocket::ShareAddress | QUdpSocket::ReuseAddressHint);
    if (ok && !socket_.joinMulticastGroup(addr))
      log_warn("discovery: cannot join multicast group " + listen.host + ": " + socket_.errorString().toStdString());
  } else {
    ok = socket_.bind(addr, listen.port, QUdpSocket::ShareAddress | QUdpSocket::ReuseAddressHint);
  }
  check(ok, "discovery " + listen.host + ":" + std::to_string(listen.port),
        "cannot listen for beacons: " + socket_.errorString().toStdString(),
        "another program holds the port, or pick a different discovery_address");
  connect(&socket_, &QUdpSocket::readyRead, this, &WorkerDirectory::read_pending);
  expiry_.setInterval(static_cast<int>(std::max(0.05, forget_after_s_ / 4) * 1000));
  connect(&expiry_, &QTimer::timeout, this, &WorkerDirectory::expire);
  if (self_timed) expiry_.start();
}

uint16_t WorkerDirectory::port() const { return socket_.localPort(); }

void WorkerDirectory::poll() {
  read_pending();
  expire();
}

std::vector<KnownWorker> WorkerDirectory::workers() const {
  std::vector<KnownWorker> out;
  for (const auto& [url, w] : by_url_) out.push_back(w);
  return out;
}

void WorkerDirectory::read_pending() {
  while (socket_.hasPendingDatagrams()) {
    const QNetworkDatagram d = socket_.receiveDatagram(64 * 1024);
    const QByteArray data = d.data();
    Beacon b;
    std::string why;
    const double now = wall_time_s();
    if (!verifier_.verify(data.toStdString(), now, b, why)) {
      ++rejected_;
      last_rejection_ = why;
      log_debug("discovery: ignored a beacon from " + d.senderAddress().toString().toStdString() + ": " + why);
      continue;
    }
    // A worker listening on every interface announces 0.0.0.0 / ::; the datagram's source is
    // where it can be reached.
    QUrl url(QString::fromStdString(b.url));
    const QHostAddress host(url.host());
    if (!host.isNull() && (host == QHostAddress::AnyIPv4 || host == QHostAddress::AnyIPv6)) {
      QHostAddress from = d.senderAddress();
      bool v4 = false;
      const quint32 ip4 = from.toIPv4Address(&v4);
      if (v4) from = QHostAddress(ip4);
      url.setHost(from.toString());
      b.url = url.toString().toStdString();
    }
    const bool fresh = !by_url_.count(b.url);
    by_url_[b.url] = {b, now};
    if (fresh) Q_EMIT workerJoined(QString::fromStdString(b.url), QString::fromStdString(b.name));
  }
}

void WorkerDirectory::expire() {
  const double now = wall_time_s();
  for (auto it = by_url_.begin(); it != by_url_.end();) {
    if (now - it->second.last_seen > forget_after_s_) {
      const auto url = QString::fromStdString(it->first), name = QString::fromStdString(it->second.beacon.name);
      it = by_url_.erase(it);
      Q_EMIT workerLeft(url, name);
    } else {
      ++it;
    }
  }
}

}  // namespace grpo::cluster
