// `grpo download` against a loopback stand-in of the Hub (hub_standin.h): the cache layout
// huggingface_hub writes (blobs named by ETag, relative links in snapshots/, refs/main), a second
// download that makes no file request, offline mode, resuming a cut transfer with Range, the
// errors (401, 404 repo, 404 file, gated, wrong sha256, hostile file names) each with a clear
// message and no half file in snapshots/, the real `grpo download` process, and `grpo train` on a
// config naming a repo id that is in the cache (offline).
#include "tests/common/test_paths.h"
#include <cstring>
#include <QDirIterator>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/common/files.h"
#include "core/common/strings.h"
#include "core/hub/hub_download.h"
#include "tests/common/error_of.h"
#include "tests/hub/hub_standin.h"

using grpo::testing::error_of;
using hub_test::HubStandIn;
using hub_test::Repo;
using hub_test::RepoFile;
namespace hub = grpo::hub;

namespace {

const QByteArray kCommit = "1111111111222222222233333333334444444444";
const QByteArray kCommit2 = "aaaaaaaaaabbbbbbbbbbccccccccccdddddddddd";

Repo tiny_repo() {
  Repo r;
  r.commit = kCommit;
  r.files = {{"config.json", "{\"model_type\": \"llama\"}\n"},
             {"sub/notes.txt", "nested file\n"},
             {"model.safetensors", hub_test::pseudo_random(300000, 7), true}};
  return r;
}

std::string readlink_of(const std::string& p) {
  char buf[4096];
  const ssize_t n = ::readlink(p.c_str(), buf, sizeof buf);
  return n < 0 ? std::string() : std::string(buf, static_cast<size_t>(n));
}

// Every file (not directory) under `dir`, relative, sorted.
QStringList files_under(const QString& dir) {
  QStringList out;
  QDirIterator it(dir, QDir::Files | QDir::System | QDir::Hidden, QDirIterator::Subdirectories);
  while (it.hasNext()) out << QDir(dir).relativeFilePath(it.next());
  out.sort();
  return out;
}

int count(const std::vector<hub_test::Request>& log, const QByteArray& method, const QByteArray& prefix) {
  int n = 0;
  for (const auto& r : log) n += r.method == method && r.path.startsWith(prefix);
  return n;
}

}  // namespace

class TestHubDownload : public QObject {
  Q_OBJECT
  HubStandIn hub_;
  QTemporaryDir tmp_;
  int n_ = 0;

