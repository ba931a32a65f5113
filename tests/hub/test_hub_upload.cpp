// `grpo push` against the loopback stand-in of the Hub (hub_standin.h), which checks every request
// against the Hub's API as huggingface_hub speaks it (NDJSON commit shape, LFS oids = sha256 of the
// bytes, sizes, multipart part sizes and completion payload, the token) and then serves the pushed
// repo to the real download_snapshot, so each push is compared byte for byte with a fresh download.
// Also: a second push sends nothing, an object the Hub already stores is not sent, branches and
// pull requests, and each fault (401, invalid repo id, a name taken by a dataset repo, cut
// connections, 5xx, garbage / huge / deep JSON, a wrong LFS oid, a failed commit) with its exact
// message and no commit made. No timing dependence: every fault is forced by the stand-in.
#include "tests/common/test_paths.h"

#include <QDirIterator>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <nlohmann/json.hpp>

#include "core/common/files.h"
#include "core/common/strings.h"
#include "core/hub/hub_download.h"
#include "core/hub/hub_upload.h"
#include "tests/common/error_of.h"
#include "tests/hub/hub_standin.h"

using grpo::testing::error_of;
using hub_test::HubStandIn;
namespace hub = grpo::hub;

namespace {

const char* kToken = "hf_write_token_0123456789";

void write_bytes(const std::string& path, const QByteArray& data) {
  QDir().mkpath(QFileInfo(QString::fromStdString(path)).absolutePath());
  grpo::write_file_atomic(path, std::string_view(data.constData(), static_cast<size_t>(data.size())));
}

// Every file under `dir`, relative, sorted (links followed: a snapshot's files are links).
QStringList files_under(const QString& dir) {
  QStringList out;
  QDirIterator it(dir, QDir::Files | QDir::Hidden, QDirIterator::Subdirectories);
  while (it.hasNext()) out << QDir(dir).relativeFilePath(it.next());
  out.sort();
  return out;
}

int count_route(const std::vector<hub_test::Request>& log, const QByteArray& route) {
  int n = 0;
  for (const auto& r : log) n += r.route == route;
  return n;
}

}  // namespace

class TestHubUpload : public QObject {
  Q_OBJECT
  HubStandIn hub_;
  QTemporaryDir tmp_;
  int n_ = 0;

  std::string fresh(const std::string& name) { return tmp_.path().toStdString() + "/" + name + std::to_string(++n_); }

  hub::PushOptions opts(const std::string& folder, const std::string& repo) {
    hub::PushOptions o;
    o.folder = folder;
    o.repo_id = repo;
    o.endpoint = hub_.url();
    o.token = kToken;
    o.idle_timeout_ms = 10000;
    o.max_retries = 3;
    o.retry_base_ms = 1;  // backoff is exercised, not waited for
    o.retry_max_ms = 4;
    return o;
  }

  // An exported PEFT adapter folder: the golden adapter (adapter_config.json and
  // adapter_model.safetensors as PEFT writes them), a model card, and two more files.
  std::string adapter_folder() {
    const std::string dir = fresh("adapter");
    const std::string golden = std::string(GRPO_TEST_DATA) + "/golden/models/qwen2-tied-bf16-lora-r4/";
    for (const char* name : {"adapter_config.json", "adapter_model.safetensors"})
      write_bytes(dir + "/" + name, QByteArray::fromStdString(grpo::read_file(golden + name)));
    write_bytes(dir + "/README.md", "---\nbase_model: \"qwen2-tied-bf16\"\nlibrary_name: peft\n---\n\n# adapter\n");
    write_bytes(dir + "/extra/notes.txt", "nested file\n");
    write_bytes(dir + "/empty.txt", "");
    return dir;
  }

