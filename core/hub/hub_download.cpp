// download_snapshot over QNetworkAccessManager: one listing request, then per file a HEAD for its
// ETag/size/location and a GET (resumed with Range) into blobs/<etag>.incomplete, verified and
// renamed, then linked into snapshots/. A few files in flight at once, all in one event loop.
#include "core/hub/hub_download.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <map>
#include <memory>
#include <set>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <QCoreApplication>
#include <QCryptographicHash>
#include <QEventLoop>
#include <QFile>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QNetworkRequest>
#include <QUrl>

#include <nlohmann/json.hpp>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/strings.h"
#include "core/hub/hub_http.h"

namespace grpo::hub {
namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxFileBytes = uint64_t(1) << 40;  // 1 TiB: larger than any Hub file

void make_dirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '/') continue;
    const std::string cur = path.substr(0, i);
    if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
      throw Error(cur, std::string("cannot create directory: ") + std::strerror(errno));
  }
}

std::string dirname_of(const std::string& p) {
  const auto s = p.rfind('/');
  return s == std::string::npos ? "." : p.substr(0, s);
}

uint64_t file_size(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
}

// file_download.py _normalize_etag: drop a leading W/ and the quotes.
std::string normalize_etag(std::string e) {
  e = trim(e);
  if (starts_with(e, "W/")) e = e.substr(2);
  while (!e.empty() && e.front() == '"') e.erase(e.begin());
  while (!e.empty() && e.back() == '"') e.pop_back();
  return e;
}

// The blob's digest as the Hub names it: sha256 (LFS) or git's blob sha1 ("blob <n>\0" + data).
std::string file_digest(const std::string& path, bool git_sha1, uint64_t size) {
  QFile f(QString::fromStdString(path));
  if (!f.open(QIODevice::ReadOnly)) throw Error(path, "cannot read back the downloaded file");
  QCryptographicHash h(git_sha1 ? QCryptographicHash::Sha1 : QCryptographicHash::Sha256);
  if (git_sha1) {
    const std::string head = "blob " + std::to_string(size);
    h.addData(QByteArrayView(head.data(), static_cast<qsizetype>(head.size() + 1)));  // with the NUL
  }
  h.addData(&f);
  return h.result().toHex().toStdString();
}

// A relative symlink at `link` -> `target`, replaced atomically (temporary name + rename).
void link_atomic(const std::string& target, const std::string& link) {
  const std::string tmp = link + ".tmp-link." + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  if (::symlink(target.c_str(), tmp.c_str()) != 0)
    throw Error(link, std::string("cannot create the snapshot link: ") + std::strerror(errno),
                "the cache needs a file system with symbolic links");
  if (::rename(tmp.c_str(), link.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw Error(link, std::string("cannot place the snapshot link: ") + std::strerror(e));
  }
}

// flock on .locks/<repo folder>/<etag>.lock, as huggingface_hub's filelock takes it.
class BlobLock {
public:
  explicit BlobLock(const std::string& path) : path_(path) {
    make_dirs(dirname_of(path));
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error(path, std::string("cannot open lock: ") + std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd_);
      fd_ = -1;
      throw Error(path, "another process is downloading this file", "wait for it to finish, then run again");
    }
  }
  ~BlobLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  BlobLock(const BlobLock&) = delete;
  BlobLock& operator=(const BlobLock&) = delete;

private:
  std::string path_;
  int fd_ = -1;
};

struct FileTask {
  std::string path;       // inside the repo
  std::string pointer;    // snapshots/<commit>/<path>
  std::string etag, blob, incomplete;
  QString location;       // where to GET (the resolve URL, or the CDN URL it redirects to)
  uint64_t size = 0, have = 0;
  int redirects = 0;
  bool send_auth = true;
  std::unique_ptr<QFile> out;
  std::unique_ptr<BlobLock> lock;
};

class Downloader {
public:
  explicit Downloader(const DownloadOptions& o) : o_(o) {}

