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
#include <QThreadPool>
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
  std::atomic<int64_t> requests{0}, rejected{0}, open{0}, evicted{0};
};

struct Reply::State {
  std::shared_ptr<ReplyLink> link;
  uint64_t connection = 0;
  uint64_t seq = 0;
  std::atomic<bool> sent{false};
};

// Named, not anonymous: ServerCore (named in http_server.h) holds these types, and GCC's
// -Wsubobject-linkage rightly objects to anonymous ones there once a unity build includes this file.
namespace http_server_impl {

constexpr int kLingerMs = 5000;                  // how long a rejected upload may keep streaming
constexpr uint64_t kMaxDiscardBytes = 256u << 20;  // ... and how much of it we read and drop
constexpr qint64 kSocketReadBuffer = 256 * 1024;   // TCP flow control beyond this while we are busy

using Clock = std::chrono::steady_clock;

struct Connection {
  uint64_t id = 0;
  std::string peer;  // the client's address: the key of its Peer
  QTcpSocket* socket = nullptr;
  QTimer* timer = nullptr;
  QTimer* auth_timer = nullptr;  // runs until a request shows the token
  bool authenticated = false;
  bool write_blocked = false;    // unsent replies above the bound: the next request waits
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

}  // namespace http_server_impl
using namespace http_server_impl;

class ServerCore : public QObject {
public:
  using Route = HttpRoute;

  ServerCore(HttpServerOptions options, std::vector<Route> routes, std::shared_ptr<ReplyLink> link,
             std::optional<QSslConfiguration> tls)
      : options_(std::move(options)), routes_(std::move(routes)), link_(std::move(link)), tls_(std::move(tls)) {
    options_.max_request_burst = std::max(1.0, options_.max_request_burst);  // room for one request at least
    options_.max_unauthenticated = std::max(1, options_.max_unauthenticated);
    pool_.setMaxThreadCount(std::max(1, options_.handler_threads));
    pool_.setObjectName("http-handlers");
  }

