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
#pragma once

#include <QCryptographicHash>
#include <QHostAddress>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTcpServer>
#include <QTcpSocket>
#include <QThread>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace hub_test {

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
};

struct Request {
  QByteArray method, path, range, auth;
};

class HubStandIn {
public:
  HubStandIn() {
    thread_.start();
    ctx_->moveToThread(&thread_);
    QMetaObject::invokeMethod(ctx_, [this] {
      server_ = new QTcpServer;
      server_->listen(QHostAddress::LocalHost, 0);
      port_ = server_->serverPort();
      QObject::connect(server_, &QTcpServer::newConnection, server_, [this] {
        while (QTcpSocket* s = server_->nextPendingConnection()) {
          auto buf = std::make_shared<QByteArray>();
          QObject::connect(s, &QTcpSocket::disconnected, s, &QObject::deleteLater);
          QObject::connect(s, &QTcpSocket::readyRead, s, [this, s, buf] {
            *buf += s->readAll();
            const int end = buf->indexOf("\r\n\r\n");
            if (end >= 0) {
              const QByteArray head = buf->left(end);
              buf->clear();
              serve(s, head);
            }
          });
        }
      });
    }, Qt::BlockingQueuedConnection);
  }
  ~HubStandIn() {
    QMetaObject::invokeMethod(ctx_, [this] { delete server_; server_ = nullptr; }, Qt::BlockingQueuedConnection);
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

  void serve(QTcpSocket* s, const QByteArray& head) {
    const QList<QByteArray> lines = head.split('\n');
    const QList<QByteArray> rl = lines.value(0).trimmed().split(' ');
    Request rq{rl.value(0), QByteArray::fromPercentEncoding(rl.value(1)), {}, {}};
    for (const auto& l : lines.mid(1)) {
      const int c = l.indexOf(':');
      if (c < 0) continue;
      const QByteArray k = l.left(c).trimmed().toLower(), v = l.mid(c + 1).trimmed();
      if (k == "range") rq.range = v;
      if (k == "authorization") rq.auth = v;
    }
    std::lock_guard<std::mutex> g(mu_);
    log_.push_back(rq);
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
        return error(s, 401, {}, "Invalid credentials in Authorization header", head_only);
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
      return error(s, 401, {}, "Invalid credentials in Authorization header", head_only);
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

  QThread thread_;
  QObject* ctx_ = new QObject;
  QTcpServer* server_ = nullptr;
  quint16 port_ = 0;
  mutable std::mutex mu_;
  std::map<QByteArray, Repo> repos_;
  std::vector<Request> log_;
  qint64 cut_after_ = -1;
};

}  // namespace hub_test