  DownloadResult run();
  const std::string& token() const { return token_; }

private:
  // ---- HTTP ----
  QNetworkRequest request(const QString& url, bool auth) const {
    return hub_request(url, auth ? token_ : std::string(), o_.idle_timeout_ms);
  }
  std::string hub_error(QNetworkReply* r, const std::string& what) const;
  QString check_redirect(QNetworkReply* r, const QString& from, int& redirects, bool& same_host) const;
  void fail(const std::string& message);
  void fail(const Error& e) { fail(std::string(e.what())); }

  // ---- listing and files ----
  json list_repo();
  void start_next();
  void head(FileTask& t, const QString& url);
  void get(FileTask& t, const QString& url);
  void finish(FileTask& t);
  void done(FileTask& t);
  void progress();
  QString resolve_url(const std::string& path) const;

  DownloadOptions o_;
  std::string token_, endpoint_, cache_, repo_dir_, commit_;
  QNetworkAccessManager* nam_ = nullptr;
  QEventLoop* loop_ = nullptr;
  std::deque<FileTask*> queue_;
  std::vector<std::unique_ptr<FileTask>> tasks_;
  std::vector<QNetworkReply*> live_;
  std::set<std::string> fetching_;                         // etags being downloaded now
  std::map<std::string, std::vector<FileTask*>> waiting_;  // files whose blob another file fetches
  int in_flight_ = 0;
  std::string error_;
  DownloadProgress prog_;
  DownloadResult res_;
};

std::string Downloader::hub_error(QNetworkReply* r, const std::string& what) const {
  const int status = http_status(r);
  const std::string code = r->rawHeader("X-Error-Code").toStdString();
  std::string msg = r->rawHeader("X-Error-Message").left(300).toStdString();
  const std::string repo = (o_.repo_type == RepoType::Dataset ? "dataset " : "model ") + o_.repo_id;
  if (status == 0)
    return what + ": " + r->errorString().toStdString() + " (is " + endpoint_ + " reachable? HF_ENDPOINT sets another)";
  std::string base = what + ": HTTP " + std::to_string(status) + (msg.empty() ? "" : " (" + msg + ")");
  if (code == "GatedRepo" || status == 403)
    return base + ": " + repo + " is gated: request access on " + endpoint_ + "/" + o_.repo_id +
           ", then use a token of that account (HF_TOKEN or `huggingface-cli login`)";
  if (status == 401)
    return base + ": the Hub refused the token, or " + repo +
           " is private: check HF_TOKEN (or the token file HF_TOKEN_PATH / HF_HOME/token)";
  if (code == "RepoNotFound")
    return base + ": " + repo + " does not exist (or is private and no valid token was sent)";
  if (code == "RevisionNotFound") return base + ": revision \"" + o_.revision + "\" of " + repo + " does not exist";
  if (code == "EntryNotFound") return base + ": the file is not in " + repo + " at commit " + commit_;
  if (status == 404) return base + ": not found";
  return base;
}

void Downloader::fail(const std::string& message) {
  if (error_.empty()) error_ = message;
  const std::vector<QNetworkReply*> live = live_;  // abort() runs finished handlers, which edit live_
  for (QNetworkReply* r : live)
    if (!r->isFinished() && r->error() == QNetworkReply::NoError) r->abort();  // an errored one finishes by itself  // each finishes; the last one's done() ends the loop
}

// A 3xx answer: the next URL (absolute), with limits on count and scheme. same_host: whether
// the Authorization header may follow (huggingface_hub drops it for another host: a CDN URL is
// signed).
QString Downloader::check_redirect(QNetworkReply* r, const QString& from, int& redirects, bool& same_host) const {
  const QByteArray loc = r->rawHeader("Location");
  check(!loc.isEmpty() && loc.size() <= 8192, from.toStdString(), "a redirect without a usable Location");
  check(++redirects <= o_.max_redirects, from.toStdString(),
        "more than " + std::to_string(o_.max_redirects) + " redirects");
  const QUrl base(from);
  const QUrl next = base.resolved(QUrl::fromEncoded(loc));
  check(next.isValid() && (next.scheme() == "https" || (next.scheme() == "http" && base.scheme() == "http")),
        from.toStdString(), "refusing a redirect to \"" + loc.left(200).toStdString() + "\"",
        "only http(s), and no step down from https to http");
  same_host = next.host() == base.host() && next.port() == base.port() && next.scheme() == base.scheme();
  return next.toString(QUrl::FullyEncoded);
}

