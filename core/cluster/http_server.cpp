#include "core/cluster/http_server.h"

#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>

#include <QHostAddress>
#include <QObject>
#include <QSslConfiguration>
#include <QSslSocket>
#include <QTcpServer>
#include <QTcpSocket>
#include <QThread>
#include <QTimer>

#include "core/cluster/cluster_token.h"
#include "core/cluster/tls.h"
#include "core/common/error.h"
#include "core/common/log.h"

namespace grpo::cluster {

// Shared between the server and every outstanding Reply: the core while it is serving, null after.
struct ReplyLink {
  std::mutex mu;
  ServerCore* core = nullptr;
  std::atomic<int64_t> requests{0}, rejected{0}, open{0};
};

struct Reply::State {
  std::shared_ptr<ReplyLink> link;
  uint64_t connection = 0;
  uint64_t seq = 0;
  std::atomic<bool> sent{false};
};

namespace {

constexpr int kLingerMs = 5000;                  // how long a rejected upload may keep streaming
constexpr uint64_t kMaxDiscardBytes = 256u << 20;  // ... and how much of it we read and drop
constexpr qint64 kSocketReadBuffer = 256 * 1024;   // TCP flow control beyond this while we are busy

using Clock = std::chrono::steady_clock;

struct Connection {
  uint64_t id = 0;
  std::string peer;  // the client's address: the key of its Peer
  QTcpSocket* socket = nullptr;
  QTimer* timer = nullptr;
  std::string buf;
  enum class Phase { Head, Body, Waiting, Closing } phase = Phase::Head;
  bool timing_request = false;  // the timer measures a request in progress (else: idle)
  HttpRequest req;
  size_t head_bytes = 0;
  bool continue_sent = false;
  uint64_t seq = 0;
  uint64_t discard_left = 0;  // Closing: body bytes still to read and drop before closing
};

// One client address: its open connections and its request token bucket.
struct Peer {
  int connections = 0;
  double tokens = 0;
  Clock::time_point refilled;
};

// Accepts plain TCP, or with a TLS configuration wraps every connection in a QSslSocket whose
// server handshake starts at once (the connection's request timer bounds it).
class Listener : public QTcpServer {
public:
  Listener(QObject* parent, std::optional<QSslConfiguration> tls) : QTcpServer(parent), tls_(std::move(tls)) {}

protected:
  void incomingConnection(qintptr fd) override {
    if (!tls_) return QTcpServer::incomingConnection(fd);
    auto* s = new QSslSocket(this);
    if (!s->setSocketDescriptor(fd)) {
      delete s;
      return;
    }
    s->setSslConfiguration(*tls_);
    s->startServerEncryption();
    addPendingConnection(s);
  }

private:
  std::optional<QSslConfiguration> tls_;
};

std::string retry_after(double seconds) { return std::to_string(std::max<int64_t>(1, std::llround(std::ceil(seconds)))); }

}  // namespace

class ServerCore : public QObject {
public:
  struct Route {
    std::string method, path;
    HttpHandler handler;
  };

  ServerCore(HttpServerOptions options, std::vector<Route> routes, std::shared_ptr<ReplyLink> link,
             std::optional<QSslConfiguration> tls)
      : options_(std::move(options)), routes_(std::move(routes)), link_(std::move(link)), tls_(std::move(tls)) {
    options_.max_request_burst = std::max(1.0, options_.max_request_burst);  // room for one request at least
  }

  // On the server thread.
  bool listen(std::string& error, uint16_t& port) {
    server_ = new Listener(this, tls_);
    server_->setMaxPendingConnections(options_.max_connections + 16);
    QHostAddress address;
    const QString host = QString::fromStdString(options_.host);
    if (host == "localhost") address = QHostAddress(QHostAddress::LocalHost);
    else if (host == "*" || host.isEmpty()) address = QHostAddress(QHostAddress::Any);
    else if (!address.setAddress(host)) {
      error = "not an IP address: " + options_.host;
      return false;
    }
    if (!server_->listen(address, options_.port)) {
      error = server_->errorString().toStdString();
      return false;
    }
    port = server_->serverPort();
    QObject::connect(server_, &QTcpServer::newConnection, this, [this] { accept_all(); });
    return true;
  }

