// push_folder over QNetworkAccessManager: scan and hash the folder, create the repo, ask the Hub
// how each file travels (preupload), send the LFS objects it does not have (basic or multipart,
// then verify), and make one commit. One request at a time; see hub_upload.h for the API shapes.
#include "core/hub/hub_upload.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include <QCryptographicHash>
#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>
#include <QIODevice>
#include <QNetworkAccessManager>
#include <QThread>
#include <QUrl>

#include <nlohmann/json.hpp>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/strings.h"
#include "core/hub/hub_http.h"

namespace grpo::hub {
namespace {

using json = nlohmann::json;

constexpr size_t kPreuploadChunk = 256;   // files per preupload call (as huggingface_hub)
constexpr size_t kBatchChunk = 256;       // objects per LFS batch call
constexpr int kSampleBytes = 512;         // the preupload sample
constexpr size_t kMaxUrlBytes = 8192;
constexpr size_t kMaxEtagBytes = 1024;
constexpr size_t kMaxActionHeaders = 64;  // headers a basic or verify action may ask us to send

struct LocalFile {
  std::string path;       // in the repo ('/'-separated, relative)
  std::string abs;        // on disk
  uint64_t size = 0;
  std::string sha256;     // hex
  QByteArray sample;      // the first 512 bytes
  bool lfs = false;       // the Hub's answer (empty files are always regular)
  bool skip = false;      // the Hub has this content at this path, or ignores the path
};

// A window [from, from+len) of a file as a seekable device, so a part of a multi-GB file goes out
// without being read into memory, and a retry (or Qt's own resend) can rewind it.
class FileSlice : public QIODevice {
public:
  FileSlice(const std::string& path, uint64_t from, uint64_t len)
      : file_(QString::fromStdString(path)), from_(static_cast<qint64>(from)), len_(static_cast<qint64>(len)) {
    if (!file_.open(QIODevice::ReadOnly) || !file_.seek(from_))
      throw Error(path, "cannot read: " + file_.errorString().toStdString());
    QIODevice::open(QIODevice::ReadOnly | QIODevice::Unbuffered);
  }
  bool isSequential() const override { return false; }
  qint64 size() const override { return len_; }
  bool seek(qint64 pos) override {
    if (pos < 0 || pos > len_ || !file_.seek(from_ + pos)) return false;
    return QIODevice::seek(pos);
  }
  bool atEnd() const override { return pos() >= len_; }
  qint64 bytesAvailable() const override { return len_ - pos() + QIODevice::bytesAvailable(); }

protected:
  qint64 readData(char* data, qint64 max) override {
    const qint64 left = len_ - pos();
    if (left <= 0) return 0;
    return file_.read(data, std::min(max, left));
  }
  qint64 writeData(const char*, qint64) override { return -1; }

private:
  QFile file_;
  qint64 from_, len_;
};

std::string hex_of(const QByteArray& b) { return b.toHex().toStdString(); }

// git's blob id ("blob <n>\0" + data), what the Hub reports as a regular file's oid.
std::string git_blob_sha1(const QByteArray& data) {
  QCryptographicHash h(QCryptographicHash::Sha1);
  h.addData(QByteArray("blob ") + QByteArray::number(data.size()) + QByteArray(1, '\0'));
  h.addData(data);
  return hex_of(h.result());
}

QString enc(const std::string& s) { return QString::fromLatin1(QUrl::toPercentEncoding(QString::fromStdString(s))); }

bool is_token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

class Pusher {
public:
  explicit Pusher(const PushOptions& o) : o_(o) {}
  PushResult run();
  const std::string& token() const { return token_; }

private:
  std::string kind() const { return o_.repo_type == RepoType::Dataset ? "dataset" : "model"; }
  QString api(const std::string& tail) const {
    return QString::fromStdString(endpoint_ + "/api/" + kind() + "s/" + o_.repo_id + tail);
  }
  QString rev_tail(const std::string& route) const {  // "/preupload/<rev>[?create_pr=1]"
    return api("/" + route + "/") + enc(o_.revision) + (o_.create_pr ? "?create_pr=1" : "");
  }
  QNetworkRequest request(const QString& url, bool auth) const {
    return hub_request(url, auth ? token_ : std::string(), o_.idle_timeout_ms);
  }
  QNetworkRequest json_request(const QString& url, const char* content_type = "application/json") const {
    QNetworkRequest r = request(url, true);
    r.setRawHeader("Content-Type", content_type);
    return r;
  }
  HttpAnswer call(HttpExchange x, bool idempotent, const std::function<std::unique_ptr<QIODevice>()>& open_body = {});
  [[noreturn]] void fail(const std::string& what, const HttpAnswer& a) const;
  json answer_json(const std::string& what, const HttpAnswer& a) const;
  // An idempotent POST of `body` whose 200 answer is an object holding the list `key` (preupload,
  // LFS batch); anything else fails naming `step` or `what`.
  json post_for_list(QNetworkRequest request, const json& body, const std::string& step, const std::string& what,
                     const char* key);
  QString checked_url(const json& v, const std::string& what) const;
  void add_action_headers(QNetworkRequest& r, const json& action, const std::string& what) const;
  void progress() {
    if (o_.on_progress) o_.on_progress(prog_);
  }