QString Downloader::resolve_url(const std::string& path) const {
  const std::string prefix = o_.repo_type == RepoType::Dataset ? "/datasets/" : "/";
  return QString::fromStdString(endpoint_ + prefix + o_.repo_id + "/resolve/" + commit_ + "/") +
         QString::fromLatin1(QUrl::toPercentEncoding(QString::fromStdString(path), "/"));
}

json Downloader::list_repo() {
  const std::string kind = o_.repo_type == RepoType::Dataset ? "datasets" : "models";
  const QString url = QString::fromStdString(endpoint_ + "/api/" + kind + "/" + o_.repo_id + "/revision/") +
                      QString::fromLatin1(QUrl::toPercentEncoding(QString::fromStdString(o_.revision)));
  QByteArray body;
  std::string err;
  QString cur = url;
  int redirects = 0;
  bool auth = true;
  for (;;) {
    QNetworkReply* r = nam_->get(request(cur, auth));
    live_ = {r};
    QObject::connect(r, &QNetworkReply::readyRead, r, [&, r] {
      body += r->readAll();
      if (static_cast<size_t>(body.size()) > o_.max_json_bytes) {
        err = cur.toStdString() + ": the file listing is larger than " + format_bytes(double(o_.max_json_bytes));
        r->abort();
      }
    });
    QObject::connect(r, &QNetworkReply::finished, loop_, &QEventLoop::quit);
    loop_->exec();
    live_.clear();
    std::unique_ptr<QNetworkReply, void (*)(QNetworkReply*)> hold(r, [](QNetworkReply* x) { x->deleteLater(); });
    if (!err.empty()) throw Error(o_.repo_id, err);
    const int status = http_status(r);
    if (status >= 300 && status < 400) {
      bool same = false;
      cur = check_redirect(r, cur, redirects, same);
      auth = auth && same;
      body.clear();
      continue;
    }
    if (r->error() != QNetworkReply::NoError || status != 200)
      throw Error(o_.repo_id, hub_error(r, "listing " + url.toStdString()));
    body += r->readAll();
    break;
  }
  json j = parse_answer_json(body, "the file listing " + url.toStdString(), o_.max_json_bytes, o_.max_json_depth);
  check(j.is_object(), url.toStdString(), "the file listing is not a JSON object");
  return j;
}

void Downloader::progress() {
  if (o_.on_progress) o_.on_progress(prog_);
}

void Downloader::start_next() {
  while (error_.empty() && in_flight_ < o_.parallel && !queue_.empty()) {
    FileTask& t = *queue_.front();
    queue_.pop_front();
    ++in_flight_;
    try {
      head(t, resolve_url(t.path));
    } catch (const Error& e) {
      fail(e);
    }
  }
  if (in_flight_ == 0 && (queue_.empty() || !error_.empty())) loop_->quit();
}