  std::string fresh_cache() { return tmp_.path().toStdString() + "/cache" + std::to_string(++n_); }
  hub::DownloadOptions opts(const std::string& repo, const std::string& cache) {
    hub::DownloadOptions o;
    o.repo_id = repo;
    o.cache_dir = cache;
    o.endpoint = hub_.url();
    o.token = "";
    o.offline = false;
    o.idle_timeout_ms = 10000;
    return o;
  }
  // The repo folder's snapshot holds no file for `path`, and no blob is half there.
  void no_half_file(const std::string& cache, const std::string& folder, const QByteArray& commit, const std::string& path) {
    const std::string snap = cache + "/" + folder + "/snapshots/" + commit.toStdString();
    QVERIFY2(!QFileInfo(QString::fromStdString(snap + "/" + path)).exists() &&
                 !QFileInfo(QString::fromStdString(snap + "/" + path)).isSymLink(),
             (snap + "/" + path).c_str());
    for (const auto& f : files_under(QString::fromStdString(cache + "/" + folder + "/snapshots")))
      QVERIFY2(!f.contains(".tmp"), qPrintable(f));
  }

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    hub_.add("models/org/tiny", tiny_repo());
    Repo priv = tiny_repo();
    priv.token = "hf_good";
    hub_.add("models/org/private", priv);
    Repo gated = tiny_repo();
    gated.gated = true;
    hub_.add("models/org/gated", gated);
    Repo missing = tiny_repo();
    missing.extra_siblings = {"missing.bin"};
    hub_.add("models/org/missingfile", missing);
    Repo corrupt = tiny_repo();
    corrupt.files[2].etag_override = QCryptographicHash::hash("other bytes", QCryptographicHash::Sha256).toHex();
    hub_.add("models/org/corrupt", corrupt);
    Repo data;
    data.commit = kCommit2;
    data.files = {{"train.jsonl", "{\"prompt\": \"1+1\"}\n"}};
    hub_.add("datasets/org/data", data);
  }

  void full_download_writes_the_hf_layout() {
    const std::string cache = fresh_cache();
    std::vector<hub::DownloadProgress> seen;
    auto o = opts("org/tiny", cache);
    o.on_progress = [&](const hub::DownloadProgress& p) { seen.push_back(p); };
    hub_.clear_log();
    const auto r = hub::download_snapshot(o);
    const std::string repo = cache + "/models--org--tiny";
    const std::string snap = repo + "/snapshots/" + kCommit.toStdString();
    QCOMPARE(r.commit, kCommit.toStdString());
    QCOMPARE(r.snapshot_dir, snap);
    QCOMPARE(r.files, size_t(3));
    QCOMPARE(r.fetched, size_t(3));
    const Repo t = tiny_repo();
    QStringList want = {"refs/main"};
    for (const auto& f : t.files) want << "blobs/" + QString::fromLatin1(f.etag()) << "snapshots/" + kCommit + "/" + f.path;
    want.sort();
    QCOMPARE(files_under(QString::fromStdString(repo)), want);  // nothing else: no .incomplete, no temporaries
    QCOMPARE(grpo::read_file(repo + "/refs/main"), kCommit.toStdString());  // no newline, as huggingface_hub writes it
    for (const auto& f : t.files) {
      const std::string link = snap + "/" + f.path.toStdString();
      const std::string up = f.path.contains('/') ? "../../../" : "../../";
      QCOMPARE(readlink_of(link), up + "blobs/" + f.etag().toStdString());  // relative, into blobs/<etag>
      QCOMPARE(QByteArray::fromStdString(grpo::read_file(link)), f.content);
    }
    QCOMPARE(hub::resolve_model_dir("org/tiny", "", hub::RepoType::Model, cache), snap);
    // One listing, a HEAD per file, the LFS bytes from the "CDN", the regular ones from resolve/.
    const auto log = hub_.requests();
    QCOMPARE(count(log, "GET", "/api/models/org/tiny/revision/main"), 1);
    QCOMPARE(count(log, "HEAD", "/org/tiny/resolve/" + kCommit + "/"), 3);
    QCOMPARE(count(log, "GET", "/org/tiny/resolve/"), 2);
    QCOMPARE(count(log, "GET", "/cdn/"), 1);
    QVERIFY(!seen.empty());
    QCOMPARE(seen.back().files_done, size_t(3));
    QCOMPARE(seen.back().bytes_done, seen.back().bytes_total);

    // A second download: the listing only, no file request, nothing fetched.
    hub_.clear_log();
    const auto again = hub::download_snapshot(opts("org/tiny", cache));
    QCOMPARE(again.fetched, size_t(0));
    QCOMPARE(again.files, size_t(3));
    QCOMPARE(hub_.requests().size(), size_t(1));
    QCOMPARE(files_under(QString::fromStdString(repo)), want);

    // --include: only matching files (fnmatch, as allow_patterns).
    const std::string cache2 = fresh_cache();
    auto inc = opts("org/tiny", cache2);
    inc.include = {"*.json"};
    QCOMPARE(hub::download_snapshot(inc).files, size_t(1));
    QCOMPARE(files_under(QString::fromStdString(cache2 + "/models--org--tiny/snapshots")),
             QStringList{kCommit + "/config.json"});
    QVERIFY(hub::fnmatch("sub/*", "sub/notes.txt") && hub::fnmatch("*.txt", "sub/notes.txt") &&
            !hub::fnmatch("*.json", "model.safetensors") && hub::fnmatch("model-[0-9].bin", "model-3.bin"));
  }

  // Two files with the same bytes share one blob (and one download, one lock).
  void identical_files_share_a_blob() {
    Repo d;
    d.commit = kCommit;
    d.files = {{"a/empty.txt", ""}, {"b/empty.txt", ""}, {"c/same.bin", hub_test::pseudo_random(5000, 3), true},
               {"d/same.bin", hub_test::pseudo_random(5000, 3), true}};
    hub_.add("models/org/dupes", d);
    const std::string cache = fresh_cache();
    hub::DownloadResult r;
    const std::string err = error_of([&] { r = hub::download_snapshot(opts("org/dupes", cache)); });
    QVERIFY2(err == "(no error)", err.c_str());
    QCOMPARE(r.files, size_t(4));
    QCOMPARE(readlink_of(r.snapshot_dir + "/a/empty.txt"), readlink_of(r.snapshot_dir + "/b/empty.txt"));
    QCOMPARE(readlink_of(r.snapshot_dir + "/c/same.bin"), "../../../blobs/" + d.files[2].etag().toStdString());
    QCOMPARE(readlink_of(r.snapshot_dir + "/d/same.bin"), "../../../blobs/" + d.files[2].etag().toStdString());
    QCOMPARE(files_under(QString::fromStdString(cache + "/models--org--dupes/blobs")).size(), 2);
  }

  void datasets_and_commit_revisions() {
    const std::string cache = fresh_cache();
    auto o = opts("org/data", cache);
    o.repo_type = hub::RepoType::Dataset;
    const auto r = hub::download_snapshot(o);
    QCOMPARE(r.snapshot_dir, cache + "/datasets--org--data/snapshots/" + kCommit2.toStdString());
    QVERIFY(grpo::file_exists(r.snapshot_dir + "/train.jsonl"));
    // A commit revision writes no ref (_cache_commit_hash_for_specific_revision).
    const std::string cache2 = fresh_cache();
    auto c = opts("org/tiny", cache2);
    c.revision = kCommit.toStdString();
    QCOMPARE(hub::download_snapshot(c).commit, kCommit.toStdString());
    QVERIFY(!QFileInfo::exists(QString::fromStdString(cache2 + "/models--org--tiny/refs")));
  }

  void offline_never_touches_the_network() {
    const std::string cache = fresh_cache();
    hub::download_snapshot(opts("org/tiny", cache));
    hub_.clear_log();
    auto o = opts("org/tiny", cache);
    o.offline = true;
    o.endpoint = "http://127.0.0.1:1";  // nothing listens there; it must not matter
    const auto r = hub::download_snapshot(o);
    QVERIFY(r.offline);
    QCOMPARE(r.commit, kCommit.toStdString());
    auto m = opts("org/other", cache);
    m.offline = true;
    CHECK_ERROR_CONTAINS(error_of([&] { hub::download_snapshot(m); }), "offline mode (HF_HUB_OFFLINE) is on",
                         "not in the Hugging Face cache " + cache);
    QCOMPARE(hub_.requests().size(), size_t(0));
  }

  void resumes_a_cut_transfer_with_range() {
    const std::string cache = fresh_cache();
    const Repo tiny = tiny_repo();
    const RepoFile& lfs = tiny.files[2];
    const std::string blob = cache + "/models--org--tiny/blobs/" + lfs.etag().toStdString();
    hub_.cut_next_cdn_transfer_after(100000);
    auto o = opts("org/tiny", cache);
    o.parallel = 1;
    const std::string err = error_of([&] { hub::download_snapshot(o); });
    CHECK_ERROR_CONTAINS(err, "model.safetensors", "run again to resume");
    no_half_file(cache, "models--org--tiny", kCommit, "model.safetensors");
    QVERIFY(!grpo::file_exists(blob));
    const qint64 kept = QFileInfo(QString::fromStdString(blob + ".incomplete")).size();
    QVERIFY2(kept > 0 && kept <= 100000, qPrintable(QString::number(kept)));
    hub_.clear_log();
    const auto r = hub::download_snapshot(o);
    QCOMPARE(QByteArray::fromStdString(grpo::read_file(r.snapshot_dir + "/model.safetensors")), lfs.content);
    QVERIFY(!grpo::file_exists(blob + ".incomplete"));
    bool ranged = false;
    for (const auto& q : hub_.requests())
      if (q.path.startsWith("/cdn/")) ranged = q.range == "bytes=" + QByteArray::number(kept) + "-";
    QVERIFY2(ranged, "the second run did not resume with Range: bytes=<kept>-");
    QCOMPARE(r.bytes, uint64_t(lfs.content.size() - kept));
  }

  void errors_are_clear_and_leave_no_half_file() {
    // 401: a private repo with a bad token; the right token works.
    std::string cache = fresh_cache();
    auto o = opts("org/private", cache);
    o.token = "hf_bad";
    CHECK_ERROR_CONTAINS(error_of([&] { hub::download_snapshot(o); }), "HTTP 401", "HF_TOKEN", "private");
    // A server that quotes the Authorization header back: the token never reaches the message.
    hub_.echo_auth("models/org/private");
    o.token = "hf_bad_secret_0123456789";
    const std::string echoed = error_of([&] { hub::download_snapshot(o); });
    CHECK_ERROR_CONTAINS(echoed, "HTTP 401", "Bearer <token>");
    QVERIFY2(echoed.find("hf_bad_secret") == std::string::npos, echoed.c_str());
    o.token = "hf_good";
    QCOMPARE(hub::download_snapshot(o).files, size_t(3));
    // 404 repo.
    CHECK_ERROR_CONTAINS(error_of([&] { hub::download_snapshot(opts("org/nothere", fresh_cache())); }), "HTTP 404",
                         "Repository not found", "model org/nothere does not exist");
    // Unknown revision.
    auto rev = opts("org/tiny", fresh_cache());
    rev.revision = "nope";
    CHECK_ERROR_CONTAINS(error_of([&] { hub::download_snapshot(rev); }), "revision \"nope\"", "does not exist");
    // 404 file (listed, not served).
    cache = fresh_cache();
    CHECK_ERROR_CONTAINS(error_of([&] { hub::download_snapshot(opts("org/missingfile", cache)); }), "missing.bin",
                         "HTTP 404", "not in model org/missingfile");
    no_half_file(cache, "models--org--missingfile", kCommit, "missing.bin");
    QVERIFY(!QFileInfo::exists(QString::fromStdString(cache + "/models--org--missingfile/refs/main")));
    // Gated.
    cache = fresh_cache();
    CHECK_ERROR_CONTAINS(error_of([&] { hub::download_snapshot(opts("org/gated", cache)); }), "HTTP 403", "gated",
                         "request access");
    QCOMPARE(files_under(QString::fromStdString(cache + "/models--org--gated/snapshots")), QStringList());
    // Wrong sha256: nothing of that file stays (neither link, blob nor .incomplete).
    cache = fresh_cache();
    CHECK_ERROR_CONTAINS(error_of([&] { hub::download_snapshot(opts("org/corrupt", cache)); }), "sha256 mismatch",
                         "model.safetensors");
    no_half_file(cache, "models--org--corrupt", kCommit, "model.safetensors");
    // The other files were downloading beside it: each is either complete or, when the failure
    // cut it short, kept as <etag>.incomplete to resume from (as huggingface_hub keeps them).
    // Which of the two depends on the order the transfers ran in, so both are accepted here.
    QStringList other_blobs;  // config.json and sub/notes.txt, as org/corrupt serves them
    const Repo served = tiny_repo();
    for (int i = 0; i < 2; ++i) other_blobs << QString::fromLatin1(served.files[i].etag());
    for (const auto& f : files_under(QString::fromStdString(cache + "/models--org--corrupt/blobs"))) {
      QVERIFY2(!f.contains(QCryptographicHash::hash("other bytes", QCryptographicHash::Sha256).toHex()), qPrintable(f));
      QString blob = QFileInfo(f).fileName();
      if (blob.endsWith(".incomplete")) blob.chop(int(std::strlen(".incomplete")));
      QVERIFY2(other_blobs.contains(blob), qPrintable(f));
    }
    // Hostile sibling names are refused before anything is written.
    int k = 0;
    for (const QByteArray bad : {"../evil", "/abs/evil", "a\\..\\evil", "a/../../evil", "ok/./x", "x\ny"}) {
      Repo h = tiny_repo();
      h.extra_siblings = {bad};
      const std::string id = "org/hostile" + std::to_string(++k);
      hub_.add("models/" + id, h);
      cache = fresh_cache();
      CHECK_ERROR_CONTAINS(error_of([&] { hub::download_snapshot(opts(id, cache)); }), "refusing the server's file list");
      QVERIFY(!QFileInfo::exists(QString::fromStdString(cache)));
    }
    // Invalid input never reaches the network.
    CHECK_ERROR_CONTAINS(error_of([&] { hub::download_snapshot(opts("../etc", fresh_cache())); }), "repo id");
  }

  void cli_downloads_as_a_process() {
    const std::string cache = fresh_cache();
    QProcess p;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("HF_ENDPOINT", QString::fromStdString(hub_.url()));
    env.insert("HF_HOME", QString::fromStdString(tmp_.path().toStdString() + "/hfhome-cli"));
    env.insert("HF_HUB_CACHE", QString::fromStdString(cache));
    env.remove("HF_TOKEN");
    env.remove("HF_HUB_OFFLINE");
    p.setProcessEnvironment(env);
    p.start(GRPO_CLI, {"download", "org/tiny", "--include", "*.json", "--include", "*.safetensors"});
    QVERIFY(p.waitForFinished(60000));
    const QByteArray out = p.readAllStandardOutput(), err = p.readAllStandardError();
    QVERIFY2(p.exitCode() == 0, err.constData());
    QCOMPARE(out.trimmed(), QByteArray::fromStdString(cache + "/models--org--tiny/snapshots/") + kCommit);
    QVERIFY2(err.contains("2/2 files"), err.constData());
    // Offline, a repo that is not cached: a clear error and exit status 1.
    env.insert("HF_HUB_OFFLINE", "1");
    p.setProcessEnvironment(env);
    p.start(GRPO_CLI, {"download", "org/absent"});
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 1);
    const QByteArray e2 = p.readAllStandardError();
    QVERIFY2(e2.contains("offline mode (HF_HUB_OFFLINE) is on") && e2.contains("not in the Hugging Face cache " + cache),
             e2.constData());
  }

  // The must-show: `grpo train` on a config naming a Hub repo id that is in the cache
  // (the demo model served by the stand-in and fetched by `grpo download`), offline.
  void train_on_a_cached_repo_id() {
    Repo demo;
    demo.commit = "5555555555666666666677777777778888888888";
    const QString dir = QString(GRPO_RESOURCES) + "/models/tiny-arith";
    for (const auto& name : QDir(dir).entryList(QDir::Files)) {
      const std::string content = grpo::read_file((dir + "/" + name).toStdString());
      demo.files.push_back({name.toUtf8(), QByteArray::fromStdString(content), name.endsWith(".safetensors")});
    }
    hub_.add("models/grpo-test/tiny-arith", demo);
    const std::string cache = fresh_cache();
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("HF_ENDPOINT", QString::fromStdString(hub_.url()));
    env.insert("HF_HUB_CACHE", QString::fromStdString(cache));
    env.remove("HF_HUB_OFFLINE");
    QProcess dl;
    dl.setProcessEnvironment(env);
    dl.start(GRPO_CLI, {"download", "grpo-test/tiny-arith", "--quiet"});
    QVERIFY(dl.waitForFinished(60000));
    QVERIFY2(dl.exitCode() == 0, dl.readAllStandardError().constData());

    const std::string run = tmp_.path().toStdString() + "/run";
    const std::string cfg = tmp_.path().toStdString() + "/cached.yaml";
    grpo::write_file_atomic(cfg,
                            "model_name_or_path: grpo-test/tiny-arith\n"
                            "task: arith\ntask_difficulty: 1\nseed: 3\neval_size: 8\neval_steps: 0\n"
                            "num_generations: 4\nprompts_per_step: 2\nmax_prompt_length: 48\n"
                            "max_completion_length: 4\nr: 4\nlora_alpha: 8\nsave_steps: 0\n"
                            "output_dir: " + run + "\n");
    env.insert("HF_HUB_OFFLINE", "1");  // resolution is local: no network at all
    env.insert("HF_ENDPOINT", "http://127.0.0.1:1");
    QProcess tr;
    tr.setProcessEnvironment(env);
    tr.setProcessChannelMode(QProcess::MergedChannels);
    tr.start(GRPO_CLI, {"train", QString::fromStdString(cfg), "--steps", "2"});
    QVERIFY(tr.waitForFinished(240000));
    const QByteArray log = tr.readAll();
    QVERIFY2(tr.exitCode() == 0, log.constData());
    const auto resolved = nlohmann::json::parse(grpo::read_file(run + "/config.json"));
    QCOMPARE(resolved.value("model_name_or_path", ""), std::string("grpo-test/tiny-arith"));
    QCOMPARE(resolved.value("model_revision", ""), demo.commit.toStdString());  // the snapshot, pinned
    int steps = 0;
    for (const auto& line : grpo::split(grpo::read_file(run + "/metrics.jsonl"), '\n')) steps += !line.empty();
    QCOMPARE(steps, 2);
    // The adapter names its base as PEFT users load it: the repo id, not the snapshot folder.
    const auto adapter = nlohmann::json::parse(grpo::read_file(run + "/adapter/adapter_config.json"));
    QCOMPARE(adapter.value("base_model_name_or_path", ""), std::string("grpo-test/tiny-arith"));

    // `grpo inspect model` takes the repo id (and a revision); one that is not cached says what to run.
    QProcess in;
    in.setProcessEnvironment(env);
    in.start(GRPO_CLI, {"inspect", "model", "grpo-test/tiny-arith", "--revision", QString::fromLatin1(demo.commit), "--json"});
    QVERIFY(in.waitForFinished(60000));
    const QByteArray info = in.readAllStandardOutput();
    QVERIFY2(in.exitCode() == 0 && info.contains("\"model_type\""), (info + in.readAllStandardError()).constData());
    in.start(GRPO_CLI, {"inspect", "logits", "--model", "grpo-test/absent", "--ids", "1"});
    QVERIFY(in.waitForFinished(60000));
    const QByteArray e = in.readAllStandardError();
    QVERIFY2(in.exitCode() != 0 && e.contains("grpo download grpo-test/absent") && e.contains(QByteArray::fromStdString(cache)),
             e.constData());
  }
};

QTEST_GUILESS_MAIN(TestHubDownload)
#include "test_hub_download.moc"