  // On the server thread: closes everything. Pending replies are dropped by deliver().
  void shutdown() {
    if (server_) server_->close();
    for (auto& [id, c] : connections_) {
      c.socket->disconnect(this);
      c.socket->flush();  // answers already written (e.g. "shutting down") go out if they can
      c.socket->abort();
      delete c.socket;  // also deletes its timer (a child)
    }
    connections_.clear();
    peers_.clear();
    link_->open = 0;
    delete server_;
    server_ = nullptr;
  }

  void deliver(uint64_t id, uint64_t seq, HttpResponse response) {
    auto it = connections_.find(id);
    if (it == connections_.end()) return;  // the client went away
    Connection& c = it->second;
    if (c.phase != Connection::Phase::Waiting || c.seq != seq) return;
    const bool close = !c.req.keep_alive();
    c.socket->write(QByteArray::fromStdString(serialize_response(response, close, options_.server_name)));
    if (close) {
      c.phase = Connection::Phase::Closing;
      c.socket->disconnectFromHost();
      return;
    }
    c.phase = Connection::Phase::Head;
    c.req = {};
    c.continue_sent = false;
    read_into(c);
    process(c);
  }

private:
  void accept_all() {
    while (server_->hasPendingConnections()) {
      QTcpSocket* s = server_->nextPendingConnection();
      const std::string peer = s->peerAddress().toString().toStdString();
      std::string refused;
      if (static_cast<int>(connections_.size()) >= options_.max_connections)
        refused = "too many open connections (limit " + std::to_string(options_.max_connections) + ")";
      else if (peers_.count(peer) && peers_[peer].connections >= options_.max_connections_per_peer)
        refused = "too many open connections from " + peer + " (limit " +
                  std::to_string(options_.max_connections_per_peer) + " per client address)";
      if (!refused.empty()) {
        ++link_->rejected;
        HttpResponse r = HttpResponse::error(503, refused);
        r.headers.emplace_back("Retry-After", "1");
        s->setParent(this);  // deleted with the server if the client never reads
        s->write(QByteArray::fromStdString(serialize_response(r, true, options_.server_name)));
        QObject::connect(s, &QTcpSocket::disconnected, s, &QObject::deleteLater);
        QTimer::singleShot(kLingerMs, s, [s] { s->abort(); });
        s->disconnectFromHost();
        continue;
      }
      Peer& p = peer_entry(peer);
      ++p.connections;
      const uint64_t id = ++next_id_;
      Connection& c = connections_[id];
      c.id = id;
      c.peer = peer;
      c.socket = s;
      s->setParent(this);
      s->setReadBufferSize(kSocketReadBuffer);
      c.timer = new QTimer(s);
      c.timer->setSingleShot(true);
      QObject::connect(s, &QTcpSocket::readyRead, this, [this, id] { on_ready(id); });
      QObject::connect(s, &QTcpSocket::disconnected, this, [this, id] { on_closed(id); });
      QObject::connect(s, &QAbstractSocket::errorOccurred, this, [this, id](QAbstractSocket::SocketError e) {
        auto it = connections_.find(id);
        if (it == connections_.end()) return;
        QTcpSocket* sock = it->second.socket;
        const bool tls_failed = e == QAbstractSocket::SslHandshakeFailedError || e == QAbstractSocket::SslInternalError ||
                                e == QAbstractSocket::SslInvalidUserDataError;
        if (tls_failed)  // e.g. plain HTTP sent to this HTTPS port
          log_warn("TLS with " + it->second.peer + " failed: " + sock->errorString().toStdString());
        if (!tls_failed && sock->state() != QAbstractSocket::UnconnectedState) return;
        on_closed(id);
        sock->abort();
      });
      QObject::connect(c.timer, &QTimer::timeout, this, [this, id] { on_timeout(id); });
      link_->open = static_cast<int64_t>(connections_.size());
      if (auto* tls = qobject_cast<QSslSocket*>(s)) {
        // The handshake must finish within the request timeout; then the idle timeout applies.
        c.timer->start(std::min(options_.idle_timeout_ms, options_.request_timeout_ms));
        QObject::connect(tls, &QSslSocket::encrypted, this, [this, id] {
          auto it = connections_.find(id);
          if (it != connections_.end() && it->second.phase == Connection::Phase::Head && it->second.buf.empty())
            arm_idle(it->second);
        });
        continue;
      }
      if (s->bytesAvailable() > 0) on_ready(id);
      else arm_idle(c);
    }
  }