// HEAD: etag, size, commit and where to GET (get_hf_file_metadata; relative redirects followed,
// an absolute one is the CDN location).
void Downloader::head(FileTask& t, const QString& url) {
  QNetworkReply* r = nam_->head(request(url, true));
  live_.push_back(r);
  QObject::connect(r, &QNetworkReply::finished, r, [this, &t, r, url] {
    r->deleteLater();
    std::erase(live_, r);
    if (!error_.empty()) return done(t);
    try {
      const int status = http_status(r);
      if (status >= 300 && status < 400) {
        const QByteArray loc = r->rawHeader("Location");
        if (!loc.isEmpty() && QUrl::fromEncoded(loc).isRelative()) {  // a renamed repo: follow
          bool same = false;
          return head(t, check_redirect(r, url, t.redirects, same));
        }
      } else if (r->error() != QNetworkReply::NoError || status < 200 || status >= 300) {
        throw Error(t.path, hub_error(r, "fetching " + t.path));
      }
      const QByteArray linked = r->rawHeader("X-Linked-Etag");
      t.etag = normalize_etag((linked.isEmpty() ? r->rawHeader("ETag") : linked).toStdString());
      check(is_lower_hex(t.etag, 40) || is_lower_hex(t.etag, 64), t.path,
            "the server's ETag \"" + t.etag.substr(0, 80) + "\" is not a git sha1 or sha256",
            "is HF_ENDPOINT a Hugging Face Hub?");
      const std::string commit = r->rawHeader("X-Repo-Commit").toStdString();
      check(commit.empty() || commit == commit_, t.path,
            "the server answered for commit " + commit.substr(0, 64) + ", not " + commit_,
            "the repo changed during the download: run again");
      const QByteArray linked_size = r->rawHeader("X-Linked-Size");
      auto size = parse_decimal_size(linked_size.isEmpty() ? r->rawHeader("Content-Length") : linked_size);
      check(size.has_value(), t.path, "the server sent no file size");
      check(*size <= kMaxFileBytes, t.path, "the server says the file has " + format_bytes(double(*size)));
      t.size = *size;
      check(o_.max_total_bytes - prog_.bytes_total >= t.size, o_.repo_id,
            "more than " + format_bytes(double(o_.max_total_bytes)) + " to download", "use --include to pick files");
      prog_.bytes_total += t.size;
      t.location = status >= 300 ? check_redirect(r, url, t.redirects, t.send_auth) : url;
      t.blob = repo_dir_ + "/blobs/" + t.etag;
      t.incomplete = t.blob + ".incomplete";
      if (file_exists(t.blob)) {  // another snapshot or an earlier run has it
        prog_.bytes_done += t.size;
        return finish(t);
      }
      if (fetching_.count(t.etag)) {  // the same blob under another name: wait for that download
        waiting_[t.etag].push_back(&t);
        return;
      }
      fetching_.insert(t.etag);
      make_dirs(repo_dir_ + "/blobs");
      t.lock = std::make_unique<BlobLock>(cache_ + "/.locks/" + repo_folder_name(o_.repo_id, o_.repo_type) + "/" +
                                          t.etag + ".lock");
      t.have = file_size(t.incomplete);
      if (t.have > t.size) {  // not ours to resume
        ::truncate(t.incomplete.c_str(), 0);
        t.have = 0;
      }
      prog_.bytes_done += t.have;
      if (t.have == t.size) {  // all there already (or an empty file: open("ab") creates it, as huggingface_hub's)
        QFile touch(QString::fromStdString(t.incomplete));
        if (!touch.open(QIODevice::WriteOnly | QIODevice::Append)) throw Error(t.incomplete, "cannot create");
        touch.close();
        return finish(t);
      }
      get(t, t.location);
    } catch (const Error& e) {
      fail(e);
      done(t);
    }
  });
}