  // On the server thread.
  bool listen(std::string& error, uint16_t& port) {
    server_ = new Listener(this, tls_);
    server_->setMaxPendingConnections(options_.max_connections + 16);
    // The kernel's queue of connections not yet accepted: at Qt's default of 50, a burst of
    // strangers made the kernel drop a peer's SYN, which then waited a second to retry.
    server_->setListenBacklogSize(std::max(128, 2 * options_.max_connections));
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
    pool_.waitForDone();  // blocking handlers finish; their replies are dropped (no core)
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
    if (c.socket->bytesToWrite() > static_cast<qint64>(options_.max_unsent_bytes)) {
      // The client is not reading its replies: read nothing more from it until it does.
      c.write_blocked = true;
      c.timing_request = true;
      c.timer->start(options_.request_timeout_ms);
      return;
    }
    read_into(c);
    process(c);
  }

private:
  void accept_all() {
    // A few at a time: between rounds the event loop reads what accepted connections have sent,
    // so a peer's request is seen (and its token) before a burst of strangers could evict it.
    for (int round = 0; server_ && server_->hasPendingConnections(); ++round) {
      if (round == 8) {
        QMetaObject::invokeMethod(this, [this] { accept_all(); }, Qt::QueuedConnection);
        return;
      }
      QTcpSocket* s = server_->nextPendingConnection();
      const std::string peer = s->peerAddress().toString().toStdString();
      std::string refused;
      // A full table makes room by closing the oldest connection that has not shown the token
      // (of this client address when its own limit is reached); only peers holding the token are
      // refused for want of room.
      if (peers_.count(peer) && peers_[peer].connections >= options_.max_connections_per_peer && !evict_unauthenticated(&peer))
        refused = "too many open connections from " + peer + " (limit " +
                  std::to_string(options_.max_connections_per_peer) + " per client address)";
      else if ((static_cast<int>(connections_.size()) >= options_.max_connections ||
                unauthenticated_count() >= options_.max_unauthenticated) &&
               !evict_unauthenticated(nullptr))
        refused = "too many open connections (limit " + std::to_string(options_.max_connections) + ")";
      if (!refused.empty()) {
        ++link_->rejected;
        const HttpResponse r = HttpResponse::busy(refused);
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
      c.auth_timer = new QTimer(s);
      c.auth_timer->setSingleShot(true);
      QObject::connect(c.auth_timer, &QTimer::timeout, this, [this, id] { on_auth_timeout(id); });
      c.auth_timer->start(options_.unauthenticated_timeout_ms);
      QObject::connect(s, &QTcpSocket::readyRead, this, [this, id] { on_ready(id); });
      QObject::connect(s, &QIODevice::bytesWritten, this, [this, id](qint64) { on_written(id); });
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

  int unauthenticated_count() const {
    int n = 0;
    for (const auto& [id, c] : connections_) n += !c.authenticated;
    return n;
  }

  // Closes the oldest connection that has not shown the token (of `peer`, when given); false when
  // there is none. Connections already closing go first: they hold a slot for nothing. Before a
  // victim is chosen, strangers with bytes already waiting are read: a peer whose request (and
  // token) arrived, but whose readyRead the event loop has not delivered yet, is a stranger no
  // more (under load a burst of connections otherwise evicted it before its first read).
  bool evict_unauthenticated(const std::string* peer) {
    std::vector<uint64_t> waiting;
    for (const auto& [id, c] : connections_)
      if (!c.authenticated && c.phase == Connection::Phase::Head && !c.write_blocked &&
          !qobject_cast<QSslSocket*>(c.socket) && (!peer || c.peer == *peer))
        waiting.push_back(id);
    for (const uint64_t id : waiting) {
      auto it = connections_.find(id);
      // Non-blocking: reads what the kernel holds; its readyRead runs on_ready (which may close it).
      if (it != connections_.end()) it->second.socket->waitForReadyRead(0);
    }
    for (int pass = 0; pass < 2; ++pass)
      for (auto& [id, c] : connections_) {
        if (c.authenticated || (peer && c.peer != *peer)) continue;
        if (pass == 0 && c.phase != Connection::Phase::Closing) continue;
        ++link_->evicted;
        drop(id);
        return true;
      }
    return false;
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
    if (c.phase == Connection::Phase::Waiting || c.write_blocked) return;  // read later: TCP holds the rest
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

  // The client took some of its replies: below half the bound, read its next request.
  void on_written(uint64_t id) {
    auto it = connections_.find(id);
    if (it == connections_.end() || !it->second.write_blocked) return;
    Connection& c = it->second;
    if (c.socket->bytesToWrite() > static_cast<qint64>(options_.max_unsent_bytes / 2)) return;
    c.write_blocked = false;
    c.timer->stop();
    c.timing_request = false;
    read_into(c);
    process(c);
  }

  void on_auth_timeout(uint64_t id) {
    auto it = connections_.find(id);
    if (it == connections_.end() || it->second.authenticated) return;
    Connection& c = it->second;
    if (c.phase == Connection::Phase::Closing) return;  // its linger timer ends it
    if (c.phase == Connection::Phase::Waiting) {  // a public route's handler is running: one more round
      c.auth_timer->start(options_.unauthenticated_timeout_ms);
      return;
    }
    ++link_->rejected;
    drop(id);  // no answer: a stranger that sent nothing useful gets nothing
  }

  // Forgets the connection, then resets it (no answer, no linger).
  void drop(uint64_t id) {
    auto it = connections_.find(id);
    if (it == connections_.end()) return;
    QTcpSocket* s = it->second.socket;
    on_closed(id);  // disconnects our slots first, so abort() cannot re-enter them
    s->abort();
  }

  void on_closed(uint64_t id) {
    auto it = connections_.find(id);
    if (it == connections_.end()) return;
    QTcpSocket* s = it->second.socket;
    s->disconnect(this);
    it->second.timer->stop();
    it->second.auth_timer->stop();
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
        drop(id);
        return;
      case Connection::Phase::Waiting:
        return;
      case Connection::Phase::Head:
      case Connection::Phase::Body:
        if (c.write_blocked) {  // its replies were not read within the request timeout
          ++link_->rejected;
          drop(id);
          return;
        }
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
        if (auth && bearer_matches(*auth, options_.bearer_token)) {
          if (!c.authenticated) {
            c.authenticated = true;
            c.auth_timer->stop();
          }
        } else if (auth || !is_public(c.req)) {
          return reject(c, 401, auth ? "invalid bearer token" : "missing \"Authorization: Bearer <token>\" header",
                        length, {{"WWW-Authenticate", "Bearer"}});
        }
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

  static bool path_matches(const Route& r, const std::string& path) {
    const bool prefix = !r.path.empty() && r.path.back() == '*';  // "/a/*" matches "/a/..."
    return prefix ? path.compare(0, r.path.size() - 1, r.path, 0, r.path.size() - 1) == 0 : r.path == path;
  }

  // A request without a token may reach only a public route (GET or HEAD of a static page).
  bool is_public(const HttpRequest& req) const {
    for (const auto& r : routes_)
      if (r.options.public_route && r.method == req.method && path_matches(r, req.path)) return true;
    return false;
  }

  void dispatch(Connection& c) {
    const Route* found = nullptr;
    std::string allow;
    for (const auto& r : routes_) {
      if (!path_matches(r, c.req.path)) continue;
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
    c.req.peer = c.peer;
    if (!found->options.blocking) return run_handler(*found, c.req, reply);
    if (queued_handlers_.load() >= options_.max_queued_handlers + pool_.maxThreadCount()) {
      ++link_->rejected;
      return reply.send(HttpResponse::busy("the server is busy (" + std::to_string(options_.max_queued_handlers) +
                                           " requests waiting); retry later"));
    }
    ++queued_handlers_;
    pool_.start([this, route = found, req = c.req, reply] {
      run_handler(*route, req, reply);
      --queued_handlers_;
    });
  }

  static void run_handler(const Route& route, const HttpRequest& req, const Reply& reply) {
    try {
      route.handler(req, reply);
    } catch (const HttpError& e) {
      reply.send(e.response());
    } catch (const std::exception& e) {
      log_warn(req.method + " " + req.path + ": " + e.what());
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
  QThreadPool pool_;  // runs `blocking` routes; routes_ outlives it (waitForDone in shutdown)
  std::atomic<int> queued_handlers_{0};
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

void HttpServer::route(const std::string& method, const std::string& path, HttpHandler handler, RouteOptions options) {
  check(thread_ == nullptr, "http server", "routes must be added before start()");
  check(!options.public_route || method == "GET" || method == "HEAD", "http server",
        "public route " + method + " " + path + ": only GET and HEAD may be served without the token");
  routes_.push_back({method, path, std::move(handler), options});
}

void HttpServer::start() {
  check(thread_ == nullptr, "http server", "already started");
  link_ = std::make_shared<ReplyLink>();
  std::optional<QSslConfiguration> tls;  // bad files: an error naming them, before anything starts
  if (!options_.tls_cert_file.empty() || !options_.tls_key_file.empty())
    tls = server_tls_configuration(options_.tls_cert_file, options_.tls_key_file);
  // Every endpoint requires the cluster token; an empty one must not quietly mean "no auth"
  // (issue 18).
  check(!options_.bearer_token.empty(), "http server", "no bearer token given",
        "every endpoint requires the cluster token (Authorization: Bearer)");
  core_ = new ServerCore(options_, routes_, link_, std::move(tls));
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
    s.evicted = link_->evicted;
  }
  return s;
}

}  // namespace grpo::cluster
