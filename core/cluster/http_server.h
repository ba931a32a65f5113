// HttpServer: a small HTTP/1.1 server on QTcpServer, running on its own QThread and event loop.
// Keep-alive and pipelined requests (answered in order), Content-Length bodies only (chunked
// uploads get 501), limits on header size (431), body size (413), open connections in all and
// per client address (503 with Retry-After), requests per second per client address (a token
// bucket: 429 with Retry-After), a slow-client timeout from a request's first byte to its last
// (408; a TLS handshake must finish within it too), an idle keep-alive timeout, bearer-token auth
// on every route (401), optional TLS (PEM certificate and key: HTTPS only on that port; tls.h),
// and a route table of (method, path) -> handler.
//
// Admission control (issue 18): a connection is "unauthenticated" until one of its requests
// carries the token. At most `max_unauthenticated` of them are open at once, each must present
// the token within `unauthenticated_timeout_ms` of being accepted (TLS handshake included), and
// when the table is full a new connection evicts the oldest unauthenticated one instead of being
// refused, so idle or slow strangers can never take the slots of peers holding the token. Replies
// a client does not read stop the server from reading that connection's next request once more
// than `max_unsent_bytes` wait to be sent (output back-pressure; closed after the request timeout).
//
// Handlers run on the server thread and must not block it. A route marked `blocking` (file reads,
// parsing and tokenizing large bodies) runs on the server's own pool of `handler_threads`, at most
// `max_queued_handlers` waiting (more: 503 with Retry-After). Any handler may also hand its Reply to
// another thread and call Reply::send() from there when done (thread-safe, once).
// Errors thrown by a handler become JSON error responses (HttpError: its status; anything else:
// 500), in vLLM's shape (http_message.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/cluster/http_message.h"

class QThread;

namespace grpo::cluster {

struct HttpServerOptions {
  std::string host = "127.0.0.1";  // "0.0.0.0", "::", "127.0.0.1", "::1", or an interface address
  uint16_t port = 0;               // 0: any free port (see HttpServer::port())
  std::string bearer_token;        // every request needs "Authorization: Bearer <token>"; required
  HttpLimits limits;
  int max_connections = 256;       // open at once; more -> 503 (Retry-After) and close
  int max_connections_per_peer = 64;   // from one client address (a trainer's router opens <= 30)
  double max_requests_per_s = 2000;    // per client address, sustained; 0 = no limit
  double max_request_burst = 4000;     // per client address, at once; beyond the rate -> 429
  int request_timeout_ms = 30000;  // first byte of a request to its last; slower -> 408 and close
  int idle_timeout_ms = 120000;    // a kept-alive connection without a request is closed
  int max_unauthenticated = 64;    // open connections that have not yet shown the token
  int unauthenticated_timeout_ms = 5000;  // accept to the first authenticated request head
  size_t max_unsent_bytes = 8u << 20;     // replies queued for one client; above: stop reading it
  int handler_threads = 2;         // the pool that runs `blocking` routes
  int max_queued_handlers = 64;    // blocking requests waiting for the pool; more -> 503
  std::string server_name = "grpo-worker";
  std::string tls_cert_file, tls_key_file;  // both set: HTTPS (PEM files); url() says https://
};

class ServerCore;
struct ReplyLink;

// The way back to one request's connection. Copyable; the first send() wins, later ones are
// ignored. Safe to call from any thread, also after the client went away or the server stopped.
class Reply {
public:
  Reply() = default;
  void send(HttpResponse response) const;
  bool sent() const;

private:
  friend class ServerCore;
  struct State;
  std::shared_ptr<State> state_;
};

using HttpHandler = std::function<void(const HttpRequest&, Reply)>;

struct RouteOptions {
  bool public_route = false;  // served without the token (static pages only: no data, no control)
  bool blocking = false;      // runs on the server's handler pool, not on the network thread
};

// One entry of the route table (HttpServer::route); the server thread gets a copy at start().
struct HttpRoute {
  std::string method, path;
  HttpHandler handler;
  RouteOptions options;
};

struct HttpServerStats {
  int64_t requests = 0;          // requests dispatched to a handler
  int64_t rejected = 0;          // answered by the server itself with an error (4xx/5xx)
  int64_t connections_open = 0;
  int64_t evicted = 0;           // unauthenticated connections closed to admit a newer one
};

class HttpServer {
public:
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Routes are fixed before start(). A path registered for another method answers 405. A path
  // ending in '*' matches every request path that starts with what precedes the '*'.
  void route(const std::string& method, const std::string& path, HttpHandler handler, RouteOptions options = {});

  // Binds and starts serving; throws grpo::Error naming the address when it cannot listen.
  void start();
  // Closes the listener and every connection and joins the thread. Replies sent later are dropped.
  void stop();

  uint16_t port() const { return port_; }  // the bound port (after start)
  const std::string& host() const { return options_.host; }
  std::string url() const;                  // "http://127.0.0.1:8000" ("[::1]" for IPv6; https:// with TLS)
  HttpServerStats stats() const;

private:
  HttpServerOptions options_;
  std::vector<HttpRoute> routes_;
  QThread* thread_ = nullptr;
  ServerCore* core_ = nullptr;
  std::shared_ptr<ReplyLink> link_;
  uint16_t port_ = 0;
};

}  // namespace grpo::cluster
