// A loopback stand-in of the Hugging Face Hub's file API, for the download tests: a real HTTP/1.1
// server (QTcpServer on its own thread, 127.0.0.1 only, one request per connection) answering as
// huggingface.co does:
//   GET  /api/{models|datasets}/{repo}/revision/{rev}  -> {"sha": commit, "siblings": [{"rfilename"}]}
//   HEAD /[datasets/]{repo}/resolve/{rev}/{path}        -> regular file: 200, ETag = git-sha1;
//        LFS file: 302 to /cdn/<sha256> with X-Linked-Etag, X-Linked-Size; X-Repo-Commit always
//   GET  the same                                       -> the bytes (regular) or the 302 (LFS)
//   GET  /cdn/<sha256>                                  -> the bytes, Range: bytes=N- -> 206
// with the Hub's errors (401, 403 + X-Error-Code GatedRepo, 404 + RepoNotFound / EntryNotFound)
// and faults on demand: a transfer cut mid-file, a file whose bytes do not match its ETag.
//
// The upload side (what `grpo push` talks to), following huggingface_hub's client and the Hub's
// API; each route checks what it receives and records a violation (answered 400) otherwise:
//   POST /api/repos/create                         {name, organization, private, type?} -> 200, or 409
//        when any kind of repo holds the name; a new repo starts with a .gitattributes commit
//   GET  /api/{models|datasets|spaces}/{org}/{name} -> {id, sha, private} or 404 RepoNotFound
//   POST /api/{kind}/{repo}/branch/{rev}           -> 200, 409 when it exists
//   POST /api/{kind}/{repo}/preupload/{rev}        -> uploadMode lfs (*.safetensors, *.bin, or from a
//        size threshold; never for an empty file) or regular, and the oid of the file already there
//   POST /[datasets/]{repo}.git/info/lfs/objects/batch -> no actions for a stored object; basic
//        (PUT /s3/basic/<oid>) up to the chunk size, else multipart (chunk_size and part URLs
//        PUT /s3/part/<id>/<n>, completion POST /s3/complete/<id>); a verify action always
//   POST /{repo}.git/info/lfs/objects/verify       -> the uploaded object enters the repo's store
//   POST /api/{kind}/{repo}/commit/{rev}           NDJSON; every lfsFile must be in the store;
//        ?create_pr=1 writes refs/pr/N instead of the branch
// Faults on demand per route: N answers with a status, a 200 with a given body, a connection cut
// after N body bytes, requests held unanswered until the test releases them, an LFS batch answer
// naming the wrong oid. Pushed repos are served by the
// download routes above.
#pragma once

#include <QCryptographicHash>
#include <QHostAddress>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QPointer>
#include <QTcpServer>
#include <QTcpSocket>
#include <QThread>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace hub_test {

// n bytes from a linear congruential generator: file contents that do not compress, the same
// every run.
inline QByteArray pseudo_random(qint64 n, uint32_t seed) {
  QByteArray b(n, '\0');
  for (qint64 i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    b[i] = static_cast<char>(seed >> 24);
  }
  return b;
}

struct RepoFile {
  QByteArray path, content;
  bool lfs = false;
  QByteArray etag_override = {};  // served instead of the real digest (a corrupt file)
  QByteArray etag() const {
    if (!etag_override.isEmpty()) return etag_override;
    if (lfs) return QCryptographicHash::hash(content, QCryptographicHash::Sha256).toHex();
    QCryptographicHash h(QCryptographicHash::Sha1);
    h.addData(QByteArray("blob ") + QByteArray::number(content.size()) + QByteArray(1, '\0'));
    h.addData(content);
    return h.result().toHex();
  }
};

struct Repo {
  QByteArray commit;
  std::vector<RepoFile> files;
  std::vector<QByteArray> extra_siblings;  // listed but absent (hostile names, missing files)
  QByteArray token;                        // non-empty: requests need "Bearer <token>", else 401
  bool gated = false;                      // file requests answer 403 GatedRepo
  bool echo_auth = false;                  // a 401 quotes the Authorization header it got (a careless server)
};

struct Request {
  QByteArray method, path, range, auth;
  QByteArray raw = {}, query = {}, accept = {};  // the target as sent (before '?'), its query, Accept
  QByteArray route = {};         // upload routes: "create", "info", "branch", "preupload", "batch", "put", "part",
                                 // "complete", "verify", "commit"; "" for the download routes
  QByteArray content_type = {};
  qint64 body_size = 0;
  bool cut = false;              // the stand-in hung up on it (a fault)
};

// One commit the stand-in accepted, as it parsed the NDJSON body.
struct CommitRecord {
  QByteArray key, revision, summary, description, commit;
  bool create_pr = false;
  std::vector<QByteArray> regular_paths, lfs_paths;
};

// What the upload side of the stand-in saw; `violations` lists every request that broke the
// Hub's API as huggingface_hub speaks it (a test expects it empty).
struct UploadStats {
  int created = 0, commits = 0, basic_puts = 0, parts = 0, completions = 0, verifies = 0, cuts = 0, unauthorized = 0;
  int preuploads = 0, batches = 0;
  qint64 put_bytes = 0;                // LFS bytes received by the storage routes (basic and parts)
  int storage_requests = 0, storage_with_auth = 0;  // storage routes, and those carrying Authorization
  std::vector<qint64> part_sizes;      // each part's body size, in arrival order
  std::vector<QByteArray> violations;
  std::vector<CommitRecord> commit_log;
};