  // The repo as a fresh download sees it: every pushed file byte for byte, plus the
  // .gitattributes a new Hub repo starts with.
  void download_matches(const std::string& repo, const std::string& folder) {
    hub::DownloadOptions d;
    d.repo_id = repo;
    d.cache_dir = fresh("cache");
    d.endpoint = hub_.url();
    d.token = "";
    d.offline = false;
    d.idle_timeout_ms = 10000;
    const auto r = hub::download_snapshot(d);
    QStringList want = files_under(QString::fromStdString(folder));
    want << ".gitattributes";
    want.sort();
    QCOMPARE(files_under(QString::fromStdString(r.snapshot_dir)), want);
    for (const auto& f : files_under(QString::fromStdString(folder)))
      QVERIFY2(grpo::read_file(r.snapshot_dir + "/" + f.toStdString()) == grpo::read_file(folder + "/" + f.toStdString()),
               qPrintable(f));
  }

  void no_violations() {
    const auto st = hub_.upload_stats();
    QVERIFY2(st.violations.empty(), st.violations.empty() ? "" : st.violations.front().constData());
  }

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    hub_.set_upload_token(kToken);
    hub_.set_lfs_rules(64 * 1024, 1 << 20);  // LFS from 64 KiB; multipart above 1 MiB
    hub_test::Repo data;
    data.commit = "aaaaaaaaaabbbbbbbbbbccccccccccdddddddddd";
    data.files = {{"train.jsonl", "{\"prompt\": \"1+1\"}\n"}};
    hub_.add("datasets/org/taken", data);
  }
  void init() {
    hub_.clear_faults();
    hub_.reset_upload_stats();
    hub_.clear_log();
  }

  void push_adapter_then_download_identical() {
    const std::string dir = adapter_folder();
    std::vector<hub::PushProgress> seen;
    auto o = opts(dir, "org/adapter");
    o.commit_message = "Add the GRPO adapter";
    o.commit_description = "policy-v3";
    o.on_progress = [&](const hub::PushProgress& p) { seen.push_back(p); };
    const auto r = hub::push_folder(o);
    no_violations();
    const auto st = hub_.upload_stats();
    QVERIFY(r.created);
    QCOMPARE(st.created, 1);
    QCOMPARE(r.files, size_t(5));
    QCOMPARE(r.lfs_files, size_t(1));  // adapter_model.safetensors
    QCOMPARE(r.regular_files, size_t(4));
    QCOMPARE(r.lfs_uploaded, size_t(1));
    QCOMPARE(r.parts, size_t(0));
    QCOMPARE(r.lfs_bytes_sent, uint64_t(36256));
    QCOMPARE(st.put_bytes, qint64(36256));
    QCOMPARE(st.basic_puts, 1);
    QCOMPARE(st.verifies, 1);
    QCOMPARE(st.commits, 1);
    const auto& c = st.commit_log.back();
    QCOMPARE(c.summary, QByteArray("Add the GRPO adapter"));
    QCOMPARE(c.description, QByteArray("policy-v3"));
    QVERIFY(!c.create_pr);
    QCOMPARE(c.lfs_paths, std::vector<QByteArray>{"adapter_model.safetensors"});
    QCOMPARE(c.regular_paths, (std::vector<QByteArray>{"README.md", "adapter_config.json", "empty.txt", "extra/notes.txt"}));
    QCOMPARE(r.commit_oid, c.commit.toStdString());
    QCOMPARE(r.commit_url, hub_.url() + "/org/adapter/commit/" + r.commit_oid);
    QCOMPARE(r.repo_url, hub_.url() + "/org/adapter");
    // The token went with every Hub call, and only as the Authorization header.
    for (const auto& q : hub_.requests())
      if (q.route != "put" && q.route != "part" && q.route != "complete")
        QVERIFY2(q.auth == QByteArray("Bearer ") + kToken, q.raw.constData());
    // Progress: hashing read every byte; the upload stage ends with every LFS byte sent.
    QVERIFY(!seen.empty());
    QCOMPARE(seen.back().stage, std::string("done"));
    uint64_t last_sent = 0;
    bool uploaded = false;
    for (const auto& p : seen) {
      if (p.stage != "uploading") continue;
      QVERIFY(p.bytes_done >= last_sent && p.bytes_done <= p.bytes_total);
      last_sent = p.bytes_done;
      uploaded = true;
    }
    QVERIFY(uploaded);
    QCOMPARE(last_sent, uint64_t(36256));
    download_matches("org/adapter", dir);
    // PEFT format on arrival: the config names LoRA and its base; the weights' header parses.
    const auto got = hub_.repo("models/org/adapter");
    for (const auto& f : got.files) {
      if (f.path == "adapter_config.json") {
        const auto cfg = nlohmann::json::parse(f.content.toStdString());
        QCOMPARE(cfg.value("peft_type", ""), std::string("LORA"));
        QCOMPARE(cfg.value("base_model_name_or_path", ""), std::string("qwen2-tied-bf16"));
      }
      if (f.path == "adapter_model.safetensors") {
        QVERIFY(f.lfs);
        uint64_t n = 0;
        for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(f.content[i]);
        QVERIFY(n > 0 && 8 + n <= uint64_t(f.content.size()));
        QVERIFY(nlohmann::json::parse(f.content.mid(8, qsizetype(n)).toStdString()).is_object());
      }
    }
  }

  void second_push_sends_nothing_and_a_change_sends_only_it() {
    const std::string dir = adapter_folder();
    hub::push_folder(opts(dir, "org/again"));
    hub_.reset_upload_stats();
    hub_.clear_log();
    const std::string before = hub_.repo("models/org/again").commit.toStdString();
    const auto r = hub::push_folder(opts(dir, "org/again"));
    no_violations();
    auto st = hub_.upload_stats();
    QVERIFY(r.no_changes);
    QVERIFY(!r.created);
    QCOMPARE(r.unchanged, size_t(5));
    QCOMPARE(r.commit_url, std::string());
    QCOMPARE(st.put_bytes, qint64(0));
    QCOMPARE(st.batches, 0);
    QCOMPARE(st.commits, 0);
    QCOMPARE(hub_.repo("models/org/again").commit.toStdString(), before);
    qInfo("second push of the same folder: %zu of %zu files unchanged, %lld LFS bytes sent, %d commits",
          r.unchanged, r.files, static_cast<long long>(st.put_bytes), st.commits);
    // One file changes: only it is committed, and no LFS call is made.
    write_bytes(dir + "/README.md", "---\nlibrary_name: peft\n---\n\n# changed\n");
    hub_.reset_upload_stats();
    const auto r2 = hub::push_folder(opts(dir, "org/again"));
    no_violations();
    st = hub_.upload_stats();
    QCOMPARE(r2.unchanged, size_t(4));
    QCOMPARE(st.commits, 1);
    QCOMPARE(st.commit_log.back().regular_paths, std::vector<QByteArray>{"README.md"});
    QVERIFY(st.commit_log.back().lfs_paths.empty());
    QCOMPARE(st.batches, 0);
    QCOMPARE(st.put_bytes, qint64(0));
    download_matches("org/again", dir);
  }

  void multipart_push_of_a_large_file() {
    const std::string dir = fresh("merged");
    const QByteArray big = hub_test::pseudo_random((7 << 20) / 2, 11);  // 3.5 MiB: parts of 1, 1, 1 and 0.5 MiB
    write_bytes(dir + "/model.safetensors", big);
    write_bytes(dir + "/config.json", "{\"model_type\": \"llama\"}\n");
    const auto r = hub::push_folder(opts(dir, "org/merged"));
    no_violations();
    const auto st = hub_.upload_stats();
    QCOMPARE(r.parts, size_t(4));
    QCOMPARE(st.parts, 4);
    QCOMPARE(st.part_sizes, (std::vector<qint64>{1 << 20, 1 << 20, 1 << 20, 1 << 19}));
    QCOMPARE(st.completions, 1);
    QCOMPARE(st.verifies, 1);
    QCOMPARE(st.basic_puts, 0);
    QCOMPARE(r.lfs_bytes_sent, uint64_t(big.size()));
    QCOMPARE(st.put_bytes, qint64(big.size()));
    qInfo("multipart: %lld bytes in %d parts (%lld, %lld, %lld, %lld), 1 completion, 1 verify",
          static_cast<long long>(st.put_bytes), st.parts, static_cast<long long>(st.part_sizes[0]),
          static_cast<long long>(st.part_sizes[1]), static_cast<long long>(st.part_sizes[2]),
          static_cast<long long>(st.part_sizes[3]));
    download_matches("org/merged", dir);

    // The same bytes under a new name: the LFS batch says the Hub has them; nothing is sent.
    write_bytes(dir + "/copy.safetensors", big);
    hub_.reset_upload_stats();
    const auto r2 = hub::push_folder(opts(dir, "org/merged"));
    no_violations();
    const auto st2 = hub_.upload_stats();
    QCOMPARE(r2.unchanged, size_t(2));
    QCOMPARE(r2.lfs_present, size_t(1));
    QCOMPARE(r2.lfs_uploaded, size_t(0));
    QCOMPARE(st2.put_bytes, qint64(0));
    QCOMPARE(st2.commit_log.back().lfs_paths, std::vector<QByteArray>{"copy.safetensors"});
    download_matches("org/merged", dir);
  }

  void branch_pull_request_and_private() {
    const std::string dir = adapter_folder();
    auto o = opts(dir, "org/branches");
    o.private_repo = true;
    hub::push_folder(o);
    QVERIFY(hub_.is_private("models/org/branches"));
    const QByteArray main_commit = hub_.repo("models/org/branches").commit;
    write_bytes(dir + "/README.md", "# on dev\n");
    o.revision = "dev";
    hub_.reset_upload_stats();
    const auto r = hub::push_folder(o);
    no_violations();
    QCOMPARE(hub_.upload_stats().commit_log.back().revision, QByteArray("dev"));
    QCOMPARE(hub_.repo("models/org/branches").commit, main_commit);  // main did not move
    QCOMPARE(hub_.repo("models/org/branches@dev").commit.toStdString(), r.commit_oid);
    QCOMPARE(r.unchanged, size_t(4));  // dev starts from main: only README.md differs

    write_bytes(dir + "/README.md", "# proposed\n");
    o.revision = "main";
    o.create_pr = true;
    hub_.reset_upload_stats();
    hub_.clear_log();
    const auto pr = hub::push_folder(o);
    no_violations();
    QVERIFY(hub_.upload_stats().commit_log.back().create_pr);
    QCOMPARE(pr.pr_url, hub_.url() + "/org/branches/discussions/1");
    QCOMPARE(hub_.repo("models/org/branches").commit, main_commit);
    QVERIFY(hub_.repo("models/org/branches@refs/pr/1").files.size() > 0);
    for (const auto& q : hub_.requests())
      if (q.route == "preupload" || q.route == "commit") QCOMPARE(q.query, QByteArray("create_pr=1"));
  }

  void bad_token_and_no_token() {
    const std::string dir = adapter_folder();
    auto o = opts(dir, "org/denied");
    o.token = "hf_not_the_right_one";
    const std::string e = error_of([&] { hub::push_folder(o); });
    CHECK_ERROR_CONTAINS(e, "org/denied", "HTTP 401", "the Hub refused the token", "HF_TOKEN", "huggingface-cli login",
                         "nothing was committed");
    QVERIFY2(e.find("hf_not_the_right_one") == std::string::npos, e.c_str());  // never printed
    QCOMPARE(hub_.upload_stats().unauthorized, 1);
    QVERIFY(!hub_.has_repo("models/org/denied"));
    hub_.clear_log();
    o.token = "";
    CHECK_ERROR_CONTAINS(error_of([&] { hub::push_folder(o); }), "no Hugging Face token", "HF_TOKEN",
                         "huggingface-cli login");
    QCOMPARE(hub_.requests().size(), size_t(0));
  }

  void invalid_repo_id_is_refused_before_any_request() {
    const std::string dir = adapter_folder();
    CHECK_ERROR_CONTAINS(error_of([&] { hub::push_folder(opts(dir, "org/bad--name")); }), "--");
    CHECK_ERROR_CONTAINS(error_of([&] { hub::push_folder(opts(dir, "../etc")); }), "repo id");
    CHECK_ERROR_CONTAINS(error_of([&] { hub::push_folder(opts(dir, "a/b/c")); }), "repo id");
    auto o = opts(dir, "org/fine");
    o.revision = "0123456789012345678901234567890123456789";
    CHECK_ERROR_CONTAINS(error_of([&] { hub::push_folder(o); }), "is a commit: a push goes to a branch");
    QCOMPARE(hub_.requests().size(), size_t(0));
  }

  void name_taken_by_a_dataset_repo() {
    const std::string e = error_of([&] { hub::push_folder(opts(adapter_folder(), "org/taken")); });
    CHECK_ERROR_CONTAINS(e, "the name org/taken is taken by a dataset repo", "choose another REPO_ID",
                         "--repo-type dataset", "nothing was pushed");
    QVERIFY(!hub_.has_repo("models/org/taken"));
    QCOMPARE(hub_.upload_stats().commits, 0);
  }

  void connection_cut_mid_upload_is_retried() {
    const std::string dir = fresh("cut");
    write_bytes(dir + "/model.safetensors", hub_test::pseudo_random(3 << 20, 5));  // 3 parts
    hub_.cut_next("part", 1, 200000);  // hang up 200 kB into a part
    const auto r = hub::push_folder(opts(dir, "org/cut"));
    no_violations();
    const auto st = hub_.upload_stats();
    QCOMPARE(st.cuts, 1);
    QCOMPARE(st.parts, 3);  // the cut part arrived again, whole
    QCOMPARE(st.commits, 1);
    QCOMPARE(r.parts, size_t(3));
    download_matches("org/cut", dir);
  }

  void permanent_cut_leaves_no_commit() {
    const std::string dir = fresh("cutperm");
    write_bytes(dir + "/weights.safetensors", hub_test::pseudo_random(300000, 6));  // basic transfer
    write_bytes(dir + "/config.json", "{}\n");
    hub_.cut_next("put", 1000, 1000);
    auto o = opts(dir, "org/cutperm");
    o.max_retries = 2;
    const std::string e = error_of([&] { hub::push_folder(o); });
    CHECK_ERROR_CONTAINS(e, "uploading weights.safetensors", "nothing was committed", "tried 3 times");
    const auto st = hub_.upload_stats();
    QCOMPARE(st.commits, 0);
    QCOMPARE(st.verifies, 0);
    // Our 3 tries, each of which Qt may resend on a fresh connection: bounded either way.
    QVERIFY2(st.cuts >= 3 && st.cuts <= 9, qPrintable(QString::number(st.cuts)));
    qInfo("permanent cut: %d connections cut, 0 commits: %s", st.cuts, e.c_str());
    QCOMPARE(hub_.repo("models/org/cutperm").files.size(), size_t(1));  // only the new repo's .gitattributes
  }

  // Storage URLs on another host than the Hub (here ::1 beside 127.0.0.1): the token goes to the
  // Hub only, the bytes still arrive whole, and a cut there names the storage, not HF_ENDPOINT.
  void storage_on_another_host_gets_no_token() {
    HubStandIn other;
    if (!other.storage_on_other_host()) QSKIP("no ::1 to listen on here");
    other.set_upload_token(kToken);
    other.set_lfs_rules(64 * 1024, 1 << 20);
    const std::string dir = fresh("otherhost");
    write_bytes(dir + "/model.safetensors", hub_test::pseudo_random(3 << 20, 12));      // 3 parts
    write_bytes(dir + "/weights.safetensors", hub_test::pseudo_random(300000, 13));     // basic transfer
    auto o = opts(dir, "org/otherhost");
    o.endpoint = other.url();
    const auto r = hub::push_folder(o);
    QCOMPARE(r.lfs_uploaded, size_t(2));
    const auto st = other.upload_stats();
    QVERIFY(st.violations.empty());
    QCOMPARE(st.storage_requests, 3 + 1 + 1);  // 3 parts, their completion, 1 basic PUT
    QCOMPARE(st.storage_with_auth, 0);
    QCOMPARE(st.put_bytes, qint64((3 << 20) + 300000));
    QCOMPARE(st.commits, 1);

    const std::string dir2 = fresh("otherhostcut");
    write_bytes(dir2 + "/weights.safetensors", hub_test::pseudo_random(300000, 14));
    other.cut_next("put", 1000, 1000);
    auto o2 = opts(dir2, "org/otherhostcut");
    o2.endpoint = other.url();
    o2.max_retries = 1;
    const std::string e = error_of([&] { hub::push_folder(o2); });
    CHECK_ERROR_CONTAINS(e, "uploading weights.safetensors", "the Hub's storage at http://[::1]:", "nothing was committed");
    QVERIFY2(e.find("HF_ENDPOINT sets another") == std::string::npos, e.c_str());
  }

  void server_errors_are_retried_a_bounded_number_of_times() {
    const std::string dir = adapter_folder();
    hub_.fail_next("preupload", 2, 500);
    hub_.fail_next("batch", 1, 503);
    const auto r = hub::push_folder(opts(dir, "org/flaky"));
    no_violations();
    QCOMPARE(r.retries, 3);
    QCOMPARE(hub_.upload_stats().commits, 1);
    download_matches("org/flaky", dir);

    hub_.fail_next("preupload", 100, 503);
    hub_.clear_log();
    write_bytes(dir + "/README.md", "# changed\n");
    const std::string e = error_of([&] { hub::push_folder(opts(dir, "org/flaky")); });
    CHECK_ERROR_CONTAINS(e, "preupload", "HTTP 503", "tried 4 times", "nothing was committed");
    QCOMPARE(count_route(hub_.requests(), "preupload"), 4);  // 1 + max_retries, then it stops
    QCOMPARE(count_route(hub_.requests(), "commit"), 0);
  }

  void garbage_huge_and_deep_answers() {
    const std::string dir = adapter_folder();
    hub::push_folder(opts(dir, "org/hostile"));  // the repo exists: later pushes reach preupload
    write_bytes(dir + "/README.md", "# next\n");
    hub_.reset_upload_stats();
    hub_.answer_next("preupload", "<html>this is not the Hub</html>");
    CHECK_ERROR_CONTAINS(error_of([&] { hub::push_folder(opts(dir, "org/hostile")); }), "the preupload answer",
                         "is not JSON", "HF_ENDPOINT");
    hub_.answer_next("preupload", QByteArray(1 << 20, '['));
    CHECK_ERROR_CONTAINS(error_of([&] { hub::push_folder(opts(dir, "org/hostile")); }), "the preupload answer",
                         "nests deeper than 16 levels");
    hub_.answer_next("preupload", "{\"files\": \"" + QByteArray(3 << 20, 'x') + "\"}");
    auto small = opts(dir, "org/hostile");
    small.max_json_bytes = 1 << 20;
    CHECK_ERROR_CONTAINS(error_of([&] { hub::push_folder(small); }), "the preupload answer is larger than 1.0 MiB",
                         "nothing was committed");
    hub_.answer_next("preupload", "{\"files\": [{\"path\": \"../../etc/passwd\", \"uploadMode\": \"regular\"}]}");
    CHECK_ERROR_CONTAINS(error_of([&] { hub::push_folder(opts(dir, "org/hostile")); }), "which was not asked about");
    hub_.answer_next("preupload", QByteArray("echo: Bearer ") + kToken);  // a server quoting the token back
    const std::string echoed = error_of([&] { hub::push_folder(opts(dir, "org/hostile")); });
    CHECK_ERROR_CONTAINS(echoed, "is not JSON", "Bearer <token>");
    QVERIFY2(echoed.find(kToken) == std::string::npos, echoed.c_str());
    hub_.answer_next("preupload", "{\"files\": []}");
    CHECK_ERROR_CONTAINS(error_of([&] { hub::push_folder(opts(dir, "org/hostile")); }), "says nothing about");
    QCOMPARE(hub_.upload_stats().commits, 0);
  }

  void wrong_lfs_oid_answer() {
    const std::string dir = fresh("wrongoid");
    write_bytes(dir + "/model.safetensors", hub_test::pseudo_random(100000, 9));
    hub_.wrong_oid_next_batch();
    const std::string e = error_of([&] { hub::push_folder(opts(dir, "org/wrongoid")); });
    CHECK_ERROR_CONTAINS(e, "the LFS batch answer", "which was not asked for", "nothing was committed");
    const auto st = hub_.upload_stats();
    QCOMPARE(st.put_bytes, qint64(0));
    QCOMPARE(st.commits, 0);
  }

  void a_failed_commit_is_not_retried() {
    const std::string dir = adapter_folder();
    hub_.fail_next("commit", 1, 500);
    const std::string e = error_of([&] { hub::push_folder(opts(dir, "org/commitfail")); });
    CHECK_ERROR_CONTAINS(e, "committing", "HTTP 500", "may or may not have recorded the commit",
                         hub_.url() + "/org/commitfail");
    QCOMPARE(count_route(hub_.requests(), "commit"), 1);
    // Pushing again works and sends no LFS bytes: the objects are stored.
    hub_.reset_upload_stats();
    const auto r = hub::push_folder(opts(dir, "org/commitfail"));
    no_violations();
    QCOMPARE(hub_.upload_stats().put_bytes, qint64(0));
    QCOMPARE(r.lfs_present, size_t(1));
    download_matches("org/commitfail", dir);
  }

  void cli_push_as_a_process() {
    const std::string dir = adapter_folder();
    QProcess p;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("HF_ENDPOINT", QString::fromStdString(hub_.url()));
    env.insert("HF_HOME", QString::fromStdString(tmp_.path().toStdString() + "/hfhome-cli"));
    env.insert("HF_TOKEN", kToken);
    p.setProcessEnvironment(env);
    p.start(GRPO_CLI, {"push", QString::fromStdString(dir), "org/cli", "--message", "from the CLI"});
    QVERIFY(p.waitForFinished(60000));
    const QByteArray out = p.readAllStandardOutput(), err = p.readAllStandardError();
    QVERIFY2(p.exitCode() == 0, err.constData());
    const auto j = nlohmann::json::parse(out.trimmed().split('\n').back().toStdString());
    const std::string url = j.value("commit_url", "");
    QVERIFY2(grpo::starts_with(url, hub_.url() + "/org/cli/commit/"), out.constData());
    QVERIFY2(err.contains(QByteArray::fromStdString(url)), err.constData());
    QVERIFY(!out.contains(kToken) && !err.contains(kToken));
    QCOMPARE(hub_.upload_stats().commit_log.back().summary, QByteArray("from the CLI"));
    download_matches("org/cli", dir);
    // A refused token: exit status 1 and the advice, never the token.
    env.insert("HF_TOKEN", "hf_wrong_secret");
    p.setProcessEnvironment(env);
    p.start(GRPO_CLI, {"push", QString::fromStdString(dir), "org/cli"});
    QVERIFY(p.waitForFinished(60000));
    const QByteArray e2 = p.readAllStandardError();
    QCOMPARE(p.exitCode(), 1);
    QVERIFY2(e2.contains("huggingface-cli login") && !e2.contains("hf_wrong_secret"), e2.constData());
  }

  // `grpo export --push-to-hub`: a trained run's adapter, exported and pushed in one command, then
  // downloaded byte for byte; the model card carries what the Hub reads.
  void cli_export_push_to_hub() {
    const std::string run = tmp_.path().toStdString() + "/run";
    const std::string cfg = tmp_.path().toStdString() + "/train.yaml";
    grpo::write_file_atomic(cfg, "model_name_or_path: " + std::string(GRPO_RESOURCES) + "/models/tiny-arith\n"
                                 "task: arith\ntask_difficulty: 1\nseed: 3\neval_size: 8\neval_steps: 0\n"
                                 "num_generations: 4\nprompts_per_step: 2\nmax_prompt_length: 48\n"
                                 "max_completion_length: 4\nr: 4\nlora_alpha: 8\nsave_steps: 0\n"
                                 "output_dir: " + run + "\n");
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("HF_ENDPOINT", QString::fromStdString(hub_.url()));
    env.insert("HF_TOKEN", kToken);
    QProcess tr;
    tr.setProcessEnvironment(env);
    tr.setProcessChannelMode(QProcess::MergedChannels);
    tr.start(GRPO_CLI, {"train", QString::fromStdString(cfg), "--steps", "2"});
    QVERIFY(tr.waitForFinished(240000));
    QVERIFY2(tr.exitCode() == 0, tr.readAll().constData());
    const std::string out = tmp_.path().toStdString() + "/exported";
    QProcess ex;
    ex.setProcessEnvironment(env);
    ex.start(GRPO_CLI, {"export", "--run", QString::fromStdString(run), "--out", QString::fromStdString(out),
                        "--base-model-name", "grpo-test/tiny-arith", "--push-to-hub", "org/exported", "--private"});
    QVERIFY(ex.waitForFinished(120000));
    const QByteArray so = ex.readAllStandardOutput(), se = ex.readAllStandardError();
    QVERIFY2(ex.exitCode() == 0, se.constData());
    const auto j = nlohmann::json::parse(so.trimmed().split('\n').back().toStdString());
    QVERIFY2(grpo::starts_with(j.value("commit_url", ""), hub_.url() + "/org/exported/commit/"), so.constData());
    QVERIFY(hub_.is_private("models/org/exported"));
    download_matches("org/exported", out);
    const std::string card = grpo::read_file(out + "/README.md");
    for (const char* want : {"base_model: \"grpo-test/tiny-arith\"\n", "library_name: peft\n", "pipeline_tag: text-generation\n",
                             "base_model_relation: adapter\n", "- grpo\n", "- lora\n", "- peft\n"})
      QVERIFY2(card.find(want) != std::string::npos, want);
    QVERIFY(card.find(kToken) == std::string::npos);
    // The merged model (the demo's 3.4 MB of weights: a multipart upload at the stand-in's 1 MiB
    // chunk), then a fresh download identical byte for byte.
    hub_.reset_upload_stats();
    const std::string merged = tmp_.path().toStdString() + "/exported-merged";
    ex.start(GRPO_CLI, {"export", "--run", QString::fromStdString(run), "--out", QString::fromStdString(merged), "--merged",
                        "--push-to-hub", "org/exported-merged", "--message", "merged model"});
    QVERIFY(ex.waitForFinished(120000));
    QVERIFY2(ex.exitCode() == 0, ex.readAllStandardError().constData());
    const auto st = hub_.upload_stats();
    QVERIFY2(st.violations.empty(), st.violations.empty() ? "" : st.violations.front().constData());
    QVERIFY2(st.parts >= 3 && st.completions == 1, qPrintable(QString::number(st.parts)));
    QVERIFY(grpo::file_exists(merged + "/config.json") && grpo::file_exists(merged + "/model.safetensors"));
    qInfo("merged model pushed: %lld LFS bytes in %d parts, %d commit", static_cast<long long>(st.put_bytes), st.parts,
          st.commits);
    download_matches("org/exported-merged", merged);
    // A bad repo id stops before anything is exported.
    ex.start(GRPO_CLI, {"export", "--run", QString::fromStdString(run), "--out", QString::fromStdString(out + "-2"),
                        "--push-to-hub", "bad//id"});
    QVERIFY(ex.waitForFinished(60000));
    QCOMPARE(ex.exitCode(), 2);
    QVERIFY(!QFileInfo::exists(QString::fromStdString(out + "-2")));
  }
};

QTEST_GUILESS_MAIN(TestHubUpload)
#include "test_hub_upload.moc"