  Peer& peer_entry(const std::string& address) {
    const auto now = Clock::now();
    if (peers_.size() > 4096)  // forget addresses without connections whose bucket is full again
      for (auto it = peers_.begin(); it != peers_.end();) {
        refill(it->second, now);
        if (it->second.connections == 0 && it->second.tokens >= options_.max_request_burst) it = peers_.erase(it);
        else ++it;
      }
    auto [it, added] = peers_.try_emplace(address);
    if (added) {
      it->second.tokens = options_.max_request_burst;
      it->second.refilled = now;
    }
    return it->second;
  }

  void refill(Peer& p, Clock::time_point now) const {
    const double dt = std::chrono::duration<double>(now - p.refilled).count();
    p.tokens = std::min(options_.max_request_burst, p.tokens + dt * options_.max_requests_per_s);
    p.refilled = now;
  }

  // Takes one request from the peer's bucket; false (and the seconds until one is back) when empty.
  bool take_request(const std::string& peer, double& wait_s) {
    if (options_.max_requests_per_s <= 0) return true;
    Peer& p = peer_entry(peer);
    refill(p, Clock::now());
    if (p.tokens >= 1) {
      p.tokens -= 1;
      return true;
    }
    wait_s = (1 - p.tokens) / options_.max_requests_per_s;
    return false;
  }

  void arm_idle(Connection& c) {
    c.timing_request = false;
    c.timer->start(options_.idle_timeout_ms);
  }

  void read_into(Connection& c) {
    const QByteArray data = c.socket->readAll();
    c.buf.append(data.constData(), static_cast<size_t>(data.size()));
  }

  void on_ready(uint64_t id) {
    auto it = connections_.find(id);
    if (it == connections_.end()) return;
    Connection& c = it->second;
    if (c.phase == Connection::Phase::Waiting) return;  // read later: TCP holds the rest
    if (c.phase == Connection::Phase::Closing) {
      const QByteArray junk = c.socket->readAll();
      const uint64_t n = static_cast<uint64_t>(junk.size());
      c.discard_left = n >= c.discard_left ? 0 : c.discard_left - n;
      if (c.discard_left == 0) c.socket->disconnectFromHost();
      return;
    }
    read_into(c);
    process(c);
  }

  void on_closed(uint64_t id) {
    auto it = connections_.find(id);
    if (it == connections_.end()) return;
    QTcpSocket* s = it->second.socket;
    s->disconnect(this);
    it->second.timer->stop();
    s->deleteLater();
    auto p = peers_.find(it->second.peer);
    if (p != peers_.end()) --p->second.connections;
    connections_.erase(it);
    link_->open = static_cast<int64_t>(connections_.size());
  }

  void on_timeout(uint64_t id) {
    auto it = connections_.find(id);
    if (it == connections_.end()) return;
    Connection& c = it->second;
    switch (c.phase) {
      case Connection::Phase::Closing:
        c.socket->abort();
        on_closed(id);
        return;
      case Connection::Phase::Waiting:
        return;
      case Connection::Phase::Head:
      case Connection::Phase::Body:
        if (!c.timing_request && c.buf.empty()) {
          c.phase = Connection::Phase::Closing;  // idle keep-alive connection
          c.timer->start(kLingerMs);
          c.socket->disconnectFromHost();  // may emit disconnected (and erase `c`) right here
          return;
        }
        reject(c, 408, "request not received completely within " + std::to_string(options_.request_timeout_ms) + " ms");
        return;
    }
  }

  // Answers with an error and closes the connection (after reading and dropping up to
  // `discard` body bytes the client may still be sending, so it sees the answer).
  void reject(Connection& c, int status, const std::string& message, uint64_t discard = 0,
              std::vector<std::pair<std::string, std::string>> headers = {}) {
    ++link_->rejected;
    HttpResponse r = HttpResponse::error(status, message);
    r.headers = std::move(headers);
    c.socket->write(QByteArray::fromStdString(serialize_response(r, true, options_.server_name)));
    c.phase = Connection::Phase::Closing;
    const uint64_t buffered = c.buf.size() > c.head_bytes ? c.buf.size() - c.head_bytes : 0;
    discard = std::min(discard, kMaxDiscardBytes);
    c.discard_left = discard > buffered ? discard - buffered : 0;
    c.buf.clear();
    c.timer->start(kLingerMs);
    if (c.discard_left == 0) c.socket->disconnectFromHost();
  }