void Downloader::get(FileTask& t, const QString& url) {
  QNetworkRequest req = request(url, t.send_auth);
  if (t.have > 0) req.setRawHeader("Range", QByteArray("bytes=") + QByteArray::number(qulonglong(t.have)) + "-");
  t.out = std::make_unique<QFile>(QString::fromStdString(t.incomplete));
  if (!t.out->open(QIODevice::WriteOnly | QIODevice::Append))
    throw Error(t.incomplete, "cannot write: " + t.out->errorString().toStdString());
  QNetworkReply* r = nam_->get(req);
  live_.push_back(r);
  prog_.current = t.path;
  auto started = std::make_shared<bool>(false);
  QObject::connect(r, &QNetworkReply::readyRead, r, [this, &t, r, started] {
    const int status = http_status(r);
    if (status != 200 && status != 206) return;  // a redirect or an error: read at the end
    if (!*started) {
      *started = true;
      if (status == 200 && t.have > 0) {  // the server ignored Range: start over
        prog_.bytes_done -= t.have;
        t.out->resize(0);
        t.have = 0;
      } else if (status == 206) {
        const std::string cr = r->rawHeader("Content-Range").toStdString();
        if (!starts_with(cr, "bytes " + std::to_string(t.have) + "-")) {
          fail(t.path + ": the server resumed at the wrong offset (Content-Range: " + cr.substr(0, 80) + ")");
          return;
        }
      }
    }
    const QByteArray chunk = r->readAll();
    if (t.have + static_cast<uint64_t>(chunk.size()) > t.size) {
      fail(t.path + ": the server sent more than the " + std::to_string(t.size) + " bytes it announced");
      return;
    }
    if (t.out->write(chunk) != chunk.size()) {
      fail(t.incomplete + ": write failed: " + t.out->errorString().toStdString() + " (is the disk full?)");
      return;
    }
    t.have += static_cast<uint64_t>(chunk.size());
    prog_.bytes_done += static_cast<uint64_t>(chunk.size());
    res_.bytes += static_cast<uint64_t>(chunk.size());
    progress();
  });
  QObject::connect(r, &QNetworkReply::finished, r, [this, &t, r, url] {
    r->deleteLater();
    std::erase(live_, r);
    t.out->close();
    if (!error_.empty()) return done(t);
    try {
      const int status = http_status(r);
      if (status >= 300 && status < 400) {
        bool same = false;
        const QString next = check_redirect(r, url, t.redirects, same);
        t.send_auth = t.send_auth && same;
        return get(t, next);
      }
      if (r->error() != QNetworkReply::NoError || (status != 200 && status != 206)) {
        std::string msg = hub_error(r, "downloading " + t.path);
        if (t.have > 0) msg += " (" + format_bytes(double(t.have)) + " kept in " + t.incomplete + ": run again to resume)";
        throw Error(t.path, msg);
      }
      check(t.have == t.size, t.path,
            "the transfer ended after " + std::to_string(t.have) + " of " + std::to_string(t.size) + " bytes",
            "run again to resume from " + t.incomplete);
      finish(t);
    } catch (const Error& e) {
      fail(e);
      done(t);
    }
  });
}

// The blob is complete: verify, rename into blobs/, link into snapshots/.
void Downloader::finish(FileTask& t) {
  try {
    if (!file_exists(t.blob)) {
      const bool sha1 = t.etag.size() == 40;
      const std::string got = file_digest(t.incomplete, sha1, t.size);
      if (got != t.etag) {
        ::unlink(t.incomplete.c_str());
        throw Error(t.path, std::string(sha1 ? "git-sha1" : "sha256") + " mismatch: the server's ETag is " + t.etag +
                                ", the downloaded bytes hash to " + got,
                    "the download was corrupted or the server is not the Hub; run again");
      }
      ::chmod(t.incomplete.c_str(), 0644);
      if (::rename(t.incomplete.c_str(), t.blob.c_str()) != 0)
        throw Error(t.blob, std::string("cannot move the downloaded file into place: ") + std::strerror(errno));
      ++res_.fetched;
    }
    make_dirs(dirname_of(t.pointer));
    std::string rel = "../../blobs/" + t.etag;  // from snapshots/<commit>/
    for (char c : t.path)
      if (c == '/') rel = "../" + rel;
    link_atomic(rel, t.pointer);
    ++res_.files;
    ++prog_.files_done;
    progress();
  } catch (const Error& e) {
    fail(e);
  }
  done(t);
}

void Downloader::done(FileTask& t) {
  t.lock.reset();
  t.out.reset();
  if (fetching_.erase(t.etag)) {  // t fetched this blob: the files waiting for it link it now
    std::vector<FileTask*> waiters = std::move(waiting_[t.etag]);
    waiting_.erase(t.etag);
    for (FileTask* w : waiters) {
      if (!error_.empty()) {
        done(*w);
        continue;
      }
      prog_.bytes_done += w->size;
      finish(*w);
    }
  }
  --in_flight_;
  start_next();
}