class HubStandIn {
public:
  HubStandIn() {
    thread_.start();
    ctx_->moveToThread(&thread_);
    QMetaObject::invokeMethod(ctx_, [this] {
      server_ = listening_server(QHostAddress::LocalHost);
      port_ = server_->serverPort();
    }, Qt::BlockingQueuedConnection);
  }
  ~HubStandIn() {
    QMetaObject::invokeMethod(ctx_, [this] {
      delete server_;
      server_ = nullptr;
      delete storage_server_;
      storage_server_ = nullptr;
    }, Qt::BlockingQueuedConnection);
    thread_.quit();
    thread_.wait(10000);
    delete ctx_;
  }
  HubStandIn(const HubStandIn&) = delete;
  HubStandIn& operator=(const HubStandIn&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void add(const std::string& kind_repo, Repo r) {  // "models/org/name", "datasets/org/data"
    std::lock_guard<std::mutex> g(mu_);
    repos_[QByteArray::fromStdString(kind_repo)] = std::move(r);
  }
  // LFS storage URLs (basic, parts, completion) on another host than the Hub: the same server
  // listening on ::1 as well, as a real Hub hands out its storage's own URLs. False when ::1 cannot
  // be listened on here.
  bool storage_on_other_host() {
    bool ok = false;
    QMetaObject::invokeMethod(ctx_, [this, &ok] {
      storage_server_ = listening_server(QHostAddress::LocalHostIPv6);
      ok = storage_server_->isListening();
      if (!ok) return;
      std::lock_guard<std::mutex> g(mu_);
      storage_base_ = "http://[::1]:" + QString::number(storage_server_->serverPort());
    }, Qt::BlockingQueuedConnection);
    return ok;
  }
  void echo_auth(const std::string& kind_repo) {  // that repo's 401s quote the Authorization header
    std::lock_guard<std::mutex> g(mu_);
    repos_[QByteArray::fromStdString(kind_repo)].echo_auth = true;
  }
  void cut_next_cdn_transfer_after(qint64 bytes) {
    std::lock_guard<std::mutex> g(mu_);
    cut_after_ = bytes;
  }
  std::vector<Request> requests() const {
    std::lock_guard<std::mutex> g(mu_);
    return log_;
  }
  void clear_log() {
    std::lock_guard<std::mutex> g(mu_);
    log_.clear();
  }

  // ---- the upload side ----
  // Hub routes (create, info, branch, preupload, batch, verify, commit) need "Bearer <token>".
  void set_upload_token(const QByteArray& t) {
    std::lock_guard<std::mutex> g(mu_);
    upload_token_ = t;
  }
  // preupload says "lfs" from `threshold` bytes (and for *.safetensors / *.bin); the LFS batch
  // answers multipart with parts of `chunk` bytes for an object larger than `chunk`.
  void set_lfs_rules(qint64 threshold, qint64 chunk) {
    std::lock_guard<std::mutex> g(mu_);
    lfs_threshold_ = threshold;
    chunk_size_ = chunk;
  }
  // The next `times` requests of `route` are answered `status` (X-Error-Message "stand-in fault").
  void fail_next(const QByteArray& route, int times, int status = 500) {
    std::lock_guard<std::mutex> g(mu_);
    faults_[route].errors = times;
    faults_[route].status = status;
  }
  // The next request of `route` is answered 200 with `body` (garbage, huge, deeply nested).
  void answer_next(const QByteArray& route, const QByteArray& body) {
    std::lock_guard<std::mutex> g(mu_);
    faults_[route].answers.push_back(body);
  }
  // The next `times` connections carrying `route` are cut once `after` body bytes arrived.
  void cut_next(const QByteArray& route, int times, qint64 after) {
    std::lock_guard<std::mutex> g(mu_);
    faults_[route].cuts = times;
    faults_[route].cut_after = after;
  }
  // The next `times` requests of `route` wait unanswered until release_held(): a Hub that is slow
  // for as long as a test needs, without a timer.
  void hold_next(const QByteArray& route, int times = 1) {
    std::lock_guard<std::mutex> g(mu_);
    faults_[route].holds = times;
  }
  size_t held_count() const {
    std::lock_guard<std::mutex> g(mu_);
    return held_.size();
  }
  // Answers the held requests now, as they would have been answered (a client that gave up on one
  // has closed its connection: that one is dropped).
  void release_held() {
    QMetaObject::invokeMethod(ctx_, [this] {
      std::vector<Held> held;
      {
        std::lock_guard<std::mutex> g(mu_);
        held.swap(held_);
      }
      for (auto& h : held) {
        if (!h.socket || h.socket->state() != QAbstractSocket::ConnectedState) continue;
        std::lock_guard<std::mutex> g(mu_);
        serve_upload(h.socket, h.rq, h.head, h.body);
      }
    }, Qt::BlockingQueuedConnection);
  }
  // The next LFS batch answer names another oid than the one asked for.
  void wrong_oid_next_batch() {
    std::lock_guard<std::mutex> g(mu_);
    wrong_oid_ = true;
  }
  void clear_faults() {
    std::lock_guard<std::mutex> g(mu_);
    faults_.clear();
    wrong_oid_ = false;
  }
  UploadStats upload_stats() const {
    std::lock_guard<std::mutex> g(mu_);
    return stats_;
  }
  void reset_upload_stats() {
    std::lock_guard<std::mutex> g(mu_);
    stats_ = {};
  }
  bool has_repo(const std::string& key) const {
    std::lock_guard<std::mutex> g(mu_);
    return repos_.count(QByteArray::fromStdString(key)) > 0;
  }
  Repo repo(const std::string& key) const {  // "models/org/name", "models/org/name@dev", "...@refs/pr/1"
    std::lock_guard<std::mutex> g(mu_);
    auto it = repos_.find(QByteArray::fromStdString(key));
    return it == repos_.end() ? Repo{} : it->second;
  }
  bool is_private(const std::string& key) const {
    std::lock_guard<std::mutex> g(mu_);
    return private_.count(QByteArray::fromStdString(key)) > 0;
  }

private:
  static void reply(QTcpSocket* s, int status, const QByteArray& reason, const std::vector<std::pair<QByteArray, QByteArray>>& headers,
                    const QByteArray& body, bool head_only, qint64 content_length = -1) {
    QByteArray out = "HTTP/1.1 " + QByteArray::number(status) + " " + reason + "\r\n";
    for (const auto& [k, v] : headers) out += k + ": " + v + "\r\n";
    out += "Content-Length: " + QByteArray::number(content_length >= 0 ? content_length : body.size()) + "\r\n";
    out += "Connection: close\r\n\r\n";
    if (!head_only) out += body;
    s->write(out);
    s->flush();
    s->disconnectFromHost();
  }
  static void error(QTcpSocket* s, int status, const QByteArray& code, const QByteArray& msg, bool head_only,
                    const QByteArray& commit = {}) {
    std::vector<std::pair<QByteArray, QByteArray>> h = {{"Content-Type", "application/json"}};
    if (!code.isEmpty()) h.push_back({"X-Error-Code", code});
    h.push_back({"X-Error-Message", msg});
    if (!commit.isEmpty()) h.push_back({"X-Repo-Commit", commit});
    reply(s, status, "Error", h, "{\"error\":\"" + msg + "\"}", head_only);
  }

  void serve(QTcpSocket* s, const QByteArray& head, const QByteArray& body) {
    Request rq = parse_head(head);
    rq.body_size = body.size();
    std::lock_guard<std::mutex> g(mu_);
    log_.push_back(rq);
    if (!rq.route.isEmpty()) return serve_upload(s, rq, head, body);
    const bool head_only = rq.method == "HEAD";
    const QByteArray& p = rq.path;
    if (p.startsWith("/cdn/")) return cdn(s, rq, p.mid(5));
    // /api/{models|datasets}/{repo}/revision/{rev}
    if (p.startsWith("/api/")) {
      const int at = p.indexOf("/revision/");
      const QByteArray key = p.mid(5, at - 5);
      auto it = repos_.find(key);
      if (at < 0 || it == repos_.end()) return error(s, 404, "RepoNotFound", "Repository not found", head_only);
      if (!it->second.token.isEmpty() && rq.auth != "Bearer " + it->second.token)
        return error(s, 401, {}, unauthorized_message(it->second, rq), head_only);
      const QByteArray rev = p.mid(at + 10);
      if (rev != "main" && rev != it->second.commit) return error(s, 404, "RevisionNotFound", "Invalid rev id", head_only);
      QJsonArray sib;
      for (const auto& f : it->second.files) sib.append(QJsonObject{{"rfilename", QString::fromUtf8(f.path)}});
      for (const auto& n : it->second.extra_siblings) sib.append(QJsonObject{{"rfilename", QString::fromUtf8(n)}});
      const QJsonObject o{{"id", QString::fromUtf8(key)}, {"sha", QString::fromUtf8(it->second.commit)}, {"siblings", sib}};
      return reply(s, 200, "OK", {{"Content-Type", "application/json"}}, QJsonDocument(o).toJson(QJsonDocument::Compact), head_only);
    }
    // /[datasets/]{org}/{name}/resolve/{rev}/{path}
    const int at = p.indexOf("/resolve/");
    const QByteArray key = p.startsWith("/datasets/") ? "datasets/" + p.mid(10, at - 10) : "models/" + p.mid(1, at - 1);
    auto it = repos_.find(key);
    if (at < 0 || it == repos_.end()) return error(s, 404, "RepoNotFound", "Repository not found", head_only);
    const Repo& repo = it->second;
    if (!repo.token.isEmpty() && rq.auth != "Bearer " + repo.token)
      return error(s, 401, {}, unauthorized_message(repo, rq), head_only);
    if (repo.gated) return error(s, 403, "GatedRepo", "Access to model is restricted", head_only);
    const QByteArray rest = p.mid(at + 9);
    const int slash = rest.indexOf('/');
    const QByteArray rev = rest.left(slash), path = rest.mid(slash + 1);
    if (rev != "main" && rev != repo.commit) return error(s, 404, "RevisionNotFound", "Invalid rev id", head_only);
    for (const auto& f : repo.files) {
      if (f.path != path) continue;
      if (!f.lfs)
        return reply(s, 200, "OK", {{"ETag", "\"" + f.etag() + "\""}, {"X-Repo-Commit", repo.commit}}, f.content, head_only);
      const QByteArray loc = QByteArray::fromStdString(url()) + "/cdn/" + f.etag();
      return reply(s, 302, "Found",
                   {{"Location", loc}, {"ETag", "\"pointer-etag\""}, {"X-Linked-Etag", "\"" + f.etag() + "\""},
                    {"X-Linked-Size", QByteArray::number(f.content.size())}, {"X-Repo-Commit", repo.commit}},
                   {}, head_only);
    }
    return error(s, 404, "EntryNotFound", "Entry not found", head_only, repo.commit);
  }

  void cdn(QTcpSocket* s, const Request& rq, const QByteArray& etag) {
    for (const auto& [key, repo] : repos_)
      for (const auto& f : repo.files) {
        if (!f.lfs || f.etag() != etag) continue;
        qint64 from = 0;
        if (rq.range.startsWith("bytes=")) from = rq.range.mid(6, rq.range.indexOf('-') - 6).toLongLong();
        const QByteArray body = f.content.mid(from);
        std::vector<std::pair<QByteArray, QByteArray>> h = {{"Content-Type", "application/octet-stream"}};
        if (from > 0)
          h.push_back({"Content-Range", "bytes " + QByteArray::number(from) + "-" + QByteArray::number(f.content.size() - 1) +
                                            "/" + QByteArray::number(f.content.size())});
        if (cut_after_ >= 0 && rq.method == "GET") {  // announce everything, send a part, hang up
          const qint64 n = cut_after_;
          cut_after_ = -1;
          QByteArray out = "HTTP/1.1 200 OK\r\nContent-Length: " + QByteArray::number(body.size()) + "\r\n\r\n" + body.left(n);
          s->write(out);
          s->flush();
          s->waitForBytesWritten(5000);
          s->abort();
          return;
        }
        return reply(s, from > 0 ? 206 : 200, from > 0 ? "Partial Content" : "OK", h, body, rq.method == "HEAD");
      }
    error(s, 404, {}, "no such blob", rq.method == "HEAD");
  }

  // ---- connections: the head, then Content-Length bytes of body; a cut on demand ----
  struct Conn {
    QByteArray buf, head;
    bool have_head = false;
    qint64 need = 0, cut_after = -1;
  };
  // A server on `address` (any free port) whose connections feed on_bytes; on the stand-in's thread.
  QTcpServer* listening_server(const QHostAddress& address) {
    auto* server = new QTcpServer;
    server->listen(address, 0);
    QObject::connect(server, &QTcpServer::newConnection, server, [this, server] {
      while (QTcpSocket* s = server->nextPendingConnection()) {
        auto c = std::make_shared<Conn>();
        QObject::connect(s, &QTcpSocket::disconnected, s, &QObject::deleteLater);
        QObject::connect(s, &QTcpSocket::readyRead, s, [this, s, c] { on_bytes(s, *c); });
      }
    });
    return server;
  }
  void on_bytes(QTcpSocket* s, Conn& c) {
    c.buf += s->readAll();
    if (!c.have_head) {
      const int end = c.buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      c.head = c.buf.left(end);
      c.buf.remove(0, end + 4);
      c.have_head = true;
      Request rq = parse_head(c.head);
      for (const auto& l : c.head.split('\n'))
        if (l.toLower().startsWith("content-length:")) c.need = l.mid(15).trimmed().toLongLong();
      std::lock_guard<std::mutex> g(mu_);
      auto f = faults_.find(rq.route);
      if (!rq.route.isEmpty() && f != faults_.end() && f->second.cuts > 0) {
        --f->second.cuts;
        c.cut_after = f->second.cut_after;
        ++stats_.cuts;
        rq.cut = true;
        log_.push_back(rq);
      }
    }
    if (c.cut_after >= 0 && c.buf.size() >= std::min(c.cut_after, c.need)) {
      c.cut_after = -1;
      s->abort();
      return;
    }
    if (c.buf.size() < c.need) return;
    const QByteArray body = c.buf.left(c.need);
    c.buf.clear();
    c.have_head = false;
    serve(s, c.head, body);
  }

  static QByteArray unauthorized_message(const Repo& r, const Request& rq) {
    return r.echo_auth ? "Invalid credentials: got " + rq.auth : QByteArray("Invalid credentials in Authorization header");
  }
  static QByteArray route_of(const QByteArray& method, const QByteArray& raw) {
    if (raw == "/api/repos/create") return method == "POST" ? "create" : "";
    if (raw.startsWith("/api/")) {
      const QList<QByteArray> parts = raw.split('/');  // "", api, kind, org, name[, route, rev]
      if (parts.size() == 5 && method == "GET") return "info";
      if (parts.size() == 7 && method == "POST" &&
          (parts[5] == "branch" || parts[5] == "preupload" || parts[5] == "commit"))
        return parts[5];
      return "";
    }
    if (method == "POST" && raw.endsWith(".git/info/lfs/objects/batch")) return "batch";
    if (method == "POST" && raw.endsWith(".git/info/lfs/objects/verify")) return "verify";
    if (method == "PUT" && raw.startsWith("/s3/basic/")) return "put";
    if (method == "PUT" && raw.startsWith("/s3/part/")) return "part";
    if (method == "POST" && raw.startsWith("/s3/complete/")) return "complete";
    return "";
  }

  static Request parse_head(const QByteArray& head) {
    const QList<QByteArray> lines = head.split('\n');
    const QList<QByteArray> rl = lines.value(0).trimmed().split(' ');
    const QByteArray target = rl.value(1);
    const int q = target.indexOf('?');
    Request rq{rl.value(0), QByteArray::fromPercentEncoding(q < 0 ? target : target.left(q)), {}, {}};
    rq.raw = q < 0 ? target : target.left(q);
    rq.query = q < 0 ? QByteArray() : target.mid(q + 1);
    for (const auto& l : lines.mid(1)) {
      const int c = l.indexOf(':');
      if (c < 0) continue;
      const QByteArray k = l.left(c).trimmed().toLower(), v = l.mid(c + 1).trimmed();
      if (k == "range") rq.range = v;
      if (k == "authorization") rq.auth = v;
      if (k == "content-type") rq.content_type = v;
      if (k == "accept") rq.accept = v;
    }
    rq.route = route_of(rq.method, rq.raw);
    return rq;
  }

  // ---- the upload routes (mu_ held) ----
  struct Held {
    QPointer<QTcpSocket> socket;
    Request rq;
    QByteArray head, body;
  };
  struct Fault {
    int cuts = 0, errors = 0, status = 500, holds = 0;
    qint64 cut_after = 0;
    std::deque<QByteArray> answers;
  };
  struct Pending {  // a multipart upload in progress
    QByteArray key, oid;
    qint64 size = 0, chunk = 0;
    int parts = 0;
    std::map<int, QByteArray> got, etags;
  };

  static QByteArray sha256_hex(const QByteArray& b) { return QCryptographicHash::hash(b, QCryptographicHash::Sha256).toHex(); }
  static QByteArray git_sha1_hex(const QByteArray& b) { return RepoFile{"", b}.etag(); }
  static bool is_hex64(const QByteArray& s) {
    if (s.size() != 64) return false;
    for (char c : s)
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
  }
  void json_reply(QTcpSocket* s, int status, const QJsonObject& o) {
    reply(s, status, status < 300 ? "OK" : "Error", {{"Content-Type", "application/json"}},
          QJsonDocument(o).toJson(QJsonDocument::Compact), false);
  }
  void violation(QTcpSocket* s, const QByteArray& what) {
    stats_.violations.push_back(what);
    error(s, 400, "BadRequest", what, false);
  }
  static QByteArray key_of_api(const QList<QByteArray>& parts) { return parts[2] + "/" + parts[3] + "/" + parts[4]; }
  static QByteArray at_rev(const QByteArray& key, const QByteArray& rev) { return rev == "main" ? key : key + "@" + rev; }
  QByteArray new_commit(const QByteArray& seed) {
    return QCryptographicHash::hash(seed + QByteArray::number(++commit_counter_), QCryptographicHash::Sha1).toHex();
  }

  void serve_upload(QTcpSocket* s, const Request& rq, const QByteArray& head, const QByteArray& body) {
    Fault& f = faults_[rq.route];
    if (f.holds > 0) {
      --f.holds;
      held_.push_back({QPointer<QTcpSocket>(s), rq, head, body});
      return;
    }
    if (f.errors > 0) {
      --f.errors;
      return error(s, f.status, {}, "stand-in fault", false);
    }
    if (!f.answers.empty()) {
      const QByteArray b = f.answers.front();
      f.answers.pop_front();
      return reply(s, 200, "OK", {{"Content-Type", "application/json"}}, b, false);
    }
    const bool storage = rq.route == "put" || rq.route == "part" || rq.route == "complete";
    if (storage) {
      ++stats_.storage_requests;
      if (!rq.auth.isEmpty()) ++stats_.storage_with_auth;
    }
    if (!storage && !upload_token_.isEmpty() && rq.auth != "Bearer " + upload_token_) {
      ++stats_.unauthorized;
      return error(s, 401, {}, "Invalid credentials in Authorization header", false);
    }
    if (rq.route == "create") return create(s, body);
    if (rq.route == "put") return put_basic(s, rq, body);
    if (rq.route == "part") return put_part(s, rq, body);
    if (rq.route == "complete") return complete(s, rq, body);
    if (rq.route == "batch" || rq.route == "verify") {
      QByteArray repo = rq.raw.left(rq.raw.indexOf(".git/info/lfs/"));
      const QByteArray key = repo.startsWith("/datasets/") ? "datasets/" + repo.mid(10) : "models/" + repo.mid(1);
      if (!repos_.count(key)) return error(s, 404, "RepoNotFound", "Repository not found", false);
      return rq.route == "batch" ? batch(s, rq, key, body) : verify(s, key, body);
    }
    const QList<QByteArray> parts = rq.raw.split('/');
    const QByteArray key = key_of_api(parts);
    if (rq.route == "info") {
      auto it = repos_.find(key);
      if (it == repos_.end()) return error(s, 404, "RepoNotFound", "Repository not found", false);
      return json_reply(s, 200, QJsonObject{{"id", QString::fromUtf8(parts[3] + "/" + parts[4])},
                                            {"sha", QString::fromUtf8(it->second.commit)},
                                            {"private", bool(private_.count(key))}});
    }
    const QByteArray rev = QByteArray::fromPercentEncoding(parts[6]);
    if (!repos_.count(key)) return error(s, 404, "RepoNotFound", "Repository not found", false);
    if (rq.route == "branch") {
      if (repos_.count(at_rev(key, rev))) return json_reply(s, 409, QJsonObject{{"error", "Reference already exists"}});
      repos_[at_rev(key, rev)] = repos_[key];
      return json_reply(s, 200, QJsonObject{});
    }
    if (!repos_.count(at_rev(key, rev))) return error(s, 404, "RevisionNotFound", "Invalid rev id", false);
    if (rq.route == "preupload") return preupload(s, rq, key, rev, body);
    if (rq.route == "commit") return commit(s, rq, key, rev, parts[3] + "/" + parts[4], body);
    return error(s, 404, {}, "no such route", false);
  }

  void create(QTcpSocket* s, const QByteArray& body) {
    const QJsonDocument d = QJsonDocument::fromJson(body);
    if (!d.isObject()) return violation(s, "create: the body is not a JSON object");
    const QJsonObject o = d.object();
    if (!o.value("name").isString()) return violation(s, "create: no name string");
    if (o.contains("private") && !o.value("private").isBool()) return violation(s, "create: private is not a boolean");
    const QString type = o.value("type").toString("model");
    if (type != "model" && type != "dataset" && type != "space") return violation(s, "create: unknown type");
    const QByteArray id = o.value("organization").toString("user").toUtf8() + "/" + o.value("name").toString().toUtf8();
    for (const char* k : {"models/", "datasets/", "spaces/"})
      if (repos_.count(k + id))
        return json_reply(s, 409, QJsonObject{{"error", "You already created a repo with this name"},
                                               {"url", QString::fromStdString(url()) + "/" + QString::fromUtf8(id)}});
    const QByteArray key = (type == "dataset" ? "datasets/" : type == "space" ? "spaces/" : "models/") + id;
    Repo r;
    r.commit = new_commit(key);
    r.files = {{".gitattributes", "*.safetensors filter=lfs diff=lfs merge=lfs -text\n*.bin filter=lfs diff=lfs merge=lfs -text\n"}};
    repos_[key] = r;
    if (o.value("private").toBool()) private_.insert(key);
    ++stats_.created;
    json_reply(s, 200, QJsonObject{{"url", QString::fromStdString(url()) + "/" + QString::fromUtf8(id)}, {"name", QString::fromUtf8(id)}});
  }

  void preupload(QTcpSocket* s, const Request& rq, const QByteArray& key, const QByteArray& rev, const QByteArray& body) {
    ++stats_.preuploads;
    if (!rq.content_type.startsWith("application/json")) return violation(s, "preupload: Content-Type is not application/json");
    const QJsonDocument d = QJsonDocument::fromJson(body);
    if (!d.isObject() || !d.object().value("files").isArray()) return violation(s, "preupload: no files list");
    const QJsonArray files = d.object().value("files").toArray();
    if (files.isEmpty() || files.size() > 256) return violation(s, "preupload: 1 to 256 files per call");
    const Repo& repo = repos_[at_rev(key, rev)];
    QJsonArray out;
    for (const auto& v : files) {
      const QJsonObject e = v.toObject();
      const QString path = e.value("path").toString();
      const QByteArray sample = QByteArray::fromBase64(e.value("sample").toString().toLatin1());
      const double size = e.value("size").toDouble(-1);
      if (path.isEmpty() || !e.value("sample").isString() || sample.size() > 512 || size < 0 || size != double(qint64(size)))
        return violation(s, "preupload: an entry without path, base64 sample of at most 512 bytes, and size");
      if (qint64(size) > 0 && sample.size() != std::min<qint64>(512, qint64(size)))
        return violation(s, "preupload: the sample is not the first min(512, size) bytes");
      const bool lfs = size > 0 && (qint64(size) >= lfs_threshold_ || path.endsWith(".safetensors") || path.endsWith(".bin"));
      QJsonObject a{{"path", path}, {"uploadMode", lfs ? "lfs" : "regular"}, {"shouldIgnore", false}};
      a["oid"] = QJsonValue::Null;
      for (const auto& f : repo.files)
        if (f.path == path.toUtf8()) a["oid"] = QString::fromLatin1(f.lfs ? sha256_hex(f.content) : git_sha1_hex(f.content));
      out.append(a);
    }
    json_reply(s, 200, QJsonObject{{"files", out}});
  }

  void batch(QTcpSocket* s, const Request& rq, const QByteArray& key, const QByteArray& body) {
    ++stats_.batches;
    if (rq.content_type != "application/vnd.git-lfs+json" || rq.accept != "application/vnd.git-lfs+json")
      return violation(s, "batch: Accept and Content-Type must be application/vnd.git-lfs+json");
    const QJsonObject o = QJsonDocument::fromJson(body).object();
    const QJsonArray transfers = o.value("transfers").toArray();
    if (o.value("operation").toString() != "upload" || o.value("hash_algo").toString() != "sha256" ||
        !transfers.contains(QJsonValue("basic")) || !transfers.contains(QJsonValue("multipart")) ||
        !o.value("ref").toObject().value("name").isString() || !o.value("objects").isArray())
      return violation(s, "batch: expected operation upload, transfers basic+multipart, hash_algo sha256, ref.name, objects");
    const QByteArray repo_path = key.startsWith("datasets/") ? key : key.mid(7);  // models/ is not in the URL
    QJsonArray out;
    for (const auto& v : o.value("objects").toArray()) {
      const QJsonObject e = v.toObject();
      QByteArray oid = e.value("oid").toString().toLatin1();
      const qint64 size = qint64(e.value("size").toDouble(-1));
      if (!is_hex64(oid) || size <= 0) return violation(s, "batch: an object without a sha256 oid and a positive size");
      QJsonObject a{{"oid", QString::fromLatin1(oid)}, {"size", double(size)}};
      if (!lfs_[key].count(oid)) {
        const QString hub = QString::fromStdString(url());
        const QString base = storage_base_.isEmpty() ? hub : storage_base_;
        QJsonObject up;
        if (size > chunk_size_) {
          Pending p{key, oid, size, chunk_size_, int((size + chunk_size_ - 1) / chunk_size_), {}, {}};
          const QByteArray id = QByteArray::number(++upload_counter_);
          QJsonObject h{{"chunk_size", QString::number(chunk_size_)}};
          for (int i = 1; i <= p.parts; ++i) h[QString::number(i)] = base + "/s3/part/" + QString::fromLatin1(id) + "/" + QString::number(i);
          up = QJsonObject{{"href", base + "/s3/complete/" + QString::fromLatin1(id)}, {"header", h}};
          pending_[id] = p;
        } else {
          up = QJsonObject{{"href", base + "/s3/basic/" + QString::fromLatin1(oid)}};
        }
        const QJsonObject ver{{"href", hub + "/" + QString::fromUtf8(repo_path) + ".git/info/lfs/objects/verify"}};
        a["actions"] = QJsonObject{{"upload", up}, {"verify", ver}};
      }
      if (wrong_oid_) {
        wrong_oid_ = false;
        a["oid"] = QString::fromLatin1(sha256_hex("not what was asked"));
      }
      out.append(a);
    }
    reply(s, 200, "OK", {{"Content-Type", "application/vnd.git-lfs+json"}},
          QJsonDocument(QJsonObject{{"transfer", "basic"}, {"objects", out}}).toJson(QJsonDocument::Compact), false);
  }

  void put_basic(QTcpSocket* s, const Request& rq, const QByteArray& body) {
    const QByteArray oid = rq.raw.mid(10);
    ++stats_.basic_puts;
    stats_.put_bytes += body.size();
    if (sha256_hex(body) != oid) return violation(s, "basic PUT: the bytes do not hash to the oid");
    staged_[oid] = body;
    reply(s, 200, "OK", {{"ETag", "\"" + QCryptographicHash::hash(body, QCryptographicHash::Md5).toHex() + "\""}}, {}, false);
  }

  void put_part(QTcpSocket* s, const Request& rq, const QByteArray& body) {
    const QList<QByteArray> p = rq.raw.split('/');  // "", s3, part, id, n
    auto it = pending_.find(p.value(3));
    if (it == pending_.end()) return violation(s, "part PUT: no such multipart upload");
    Pending& u = it->second;
    const int n = p.value(4).toInt();
    if (n < 1 || n > u.parts) return violation(s, "part PUT: part number out of range");
    const qint64 want = n < u.parts ? u.chunk : u.size - u.chunk * (u.parts - 1);
    ++stats_.parts;
    stats_.put_bytes += body.size();
    stats_.part_sizes.push_back(body.size());
    if (body.size() != want) return violation(s, "part PUT: part " + QByteArray::number(n) + " has the wrong size");
    u.got[n] = body;
    u.etags[n] = "\"" + QCryptographicHash::hash(body, QCryptographicHash::Md5).toHex() + "\"";
    reply(s, 200, "OK", {{"ETag", u.etags[n]}}, {}, false);
  }

  void complete(QTcpSocket* s, const Request& rq, const QByteArray& body) {
    auto it = pending_.find(rq.raw.mid(13));
    if (it == pending_.end()) return violation(s, "complete: no such multipart upload");
    Pending& u = it->second;
    if (rq.content_type != "application/vnd.git-lfs+json") return violation(s, "complete: Content-Type");
    const QJsonObject o = QJsonDocument::fromJson(body).object();
    const QJsonArray parts = o.value("parts").toArray();
    if (o.value("oid").toString().toLatin1() != u.oid || parts.size() != u.parts)
      return violation(s, "complete: the payload is not {oid, parts: one per part}");
    QByteArray all;
    for (int i = 0; i < parts.size(); ++i) {
      const QJsonObject e = parts[i].toObject();
      if (e.value("partNumber").toInt() != i + 1 || e.value("etag").toString().toLatin1() != u.etags[i + 1])
        return violation(s, "complete: part " + QByteArray::number(i + 1) + " has the wrong partNumber or etag");
      all += u.got[i + 1];
    }
    if (sha256_hex(all) != u.oid) return violation(s, "complete: the parts do not hash to the oid");
    ++stats_.completions;
    staged_[u.oid] = all;
    pending_.erase(it);
    json_reply(s, 200, QJsonObject{});
  }

  void verify(QTcpSocket* s, const QByteArray& key, const QByteArray& body) {
    const QJsonObject o = QJsonDocument::fromJson(body).object();
    const QByteArray oid = o.value("oid").toString().toLatin1();
    auto it = staged_.find(oid);
    if (it == staged_.end() || qint64(o.value("size").toDouble(-1)) != it->second.size())
      return violation(s, "verify: the object was not uploaded, or the size differs");
    lfs_[key][oid] = it->second;
    ++stats_.verifies;
    json_reply(s, 200, QJsonObject{});
  }

  void commit(QTcpSocket* s, const Request& rq, const QByteArray& key, const QByteArray& rev, const QByteArray& id,
              const QByteArray& body) {
    if (rq.content_type != "application/x-ndjson") return violation(s, "commit: Content-Type is not application/x-ndjson");
    QList<QByteArray> lines = body.split('\n');
    while (!lines.isEmpty() && lines.back().isEmpty()) lines.pop_back();
    if (lines.isEmpty()) return violation(s, "commit: empty body");
    const QJsonObject h = QJsonDocument::fromJson(lines[0]).object();
    const QJsonObject hv = h.value("value").toObject();
    if (h.value("key").toString() != "header" || hv.value("summary").toString().isEmpty() || !hv.value("description").isString())
      return violation(s, "commit: the first line is not {key: header, value: {summary, description}}");
    CommitRecord rec{key, rev, hv.value("summary").toString().toUtf8(), hv.value("description").toString().toUtf8(), {},
                     rq.query == "create_pr=1", {}, {}};
    std::vector<RepoFile> adds;
    std::set<QByteArray> seen;
    for (int i = 1; i < lines.size(); ++i) {
      const QJsonObject l = QJsonDocument::fromJson(lines[i]).object();
      const QJsonObject v = l.value("value").toObject();
      const QByteArray path = v.value("path").toString().toUtf8();
      if (path.isEmpty() || path.contains("..") || path.startsWith('/') || !seen.insert(path).second)
        return violation(s, "commit: a line without a new, relative path");
      if (l.value("key").toString() == "file") {
        if (v.value("encoding").toString() != "base64" || !v.value("content").isString())
          return violation(s, "commit: a file line without base64 content");
        const auto dec = QByteArray::fromBase64Encoding(v.value("content").toString().toLatin1(), QByteArray::AbortOnBase64DecodingErrors);
        if (!dec) return violation(s, "commit: content is not base64");
        adds.push_back({path, *dec, false});
        rec.regular_paths.push_back(path);
      } else if (l.value("key").toString() == "lfsFile") {
        const QByteArray oid = v.value("oid").toString().toLatin1();
        if (v.value("algo").toString() != "sha256" || !is_hex64(oid)) return violation(s, "commit: an lfsFile without algo sha256 and an oid");
        auto st = lfs_[key].find(oid);
        if (st == lfs_[key].end()) return violation(s, "commit: an lfsFile whose object was never uploaded and verified");
        if (qint64(v.value("size").toDouble(-1)) != st->second.size()) return violation(s, "commit: an lfsFile with the wrong size");
        adds.push_back({path, st->second, true});
        rec.lfs_paths.push_back(path);
      } else {
        return violation(s, "commit: an operation that is neither file nor lfsFile");
      }
    }
    Repo next = repos_[at_rev(key, rev)];
    for (auto& a : adds) {
      bool replaced = false;
      for (auto& f : next.files)
        if (f.path == a.path) {
          f = a;
          replaced = true;
        }
      if (!replaced) next.files.push_back(a);
    }
    next.commit = new_commit(key + body);
    rec.commit = next.commit;
    QJsonObject answer{{"commitUrl", QString::fromStdString(url()) + "/" + QString::fromUtf8(id) + "/commit/" + QString::fromLatin1(next.commit)},
                       {"commitOid", QString::fromLatin1(next.commit)},
                       {"success", true}};
    if (rec.create_pr) {
      const int n = ++pr_counter_;
      repos_[key + "@refs/pr/" + QByteArray::number(n)] = next;
      answer["pullRequestUrl"] = QString::fromStdString(url()) + "/" + QString::fromUtf8(id) + "/discussions/" + QString::number(n);
    } else {
      repos_[at_rev(key, rev)] = next;
    }
    ++stats_.commits;
    stats_.commit_log.push_back(rec);
    json_reply(s, 200, answer);
  }

  QThread thread_;
  QObject* ctx_ = new QObject;
  QTcpServer* server_ = nullptr;
  QTcpServer* storage_server_ = nullptr;  // storage_on_other_host(): ::1
  QString storage_base_;                  // "" = the Hub's own URL
  quint16 port_ = 0;
  mutable std::mutex mu_;
  std::map<QByteArray, Repo> repos_;
  std::vector<Request> log_;
  qint64 cut_after_ = -1;
  // upload side
  QByteArray upload_token_;
  qint64 lfs_threshold_ = 10 << 20, chunk_size_ = 1 << 20;
  std::map<QByteArray, Fault> faults_;
  std::vector<Held> held_;
  bool wrong_oid_ = false;
  UploadStats stats_;
  std::set<QByteArray> private_;
  std::map<QByteArray, std::map<QByteArray, QByteArray>> lfs_;  // repo key -> oid -> bytes (verified)
  std::map<QByteArray, QByteArray> staged_;                     // oid -> bytes uploaded, not yet verified
  std::map<QByteArray, Pending> pending_;                       // multipart upload id -> parts so far
  int commit_counter_ = 0, upload_counter_ = 0, pr_counter_ = 0;
};

}  // namespace hub_test