  void process(Connection& c) {
    for (;;) {
      if (c.phase == Connection::Phase::Head) {
        if (c.buf.empty()) {
          arm_idle(c);
          return;
        }
        if (!c.timing_request) {
          c.timing_request = true;
          c.timer->start(options_.request_timeout_ms);
        }
        c.head_bytes = 0;
        if (!tls_ && c.buf[0] == '\x16')  // a TLS handshake record: an https:// client
          return reject(c, 400, "this port speaks plain HTTP, not TLS: use an http:// URL");
        const HeadParse h = parse_request_head(c.buf, options_.limits, c.req);
        if (h.status == HeadParse::Status::Incomplete) return;
        if (h.status == HeadParse::Status::Error) return reject(c, h.error_status, h.error_message);
        c.head_bytes = h.head_bytes;
        const uint64_t length = c.req.content_length.value_or(0);
        double wait_s = 0;
        if (!take_request(c.peer, wait_s))
          return reject(c, 429,
                        "too many requests from " + c.peer + " (limit " + std::to_string(options_.max_requests_per_s) +
                            " per second); retry later",
                        length, {{"Retry-After", retry_after(wait_s)}});
        const auto auth = c.req.header("Authorization");  // start() refused an empty token
        if (!auth || !bearer_matches(*auth, options_.bearer_token))
          return reject(c, 401, auth ? "invalid bearer token" : "missing \"Authorization: Bearer <token>\" header",
                        length, {{"WWW-Authenticate", "Bearer"}});
        if (c.req.chunked)
          return reject(c, 501, "chunked request bodies (Transfer-Encoding) are not supported; send Content-Length");
        if (length > options_.limits.max_body_bytes)
          return reject(c, 413,
                        "request body of " + std::to_string(length) + " bytes is larger than the limit of " +
                            std::to_string(options_.limits.max_body_bytes) + " bytes",
                        length);
        c.phase = Connection::Phase::Body;
      }
      if (c.phase == Connection::Phase::Body) {
        const uint64_t length = c.req.content_length.value_or(0);
        if (c.buf.size() < c.head_bytes + length) {
          if (c.req.expects_continue() && !c.continue_sent) {
            c.continue_sent = true;
            c.socket->write("HTTP/1.1 100 Continue\r\n\r\n");
          }
          return;
        }
        c.req.body = c.buf.substr(c.head_bytes, length);
        c.buf.erase(0, c.head_bytes + length);
        c.head_bytes = 0;
        c.timer->stop();
        c.timing_request = false;
        dispatch(c);
        if (c.phase != Connection::Phase::Head) return;  // waiting for the handler, or closing
      }
      if (c.phase != Connection::Phase::Head) return;
    }
  }

  void dispatch(Connection& c) {
    const Route* found = nullptr;
    std::string allow;
    for (const auto& r : routes_) {
      const bool prefix = !r.path.empty() && r.path.back() == '*';  // "/a/*" matches "/a/..."
      if (prefix ? c.req.path.compare(0, r.path.size() - 1, r.path, 0, r.path.size() - 1) != 0 : r.path != c.req.path) continue;
      if (r.method == c.req.method) found = &r;
      allow += (allow.empty() ? "" : ", ") + r.method;
    }
    c.phase = Connection::Phase::Waiting;
    ++c.seq;
    Reply reply;
    reply.state_ = std::make_shared<Reply::State>();
    reply.state_->link = link_;
    reply.state_->connection = c.id;
    reply.state_->seq = c.seq;
    if (!found) {
      HttpResponse r = allow.empty() ? HttpResponse::error(404, "no route " + c.req.method + " " + c.req.path)
                                     : HttpResponse::error(405, "method " + c.req.method + " not allowed on " + c.req.path);
      if (!allow.empty()) r.headers.emplace_back("Allow", allow);
      reply.send(std::move(r));
      return;
    }
    ++link_->requests;
    try {
      found->handler(c.req, reply);
    } catch (const HttpError& e) {
      reply.send(e.response());
    } catch (const std::exception& e) {
      log_warn(c.req.method + " " + c.req.path + ": " + e.what());
      reply.send(HttpResponse::error(500, e.what()));
    }
  }