DownloadResult Downloader::run() {
  validate_repo_id(o_.repo_id);
  validate_revision(o_.revision);
  for (const auto& g : o_.include) check(!g.empty() && g.size() <= 1024, "--include", "an empty or overlong pattern");
  check(o_.parallel >= 1 && o_.parallel <= 16, "parallel", "must be 1 to 16");
  cache_ = o_.cache_dir.empty() ? hub_cache_dir() : o_.cache_dir;
  repo_dir_ = path_join(cache_, repo_folder_name(o_.repo_id, o_.repo_type));
  const bool offline = o_.offline.value_or(hub_offline());
  if (offline) {
    ResolvedRepo r;
    try {
      r = resolve_repo(o_.repo_id, o_.revision, o_.repo_type, cache_);
    } catch (const Error& e) {
      throw Error(e.context(), e.message() + "; offline mode (HF_HUB_OFFLINE) is on, so nothing was downloaded",
                  "unset HF_HUB_OFFLINE to download it");
    }
    res_.snapshot_dir = r.dir;
    res_.commit = r.commit;
    res_.offline = true;
    return res_;
  }
  check(QCoreApplication::instance() != nullptr, "grpo download", "internal: no QCoreApplication for the network");
  endpoint_ = checked_endpoint(o_.endpoint);
  token_ = checked_token(o_.token);

  QNetworkAccessManager nam;
  QEventLoop loop;
  nam_ = &nam;
  loop_ = &loop;

  const json listing = list_repo();
  const auto sha = listing.find("sha");
  check(sha != listing.end() && sha->is_string() && is_commit_hash(sha->get<std::string>()), o_.repo_id,
        "the file listing has no 40-hex commit \"sha\"", "is HF_ENDPOINT a Hugging Face Hub?");
  commit_ = sha->get<std::string>();
  const auto sib = listing.find("siblings");
  check(sib != listing.end() && sib->is_array(), o_.repo_id, "the file listing has no \"siblings\" list");
  check(sib->size() <= o_.max_files, o_.repo_id,
        "the repo lists " + std::to_string(sib->size()) + " files, more than " + std::to_string(o_.max_files));
  const std::string snapshot = repo_dir_ + "/snapshots/" + commit_;
  std::map<std::string, bool> seen;
  for (const auto& s : *sib) {
    check(s.is_object() && s.contains("rfilename") && s["rfilename"].is_string(), o_.repo_id,
          "a sibling without a \"rfilename\" string");
    const std::string name = s["rfilename"].get<std::string>();
    try {
      validate_repo_file_path(name);
    } catch (const Error& e) {
      throw Error(o_.repo_id, std::string("refusing the server's file list: ") + e.what(),
                  "a Hub repo never lists such a path; is HF_ENDPOINT trustworthy?");
    }
    check(!seen[name], o_.repo_id, "the file list names \"" + name + "\" twice");
    seen[name] = true;
    bool wanted = o_.include.empty();
    for (const auto& g : o_.include) wanted = wanted || fnmatch(g.back() == '/' ? g + "*" : g, name);
    if (!wanted) continue;
    auto t = std::make_unique<FileTask>();
    t->path = name;
    t->pointer = snapshot + "/" + name;
    tasks_.push_back(std::move(t));
  }
  check(!tasks_.empty() || o_.include.empty(), o_.repo_id,
        "no file matches --include " + join(o_.include, " "), "the repo has: " + [&] {
          std::vector<std::string> names;
          for (const auto& [n, _] : seen)
            if (names.size() < 20) names.push_back(n);
          return join(names, ", ");
        }());
  make_dirs(snapshot);
  prog_.files_total = tasks_.size();
  for (auto& t : tasks_) {
    // file_download.py: a pointer that exists at this commit is used as is (no request).
    struct stat st;
    if (::stat(t->pointer.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      ++res_.files;
      ++prog_.files_done;
      continue;
    }
    queue_.push_back(t.get());
  }
  progress();
  if (!queue_.empty()) {
    start_next();
    if (in_flight_ > 0) loop.exec();
  }
  nam_ = nullptr;
  loop_ = nullptr;
  if (!error_.empty()) throw Error(o_.repo_id, error_);
  // _snapshot_download.py: refs/<revision> holds the commit (not for a commit revision).
  if (o_.revision != commit_) {
    const std::string ref = repo_dir_ + "/refs/" + o_.revision;
    make_dirs(dirname_of(ref));
    if (!file_exists(ref) || read_file(ref) != commit_) write_file_atomic(ref, commit_);
  }
  res_.snapshot_dir = snapshot;
  res_.commit = commit_;
  return res_;
}

}  // namespace

DownloadResult download_snapshot(const DownloadOptions& options) {
  Downloader d(options);
  try {
    return d.run();
  } catch (const Error& e) {
    rethrow_without_token(e, d.token());
  }
}

}  // namespace grpo::hub