  void scan();
  void create_repo();
  bool repo_exists(const std::string& kind_plural);
  void ensure_branch();
  void preupload();
  void upload_lfs();
  void upload_object(const LocalFile& f, const json& actions);
  void upload_basic(const LocalFile& f, const json& upload);
  void upload_multipart(const LocalFile& f, const json& upload, uint64_t chunk);
  void verify(const LocalFile& f, const json& verify);
  void commit();

  PushOptions o_;
  std::string endpoint_, token_, repo_url_;
  QNetworkAccessManager* nam_ = nullptr;
  std::vector<LocalFile> files_;
  PushProgress prog_;
  PushResult res_;
};

HttpAnswer Pusher::call(HttpExchange x, bool idempotent, const std::function<std::unique_ptr<QIODevice>()>& open_body) {
  x.max_answer_bytes = o_.max_json_bytes;  // every answer we read is JSON (or nothing)
  for (int attempt = 0;; ++attempt) {
    std::unique_ptr<QIODevice> body;
    if (open_body) {
      body = open_body();
      x.device = body.get();
    }
    HttpAnswer a = http_exchange(*nam_, x);
    const bool server_error = a.status == 429 || a.status == 500 || a.status == 502 || a.status == 503 || a.status == 504;
    if (!idempotent || !(a.transport_failed() || server_error) || attempt >= o_.max_retries) return a;
    ++res_.retries;
    const int64_t wait = std::min<int64_t>(int64_t(o_.retry_base_ms) << std::min(attempt, 20), o_.retry_max_ms);
    if (wait > 0) QThread::msleep(static_cast<unsigned long>(wait));
  }
}

// A failed call, in words: what failed, the Hub's answer, and what to do.
void Pusher::fail(const std::string& what, const HttpAnswer& a) const {
  const std::string repo = kind() + " repo " + o_.repo_id;
  std::string msg = what + ": " + describe_answer(a, endpoint_);
  std::string hint;
  const std::string code = a.header("X-Error-Code").left(64).toStdString();
  if (a.status == 401) {
    msg += ": the Hub refused the token";
    hint = "check HF_TOKEN, or log in again with `huggingface-cli login` (the token file under HF_HOME); "
           "pushing needs a token with write access";
  } else if (a.status == 403) {
    msg += ": the token may not write to " + repo;
    hint = "use a token with write access to this repo or its namespace (HF_TOKEN or `huggingface-cli login`)";
  } else if (code == "RepoNotFound") {
    msg += ": " + repo + " does not exist, or this token cannot see it";
  } else if (code == "RevisionNotFound") {
    msg += ": revision \"" + o_.revision + "\" of " + repo + " does not exist";
  } else if (a.status == 0 || a.transport_failed() || a.status >= 500 || a.status == 429) {
    hint = "tried " + std::to_string(o_.max_retries + 1) + " times; run the same command again later "
           "(objects already uploaded are not sent twice)";
  }
  if (what.rfind("committing", 0) != 0) msg += "; nothing was committed";
  throw Error(o_.repo_id, msg, hint);
}

json Pusher::post_for_list(QNetworkRequest request, const json& body, const std::string& step, const std::string& what,
                           const char* key) {
  HttpExchange x;
  x.verb = "POST";
  x.request = std::move(request);
  x.body = QByteArray::fromStdString(body.dump());
  const HttpAnswer a = call(x, true);
  if (a.status != 200) fail(step, a);
  json j = answer_json(what, a);
  check(j.is_object() && j.contains(key) && j[key].is_array(), o_.repo_id,
        what + ": expected an object with a \"" + key + "\" list; nothing was committed", "is HF_ENDPOINT a Hugging Face Hub?");
  return j;
}

json Pusher::answer_json(const std::string& what, const HttpAnswer& a) const {
  check(!a.too_large, o_.repo_id,
        what + " is larger than " + format_bytes(double(o_.max_json_bytes)) + "; nothing was committed",
        "is HF_ENDPOINT a Hugging Face Hub?");
  return parse_answer_json(a.body, o_.repo_id + ": " + what, o_.max_json_bytes, o_.max_json_depth);
}

// A URL from an answer: a string, not too long, http(s), and no step down to http from an https Hub.
QString Pusher::checked_url(const json& v, const std::string& what) const {
  check(v.is_string() && !v.get_ref<const std::string&>().empty() && v.get_ref<const std::string&>().size() <= kMaxUrlBytes,
        o_.repo_id, what + ": expected a URL string of at most " + std::to_string(kMaxUrlBytes) + " bytes");
  const QString s = QString::fromStdString(v.get<std::string>());
  const QUrl u = QUrl::fromEncoded(s.toUtf8(), QUrl::StrictMode);
  const bool hub_https = starts_with(endpoint_, "https://");
  check(u.isValid() && !u.host().isEmpty() && (u.scheme() == "https" || (u.scheme() == "http" && !hub_https)), o_.repo_id,
        what + ": refusing the URL " + url_for_message(s), "only http(s), and no step down from an https Hub to http");
  return u.toString(QUrl::FullyEncoded);
}

// A basic or verify action's "header" object: header names and values the server wants sent.
void Pusher::add_action_headers(QNetworkRequest& r, const json& action, const std::string& what) const {
  const auto h = action.find("header");
  if (h == action.end() || h->is_null()) return;
  check(h->is_object() && h->size() <= kMaxActionHeaders, o_.repo_id,
        what + ": \"header\" must be an object of at most " + std::to_string(kMaxActionHeaders) + " strings");
  for (const auto& [k, v] : h->items()) {
    if (k == "chunk_size") continue;
    check(!k.empty() && k.size() <= 128 && std::all_of(k.begin(), k.end(), is_token_char), o_.repo_id,
          what + ": a header name that is not a token");
    check(v.is_string() && v.get_ref<const std::string&>().size() <= kMaxUrlBytes, o_.repo_id,
          what + ": header \"" + k + "\" is not a string of at most " + std::to_string(kMaxUrlBytes) + " bytes");
    for (char c : v.get_ref<const std::string&>())
      check(c >= ' ' && c != 127, o_.repo_id, what + ": header \"" + k + "\" holds a control character");
    r.setRawHeader(QByteArray::fromStdString(k), QByteArray::fromStdString(v.get<std::string>()));
  }
}

// ---- 1. the folder ----
void Pusher::scan() {
  check(is_directory(o_.folder), o_.folder, "is not a folder", "push a folder written by `grpo export`");
  const QString root = QDir(QString::fromStdString(o_.folder)).absolutePath();
  std::string prefix = o_.path_in_repo;  // upload_folder's path_in_repo: the folder's place in the repo
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (!prefix.empty()) {
    try {
      validate_repo_file_path(prefix);
    } catch (const Error& e) {
      throw Error(o_.repo_id, std::string("path_in_repo: ") + e.what(), "a folder inside the repo, e.g. last-checkpoint");
    }
  }
  std::vector<std::pair<std::string, std::string>> found;  // repo path, absolute path
  QDirIterator it(root, QDir::Files | QDir::Hidden | QDir::NoDotAndDotDot, QDirIterator::Subdirectories);
  while (it.hasNext()) {
    const QString abs = it.next();
    const std::string rel = QDir(root).relativeFilePath(abs).toStdString();
    // upload_folder's default ignore list: git's own folder and huggingface_hub's local metadata.
    if (rel == ".git" || starts_with(rel, ".git/") || rel.find("/.git/") != std::string::npos ||
        starts_with(rel, ".cache/huggingface/"))
      continue;
    check(found.size() < o_.max_files, o_.folder, "holds more than " + std::to_string(o_.max_files) + " files",
          "push the exported folder itself, not a folder above it");
    try {
      validate_repo_file_path(rel);
    } catch (const Error& e) {
      throw Error(o_.folder, std::string("a file name the Hub cannot hold: ") + e.what());
    }
    found.emplace_back(prefix.empty() ? rel : prefix + "/" + rel, abs.toStdString());
  }
  check(!found.empty(), o_.folder, "has no files to push");
  std::sort(found.begin(), found.end());
  uint64_t total = 0;
  for (const auto& [rel, abs] : found) {
    const auto size = QFileInfo(QString::fromStdString(abs)).size();
    check(size >= 0, abs, "cannot read its size");
    check(o_.max_total_bytes - total >= static_cast<uint64_t>(size), o_.folder,
          "holds more than " + format_bytes(double(o_.max_total_bytes)));
    total += static_cast<uint64_t>(size);
  }
  prog_ = {"hashing", 0, found.size(), 0, total, {}};
  progress();
  for (const auto& [rel, abs] : found) {
    LocalFile f;
    f.path = rel;
    f.abs = abs;
    QFile in(QString::fromStdString(abs));
    check(in.open(QIODevice::ReadOnly), abs, "cannot read: " + in.errorString().toStdString());
    QCryptographicHash h(QCryptographicHash::Sha256);
    prog_.current = rel;
    for (;;) {
      const QByteArray chunk = in.read(4 << 20);
      check(in.error() == QFile::NoError, abs, "read failed: " + in.errorString().toStdString());
      if (chunk.isEmpty()) break;
      if (f.sample.size() < kSampleBytes) f.sample += chunk.left(kSampleBytes - f.sample.size());
      h.addData(chunk);
      f.size += static_cast<uint64_t>(chunk.size());
      prog_.bytes_done += static_cast<uint64_t>(chunk.size());
      check(prog_.bytes_done <= total, abs, "grew while it was being read", "push a folder nothing is writing to");
    }
    f.sha256 = hex_of(h.result());
    ++prog_.files_done;
    progress();
    files_.push_back(std::move(f));
  }
  res_.files = files_.size();
}

// ---- 2. the repo ----
bool Pusher::repo_exists(const std::string& kind_plural) {
  HttpExchange x;
  x.request = request(QString::fromStdString(endpoint_ + "/api/" + kind_plural + "/" + o_.repo_id), true);
  const HttpAnswer a = call(x, true);
  if (a.status == 200) return true;
  if (a.status == 404 || a.status == 401) return false;  // the Hub answers 401 for a repo it hides
  fail("looking up " + kind_plural + "/" + o_.repo_id, a);
}

void Pusher::create_repo() {
  const auto slash = o_.repo_id.find('/');
  json body = {{"name", slash == std::string::npos ? o_.repo_id : o_.repo_id.substr(slash + 1)},
               {"private", o_.private_repo}};
  if (slash != std::string::npos) body["organization"] = o_.repo_id.substr(0, slash);
  if (o_.repo_type == RepoType::Dataset) body["type"] = "dataset";
  HttpExchange x;
  x.verb = "POST";
  x.request = json_request(QString::fromStdString(endpoint_ + "/api/repos/create"));
  x.body = QByteArray::fromStdString(body.dump());
  const HttpAnswer a = call(x, true);  // a retried create that had gone through answers 409: fine
  if (a.status == 200 || a.status == 201) {
    res_.created = true;
    return;
  }
  if (a.status == 409 || a.status == 403) {  // exists (409), or no right to create in the namespace (403)
    const std::string mine = kind() + "s";
    if (repo_exists(mine)) return;
    if (a.status == 403) fail("creating " + kind() + " repo " + o_.repo_id, a);
    for (const std::string other : {"models", "datasets", "spaces"}) {
      if (other == mine || !repo_exists(other)) continue;
      const std::string what = other.substr(0, other.size() - 1);
      throw Error(o_.repo_id,
                  "the name " + o_.repo_id + " is taken by a " + what + " repo on " + endpoint_ + ", so no " + kind() +
                      " repo of that name can be created; nothing was pushed",
                  "choose another REPO_ID" +
                      std::string(what == "dataset" ? " (or --repo-type dataset to push into that dataset)" : ""));
    }
    throw Error(o_.repo_id,
                "the Hub says a repo named " + o_.repo_id + " exists (HTTP 409) but it cannot be read with this token; "
                "nothing was pushed",
                "check that the token (HF_TOKEN or `huggingface-cli login`) belongs to the repo's owner");
  }
  if (a.status == 400 || a.status == 422) {
    throw Error(o_.repo_id, "the Hub refused to create the repo: " + describe_answer(a, endpoint_),
                "a repo name is letters, digits, '-', '_' and '.', at most 96 characters");
  }
  fail("creating " + kind() + " repo " + o_.repo_id, a);
}

void Pusher::ensure_branch() {
  if (o_.revision == "main" || starts_with(o_.revision, "refs/")) return;
  HttpExchange x;
  x.verb = "POST";
  x.request = json_request(api("/branch/") + enc(o_.revision));
  x.body = "{}";
  const HttpAnswer a = call(x, true);
  if (a.status == 200 || a.status == 201 || a.status == 409) return;  // created, or there already
  fail("creating branch \"" + o_.revision + "\"", a);
}

// ---- 3. how each file travels ----
void Pusher::preupload() {
  prog_ = {"preupload", 0, files_.size(), 0, 0, {}};
  progress();
  for (size_t begin = 0; begin < files_.size(); begin += kPreuploadChunk) {
    const size_t end = std::min(files_.size(), begin + kPreuploadChunk);
    std::map<std::string, LocalFile*> asked;
    json list = json::array();
    for (size_t i = begin; i < end; ++i) {
      LocalFile& f = files_[i];
      list.push_back({{"path", f.path}, {"sample", f.sample.toBase64().toStdString()}, {"size", f.size}});
      asked[f.path] = &f;
    }
    const std::string what = "the preupload answer";
    const json j = post_for_list(json_request(rev_tail("preupload")), json{{"files", list}},
                                 "asking the Hub how to upload the files (preupload)", what, "files");
    std::set<std::string> answered;
    for (const auto& e : j["files"]) {
      check(e.is_object() && e.contains("path") && e["path"].is_string() && e.contains("uploadMode") &&
                e["uploadMode"].is_string(),
            o_.repo_id, what + ": an entry without a \"path\" and an \"uploadMode\" string; nothing was committed");
      const std::string path = e["path"].get<std::string>();
      const std::string mode = e["uploadMode"].get<std::string>();
      auto it = asked.find(path);
      check(it != asked.end(), o_.repo_id, what + ": names \"" + path.substr(0, 200) + "\", which was not asked about");
      check(answered.insert(path).second, o_.repo_id, what + ": names \"" + path + "\" twice");
      check(mode == "lfs" || mode == "regular", o_.repo_id,
            what + ": uploadMode of \"" + path + "\" is \"" + mode.substr(0, 40) + "\", expected \"lfs\" or \"regular\"");
      LocalFile& f = *it->second;
      f.lfs = mode == "lfs" && f.size > 0;  // an empty file cannot go through LFS: it goes inline
      const auto ignore = e.find("shouldIgnore");
      check(ignore == e.end() || ignore->is_boolean() || ignore->is_null(), o_.repo_id,
            what + ": shouldIgnore of \"" + path + "\" is not a boolean");
      if (ignore != e.end() && *ignore == true) f.skip = true;
      const auto oid = e.find("oid");
      check(oid == e.end() || oid->is_null() || (oid->is_string() && oid->get_ref<const std::string&>().size() <= 128),
            o_.repo_id, what + ": oid of \"" + path + "\" is not a short string");
      if (f.skip || oid == e.end() || oid->is_null()) continue;
      const std::string remote = oid->get<std::string>();
      if (f.lfs) {
        f.skip = remote == f.sha256;
      } else if (f.size <= o_.max_regular_file_bytes) {
        QFile in(QString::fromStdString(f.abs));
        check(in.open(QIODevice::ReadOnly), f.abs, "cannot read: " + in.errorString().toStdString());
        f.skip = remote == git_blob_sha1(in.readAll());
      }
      res_.unchanged += f.skip;
    }
    for (const auto& [path, f] : asked)
      check(answered.count(path), o_.repo_id, what + ": says nothing about \"" + path + "\"; nothing was committed",
            "is HF_ENDPOINT a Hugging Face Hub?");
  }
  for (const LocalFile& f : files_)
    if (!f.skip && !f.lfs)
      check(f.size <= o_.max_regular_file_bytes, f.abs,
            "the Hub asks for this " + format_bytes(double(f.size)) + " file inline in the commit, more than " +
                format_bytes(double(o_.max_regular_file_bytes)),
            "a file this large should go through LFS; is HF_ENDPOINT a Hugging Face Hub?");
}

// ---- 4. LFS objects ----
void Pusher::upload_lfs() {
  std::map<std::string, const LocalFile*> by_oid;  // one object per content, whatever its paths
  for (const LocalFile& f : files_)
    if (f.lfs && !f.skip) by_oid.emplace(f.sha256, &f);
  if (by_oid.empty()) return;
  uint64_t total = 0;
  for (const auto& [oid, f] : by_oid) total += f->size;  // bounded by max_total_bytes in scan()
  prog_ = {"uploading", 0, by_oid.size(), 0, total, {}};
  progress();
  const std::string prefix = o_.repo_type == RepoType::Dataset ? "/datasets/" : "/";
  const QString batch_url = QString::fromStdString(endpoint_ + prefix + o_.repo_id + ".git/info/lfs/objects/batch");
  std::vector<const LocalFile*> all;
  for (const auto& [oid, f] : by_oid) all.push_back(f);
  for (size_t begin = 0; begin < all.size(); begin += kBatchChunk) {
    const size_t end = std::min(all.size(), begin + kBatchChunk);
    json objects = json::array();
    std::map<std::string, const LocalFile*> asked;
    for (size_t i = begin; i < end; ++i) {
      objects.push_back({{"oid", all[i]->sha256}, {"size", all[i]->size}});
      asked[all[i]->sha256] = all[i];
    }
    const json body = {{"operation", "upload"},
                       {"transfers", {"basic", "multipart"}},
                       {"objects", objects},
                       {"hash_algo", "sha256"},
                       {"ref", {{"name", o_.revision}}}};
    QNetworkRequest request = json_request(batch_url, "application/vnd.git-lfs+json");
    request.setRawHeader("Accept", "application/vnd.git-lfs+json");
    const std::string what = "the LFS batch answer";
    const json j = post_for_list(request, body, "asking the Hub's LFS store where to upload (LFS batch)", what, "objects");
    if (j.contains("transfer") && !j["transfer"].is_null())
      check(j["transfer"] == "basic" || j["transfer"] == "multipart", o_.repo_id,
            what + ": transfer \"" + j["transfer"].dump().substr(0, 40) + "\" is neither \"basic\" nor \"multipart\"");
    std::map<std::string, const json*> answer;
    for (const auto& obj : j["objects"]) {
      check(obj.is_object() && obj.contains("oid") && obj["oid"].is_string(), o_.repo_id,
            what + ": an object without an \"oid\" string; nothing was committed");
      const std::string oid = obj["oid"].get<std::string>();
      check(asked.count(oid), o_.repo_id,
            what + ": names object \"" + oid.substr(0, 80) + "\", which was not asked for; nothing was committed",
            "the server does not follow the LFS batch API; is HF_ENDPOINT a Hugging Face Hub?");
      check(answer.emplace(oid, &obj).second, o_.repo_id, what + ": names object " + oid + " twice");
      const LocalFile& f = *asked[oid];
      check(obj.contains("size") && obj["size"].is_number_unsigned() && obj["size"].get<uint64_t>() == f.size, o_.repo_id,
            what + ": object " + oid + " (" + f.path + ") does not have our size " + std::to_string(f.size));
      if (obj.contains("error") && !obj["error"].is_null()) {
        const json& e = obj["error"];
        const std::string m = e.is_object() && e.contains("message") && e["message"].is_string()
                                  ? e["message"].get<std::string>().substr(0, 300) : std::string("no message");
        const std::string c = e.is_object() && e.contains("code") ? e["code"].dump().substr(0, 10) : std::string("?");
        throw Error(o_.repo_id, "the Hub's LFS store refused " + f.path + " (code " + c + ": " + m + "); nothing was committed");
      }
    }
    for (const auto& [oid, f] : asked)
      check(answer.count(oid), o_.repo_id, what + ": says nothing about " + f->path + "; nothing was committed",
            "is HF_ENDPOINT a Hugging Face Hub?");
    for (const auto& [oid, obj] : answer) {
      const LocalFile& f = *asked[oid];
      prog_.current = f.path;
      const auto actions = obj->find("actions");
      if (actions == obj->end() || actions->is_null()) {  // the Hub has these bytes
        ++res_.lfs_present;
        prog_.bytes_done += f.size;
      } else {
        upload_object(f, *actions);
        ++res_.lfs_uploaded;
      }
      ++prog_.files_done;
      progress();
    }
  }
}

void Pusher::upload_object(const LocalFile& f, const json& actions) {
  const std::string what = "the LFS batch answer for " + f.path;
  check(actions.is_object(), o_.repo_id, what + ": \"actions\" is not an object");
  const auto up = actions.find("upload");
  const auto ver = actions.find("verify");
  if (up != actions.end() && !up->is_null()) {
    check(up->is_object() && up->contains("href"), o_.repo_id, what + ": the upload action has no \"href\"");
    const auto header = up->find("header");
    check(header == up->end() || header->is_null() || header->is_object(), o_.repo_id,
          what + ": the upload action's \"header\" is not an object");
    if (header != up->end() && header->is_object() && header->contains("chunk_size")) {
      const json& cs = (*header)["chunk_size"];
      check(cs.is_string(), o_.repo_id, what + ": chunk_size is not a string");
      const auto chunk = parse_decimal_size(QByteArray::fromStdString(cs.get<std::string>()));
      check(chunk.has_value() && *chunk > 0, o_.repo_id,
            what + ": chunk_size \"" + cs.get<std::string>().substr(0, 40) + "\" is not a positive byte count");
      upload_multipart(f, *up, *chunk);
    } else {
      upload_basic(f, *up);
    }
  }
  if (ver != actions.end() && !ver->is_null()) verify(f, *ver);
}

void Pusher::upload_basic(const LocalFile& f, const json& upload) {
  const std::string what = "uploading " + f.path;
  const QString href = checked_url(upload["href"], "the upload URL of " + f.path);
  HttpExchange x;
  x.verb = "PUT";
  x.request = request(href, same_origin(href, QString::fromStdString(endpoint_)));
  add_action_headers(x.request, upload, "the upload action of " + f.path);
  x.request.setHeader(QNetworkRequest::ContentLengthHeader, QVariant::fromValue<qulonglong>(f.size));
  const uint64_t base = prog_.bytes_done;
  x.on_sent = [this, base](uint64_t sent) {
    prog_.bytes_done = base + sent;
    progress();
  };
  const HttpAnswer a = call(x, true, [&] { return std::make_unique<FileSlice>(f.abs, 0, f.size); });
  if (a.status < 200 || a.status >= 300 || a.transport_failed()) fail(what + " to " + url_for_message(href), a);
  prog_.bytes_done = base + f.size;
  res_.lfs_bytes_sent += f.size;
}

void Pusher::upload_multipart(const LocalFile& f, const json& upload, uint64_t chunk) {
  const std::string what = "the multipart upload of " + f.path;
  const json& header = upload["header"];
  const uint64_t parts = f.size / chunk + (f.size % chunk != 0);
  check(parts >= 1 && parts <= o_.max_parts, o_.repo_id,
        what + ": chunk_size " + std::to_string(chunk) + " makes " + std::to_string(parts) + " parts, more than " +
            std::to_string(o_.max_parts));
  check(header.size() <= parts + kMaxActionHeaders, o_.repo_id, what + ": the upload action has too many headers");
  std::vector<QString> urls(parts);
  for (const auto& [k, v] : header.items()) {
    if (k.empty() || k.size() > 6 || !std::all_of(k.begin(), k.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;  // chunk_size and anything else that is not a part number
    const uint64_t n = std::stoull(k);
    check(n >= 1 && n <= parts, o_.repo_id,
          what + ": part " + k + " is outside 1.." + std::to_string(parts) + " (the file has " + std::to_string(f.size) +
              " bytes, chunk_size " + std::to_string(chunk) + ")");
    check(urls[n - 1].isEmpty(), o_.repo_id, what + ": part " + k + " is given twice");
    urls[n - 1] = checked_url(v, what + ", URL of part " + k);
  }
  for (uint64_t i = 0; i < parts; ++i)
    check(!urls[i].isEmpty(), o_.repo_id,
          what + ": no URL for part " + std::to_string(i + 1) + " of " + std::to_string(parts) +
              " (the number of parts must be the file size divided by chunk_size, rounded up)");
  const QString completion = checked_url(upload["href"], what + ", completion URL");
  json done = json::array();
  for (uint64_t i = 0; i < parts; ++i) {
    const uint64_t from = i * chunk;  // i < parts <= max_parts, from < size: no overflow
    const uint64_t len = std::min(chunk, f.size - from);
    HttpExchange x;
    x.verb = "PUT";
    x.request = request(urls[i], same_origin(urls[i], QString::fromStdString(endpoint_)));
    x.request.setHeader(QNetworkRequest::ContentLengthHeader, QVariant::fromValue<qulonglong>(len));
    const uint64_t base = prog_.bytes_done;
    x.on_sent = [this, base](uint64_t sent) {
      prog_.bytes_done = base + sent;
      progress();
    };
    const HttpAnswer a = call(x, true, [&] { return std::make_unique<FileSlice>(f.abs, from, len); });
    const std::string part = "part " + std::to_string(i + 1) + " of " + std::to_string(parts) + " of " + f.path;
    if (a.status < 200 || a.status >= 300 || a.transport_failed()) fail("uploading " + part, a);
    const QByteArray etag = a.header("ETag");
    check(!etag.isEmpty() && static_cast<size_t>(etag.size()) <= kMaxEtagBytes, o_.repo_id,
          "the storage server sent no usable ETag for " + part + "; nothing was committed",
          "the multipart upload cannot be completed without it; run again");
    for (char c : etag) check(c >= ' ' && c != 127, o_.repo_id, "the ETag of " + part + " holds a control character");
    done.push_back({{"partNumber", i + 1}, {"etag", etag.toStdString()}});
    prog_.bytes_done = base + len;
    res_.lfs_bytes_sent += len;
    ++res_.parts;
    progress();
  }
  HttpExchange x;
  x.verb = "POST";
  x.request = request(completion, same_origin(completion, QString::fromStdString(endpoint_)));
  x.request.setRawHeader("Content-Type", "application/vnd.git-lfs+json");
  x.request.setRawHeader("Accept", "application/vnd.git-lfs+json");
  x.body = QByteArray::fromStdString(json{{"oid", f.sha256}, {"parts", done}}.dump());
  const HttpAnswer a = call(x, true);
  if (a.status < 200 || a.status >= 300) fail("completing " + what, a);
}

void Pusher::verify(const LocalFile& f, const json& v) {
  check(v.is_object() && v.contains("href"), o_.repo_id, "the verify action of " + f.path + " has no \"href\"");
  const QString href = checked_url(v["href"], "the verify URL of " + f.path);
  HttpExchange x;
  x.verb = "POST";
  x.request = request(href, same_origin(href, QString::fromStdString(endpoint_)));
  add_action_headers(x.request, v, "the verify action of " + f.path);
  x.request.setRawHeader("Content-Type", "application/vnd.git-lfs+json");
  x.request.setRawHeader("Accept", "application/vnd.git-lfs+json");
  x.body = QByteArray::fromStdString(json{{"oid", f.sha256}, {"size", f.size}}.dump());
  const HttpAnswer a = call(x, true);
  if (a.status < 200 || a.status >= 300) fail("verifying " + f.path + " in the Hub's LFS store", a);
}

// ---- 5. the commit ----
void Pusher::commit() {
  std::vector<const LocalFile*> ops;
  for (const LocalFile& f : files_)
    if (!f.skip) ops.push_back(&f);
  if (ops.empty()) {
    res_.no_changes = true;
    return;
  }
  prog_ = {"committing", 0, ops.size(), 0, 0, {}};
  progress();
  const std::string summary = o_.commit_message.empty() ? "Upload folder with GRPO Studio" : o_.commit_message;
  QByteArray body = QByteArray::fromStdString(
                        json{{"key", "header"}, {"value", {{"summary", summary}, {"description", o_.commit_description}}}}.dump()) +
                    "\n";
  for (const LocalFile* f : ops) {
    json line;
    if (f->lfs) {
      line = {{"key", "lfsFile"}, {"value", {{"path", f->path}, {"algo", "sha256"}, {"oid", f->sha256}, {"size", f->size}}}};
      ++res_.lfs_files;
    } else {
      QFile in(QString::fromStdString(f->abs));
      check(in.open(QIODevice::ReadOnly), f->abs, "cannot read: " + in.errorString().toStdString());
      const QByteArray data = in.readAll();
      check(static_cast<uint64_t>(data.size()) == f->size, f->abs, "changed while it was being pushed",
            "push a folder nothing is writing to");
      line = {{"key", "file"}, {"value", {{"content", data.toBase64().toStdString()}, {"path", f->path}, {"encoding", "base64"}}}};
      ++res_.regular_files;
    }
    body += QByteArray::fromStdString(line.dump()) + "\n";
  }
  HttpExchange x;
  x.verb = "POST";
  x.request = json_request(rev_tail("commit"), "application/x-ndjson");
  x.body = body;
  const HttpAnswer a = call(x, false);  // not retried: a commit that went through must not be made twice
  if (a.status != 200 && a.status != 201) {
    if (a.status == 0 || a.status >= 500) {
      throw Error(o_.repo_id,
                  "committing: " + describe_answer(a, endpoint_) + ": the Hub may or may not have recorded the commit",
                  "look at " + repo_url_ + " (its history on " + o_.revision +
                      "), then push again if it is not there: objects already uploaded are not sent twice");
    }
    fail("committing to " + o_.revision, a);
  }
  const std::string what = "the commit answer";
  const json j = answer_json(what, a);
  check(j.is_object() && j.contains("commitUrl") && j.contains("commitOid"), o_.repo_id,
        what + ": expected an object with \"commitUrl\" and \"commitOid\"");
  res_.commit_url = checked_url(j["commitUrl"], what + ": commitUrl").toStdString();
  check(j["commitOid"].is_string() && is_commit_hash(j["commitOid"].get<std::string>()), o_.repo_id,
        what + ": commitOid is not a 40-hex commit");
  res_.commit_oid = j["commitOid"].get<std::string>();
  if (j.contains("pullRequestUrl") && !j["pullRequestUrl"].is_null())
    res_.pr_url = checked_url(j["pullRequestUrl"], what + ": pullRequestUrl").toStdString();
}

PushResult Pusher::run() {
  validate_repo_id(o_.repo_id);
  validate_revision(o_.revision);
  check(!is_commit_hash(o_.revision), "--revision", "\"" + o_.revision + "\" is a commit: a push goes to a branch",
        "name a branch (created from main when it does not exist), or use --create-pr");
  check(o_.idle_timeout_ms > 0 && o_.max_retries >= 0 && o_.max_retries <= 20 && o_.retry_base_ms >= 0 &&
            o_.retry_max_ms >= 0 && o_.max_parts >= 1,
        "push options", "out of range");
  for (char c : o_.commit_message)
    check(static_cast<unsigned char>(c) >= ' ' || c == '\t', "--message", "must be one line (no control characters)");
  check(is_valid_utf8(o_.commit_message) && is_valid_utf8(o_.commit_description) && o_.commit_message.size() <= 4096 &&
            o_.commit_description.size() <= 65536,
        "--message", "must be valid UTF-8 of at most 4096 bytes");
  endpoint_ = checked_endpoint(o_.endpoint);
  token_ = checked_token(o_.token);
  check(!token_.empty(), o_.repo_id, "no Hugging Face token: pushing needs one with write access",
        "set HF_TOKEN, or run `huggingface-cli login` (it writes the token file under HF_HOME)");
  repo_url_ = endpoint_ + (o_.repo_type == RepoType::Dataset ? "/datasets/" : "/") + o_.repo_id;
  res_.repo_url = repo_url_;
  scan();  // local problems before any request

  QNetworkAccessManager nam;
  nam_ = &nam;
  create_repo();
  ensure_branch();
  preupload();
  upload_lfs();
  commit();
  nam_ = nullptr;
  prog_ = {"done", res_.files, res_.files, prog_.bytes_total, prog_.bytes_total, {}};
  progress();
  return res_;
}

}  // namespace

PushResult push_folder(const PushOptions& options) {
  Pusher p(options);
  try {
    return p.run();
  } catch (const Error& e) {
    rethrow_without_token(e, p.token());
  }
}

}  // namespace grpo::hub