  HttpServerOptions options_;
  std::vector<Route> routes_;
  std::shared_ptr<ReplyLink> link_;
  std::optional<QSslConfiguration> tls_;
  QTcpServer* server_ = nullptr;
  std::map<uint64_t, Connection> connections_;
  std::map<std::string, Peer> peers_;
  uint64_t next_id_ = 0;
};

void Reply::send(HttpResponse response) const {
  if (!state_ || state_->sent.exchange(true)) return;
  std::lock_guard<std::mutex> lock(state_->link->mu);
  ServerCore* core = state_->link->core;
  if (!core) return;
  const uint64_t id = state_->connection, seq = state_->seq;
  QMetaObject::invokeMethod(
      core, [core, id, seq, r = std::move(response)]() mutable { core->deliver(id, seq, std::move(r)); },
      Qt::QueuedConnection);
}

bool Reply::sent() const { return state_ && state_->sent.load(); }

HttpServer::HttpServer(HttpServerOptions options) : options_(std::move(options)) {}

HttpServer::~HttpServer() { stop(); }

void HttpServer::route(const std::string& method, const std::string& path, HttpHandler handler) {
  check(thread_ == nullptr, "http server", "routes must be added before start()");
  routes_.push_back({method, path, std::move(handler)});
}

void HttpServer::start() {
  check(thread_ == nullptr, "http server", "already started");
  link_ = std::make_shared<ReplyLink>();
  std::vector<ServerCore::Route> routes;
  for (const auto& r : routes_) routes.push_back({r.method, r.path, r.handler});
  std::optional<QSslConfiguration> tls;  // bad files: an error naming them, before anything starts
  if (!options_.tls_cert_file.empty() || !options_.tls_key_file.empty())
    tls = server_tls_configuration(options_.tls_cert_file, options_.tls_key_file);
  // Every endpoint requires the cluster token; an empty one must not quietly mean "no auth"
  // (issue 18).
  check(!options_.bearer_token.empty(), "http server", "no bearer token given",
        "every endpoint requires the cluster token (Authorization: Bearer)");
  core_ = new ServerCore(options_, std::move(routes), link_, std::move(tls));
  thread_ = new QThread();
  thread_->setObjectName("http-server");
  core_->moveToThread(thread_);
  thread_->start();
  bool ok = false;
  std::string error;
  uint16_t port = 0;
  QMetaObject::invokeMethod(core_, [&] { ok = core_->listen(error, port); }, Qt::BlockingQueuedConnection);
  if (!ok) {
    stop();
    throw Error(options_.host + ":" + std::to_string(options_.port), "cannot listen: " + error,
                "is the port in use, or the address not one of this machine's?");
  }
  port_ = port;
  std::lock_guard<std::mutex> lock(link_->mu);
  link_->core = core_;
}

void HttpServer::stop() {
  if (!thread_) return;
  {
    std::lock_guard<std::mutex> lock(link_->mu);
    link_->core = nullptr;
  }
  if (thread_->isRunning()) {
    QMetaObject::invokeMethod(core_, [this] { core_->shutdown(); }, Qt::BlockingQueuedConnection);
    thread_->quit();
    thread_->wait();
  }
  delete core_;
  core_ = nullptr;
  delete thread_;
  thread_ = nullptr;
}

std::string HttpServer::url() const {
  const bool v6 = options_.host.find(':') != std::string::npos;
  const std::string scheme = options_.tls_cert_file.empty() ? "http://" : "https://";
  return scheme + (v6 ? "[" + options_.host + "]" : options_.host) + ":" + std::to_string(port_);
}

HttpServerStats HttpServer::stats() const {
  HttpServerStats s;
  if (link_) {
    s.requests = link_->requests;
    s.rejected = link_->rejected;
    s.connections_open = link_->open;
  }
  return s;
}

}  // namespace grpo::cluster
