// The Hugging Face cache as huggingface_hub resolves it (constants.py, file_download.py,
// _snapshot_download.py): the cache folder from HF_HUB_CACHE / HF_HOME / XDG_CACHE_HOME / HOME,
// repo folders, refs/<revision> -> snapshots/<commit>, a commit revision, a local directory, the
// error for a repo that is not there, and the validation of repo ids, revisions and file names.
#include <QTemporaryDir>
#include <QtTest>

#include <unistd.h>

#include "core/common/files.h"
#include "core/hub/hf_cache.h"
#include "tests/common/error_of.h"

using grpo::testing::error_of;
namespace hub = grpo::hub;

namespace {

const std::string kMain = "0123456789abcdef0123456789abcdef01234567";
const std::string kOld = "89abcdef0123456789abcdef0123456789abcdef";

void mkdirs(const std::string& p) { QVERIFY(QDir().mkpath(QString::fromStdString(p))); }

// A cache holding org/name at two commits (refs/main -> kMain, refs/v1 -> kOld), written as
// huggingface_hub writes it: blobs/, relative links in snapshots/, refs/ without a newline.
void make_cache(const std::string& cache, const std::string& folder = "models--org--name") {
  const std::string repo = cache + "/" + folder;
  mkdirs(repo + "/blobs");
  grpo::write_file_atomic(repo + "/blobs/aaaa", "{\"model_type\": \"llama\"}");
  for (const auto& c : {kMain, kOld}) {
    mkdirs(repo + "/snapshots/" + c);
    QCOMPARE(::symlink("../../blobs/aaaa", (repo + "/snapshots/" + c + "/config.json").c_str()), 0);
  }
  mkdirs(repo + "/refs");
  grpo::write_file_atomic(repo + "/refs/main", kMain);
  grpo::write_file_atomic(repo + "/refs/v1", kOld + "\n");
}

void clear_env() {
  for (const char* v : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HF_TOKEN",
                        "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_ENDPOINT"})
    qunsetenv(v);
}

}  // namespace

class TestHfCache : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  std::string root() const { return tmp_.path().toStdString(); }

private Q_SLOTS:
  void init() {
    clear_env();
    qputenv("HOME", tmp_.path().toUtf8() + "/home");
  }

  // fnmatch as Python's fnmatch.fnmatchcase answers (results checked by hand against its
  // translate(): '*' and '?' cross '/', sets, a lone '['), and no blow-up on many stars.
  void fnmatch_as_python() {
    struct Case { const char* pattern; const char* name; bool match; };
    for (const Case& c : std::initializer_list<Case>{
             {"*", "", true}, {"", "", true}, {"", "a", false}, {"a*", "a", true}, {"*a", "ba", true},
             {"*a", "ab", false}, {"a?c", "abc", true}, {"a?c", "ac", false}, {"*.bin", "sub/model.bin", true},
             {"sub/*", "sub/x/y.txt", true}, {"[!a]x", "bx", true}, {"[!a]x", "ax", false}, {"[]]", "]", true},
             {"[a-c]", "b", true}, {"[a-c]", "d", false}, {"[", "[", true}, {"[ab", "[ab", true},
             {"model-[0-9]*.safetensors", "model-00001-of-00002.safetensors", true}, {"**x", "abx", true},
             {"*a*b", "aab", true}, {"*a*b", "aba", false}}) {
      QVERIFY2(hub::fnmatch(c.pattern, c.name) == c.match, (std::string(c.pattern) + " ~ " + c.name).c_str());
    }
    const std::string many_stars = "*a*a*a*a*a*a*a*a*a*a*a*a*b", as(20000, 'a');
    QVERIFY(!hub::fnmatch(many_stars, as));  // backtracking over every star would never return
    QVERIFY(hub::fnmatch(many_stars, as + "b"));
  }

  void cache_dir_from_the_environment() {
    // constants.py: ~/.cache/huggingface/hub, $XDG_CACHE_HOME/huggingface/hub, HF_HOME/hub, HF_HUB_CACHE.
    QCOMPARE(hub::hub_cache_dir(), root() + "/home/.cache/huggingface/hub");
    qputenv("XDG_CACHE_HOME", "/x/cache");
    QCOMPARE(hub::hub_cache_dir(), std::string("/x/cache/huggingface/hub"));
    qputenv("HF_HOME", "~/hf");
    QCOMPARE(hub::hf_home(), root() + "/home/hf");
    QCOMPARE(hub::hub_cache_dir(), root() + "/home/hf/hub");
    qputenv("HUGGINGFACE_HUB_CACHE", "/legacy");
    QCOMPARE(hub::hub_cache_dir(), std::string("/legacy"));
    qputenv("MY_DIR", "/mine");
    qputenv("HF_HUB_CACHE", "${MY_DIR}/hub-cache");
    QCOMPARE(hub::hub_cache_dir(), std::string("/mine/hub-cache"));
    QCOMPARE(hub::expand_user_vars("$UNSET_VAR_X/a"), std::string("$UNSET_VAR_X/a"));
    QCOMPARE(hub::hub_endpoint(), std::string("https://huggingface.co"));
    qputenv("HF_ENDPOINT", "http://127.0.0.1:9/");
    QCOMPARE(hub::hub_endpoint(), std::string("http://127.0.0.1:9"));
  }

  void offline_and_token() {
    QVERIFY(!hub::hub_offline());
    for (const char* v : {"1", "ON", "yes", "True"}) {
      qputenv("HF_HUB_OFFLINE", v);
      QVERIFY2(hub::hub_offline(), v);
    }
    qputenv("HF_HUB_OFFLINE", "0");
    QVERIFY(!hub::hub_offline());
    qunsetenv("HF_HUB_OFFLINE");
    qputenv("TRANSFORMERS_OFFLINE", "1");
    QVERIFY(hub::hub_offline());

    QVERIFY(!hub::hub_token().has_value());
    qputenv("HF_HOME", QByteArray::fromStdString(root() + "/hfhome"));
    mkdirs(root() + "/hfhome");
    grpo::write_file_atomic(root() + "/hfhome/token", "hf_fromfile\r\n");
    QCOMPARE(hub::hub_token().value_or("?"), std::string("hf_fromfile"));
    grpo::write_file_atomic(root() + "/tokpath", "  hf_path \n");
    qputenv("HF_TOKEN_PATH", QByteArray::fromStdString(root() + "/tokpath"));
    QCOMPARE(hub::hub_token().value_or("?"), std::string("hf_path"));
    qputenv("HUGGING_FACE_HUB_TOKEN", "hf_legacy");
    QCOMPARE(hub::hub_token().value_or("?"), std::string("hf_legacy"));
    qputenv("HF_TOKEN", "hf_env");
    QCOMPARE(hub::hub_token().value_or("?"), std::string("hf_env"));
  }

  void resolves_refs_and_commits() {
    const std::string cache = root() + "/c1";
    make_cache(cache);
    qputenv("HF_HUB_CACHE", QByteArray::fromStdString(cache));
    const std::string snaps = cache + "/models--org--name/snapshots/";
    auto r = hub::resolve_repo("org/name");
    QCOMPARE(r.dir, snaps + kMain);
    QCOMPARE(r.commit, kMain);
    QCOMPARE(r.revision, std::string("main"));
    QCOMPARE(r.repo_id, std::string("org/name"));
    QVERIFY(grpo::file_exists(r.dir + "/config.json"));  // through the blob link
    QCOMPARE(hub::resolve_model_dir("org/name", "v1"), snaps + kOld);  // a tag's ref (trailing newline)
    QCOMPARE(hub::resolve_model_dir("org/name", kOld), snaps + kOld);  // a commit maps directly
    // HF_HOME/hub when HF_HUB_CACHE is unset; an explicit cache_dir wins over both.
    qunsetenv("HF_HUB_CACHE");
    make_cache(root() + "/hf/hub");
    qputenv("HF_HOME", QByteArray::fromStdString(root() + "/hf"));
    QCOMPARE(hub::resolve_model_dir("org/name"), root() + "/hf/hub/models--org--name/snapshots/" + kMain);
    QCOMPARE(hub::resolve_model_dir("org/name", "", hub::RepoType::Model, cache), snaps + kMain);
    // Default: ~/.cache/huggingface/hub.
    qunsetenv("HF_HOME");
    make_cache(root() + "/home/.cache/huggingface/hub");
    QCOMPARE(hub::resolve_model_dir("org/name"), root() + "/home/.cache/huggingface/hub/models--org--name/snapshots/" + kMain);
    // Datasets live in datasets--org--name.
    make_cache(cache, "datasets--org--data");
    QCOMPARE(hub::resolve_model_dir("org/data", "", hub::RepoType::Dataset, cache),
             cache + "/datasets--org--data/snapshots/" + kMain);
    QCOMPARE(hub::repo_folder_name("gpt2", hub::RepoType::Model), std::string("models--gpt2"));
  }

  void a_directory_stays_a_directory() {
    mkdirs(root() + "/org/name");
    QVERIFY(QDir::setCurrent(tmp_.path()));
    auto r = hub::resolve_repo("org/name");  // exists relative to the working directory
    QCOMPARE(r.dir, std::string("org/name"));
    QVERIFY(!r.from_cache());
    QCOMPARE(hub::resolve_model_dir(root() + "/org"), root() + "/org");
    QVERIFY(QDir(tmp_.path() + "/org").removeRecursively());
  }

  void missing_repo_says_where_it_looked() {
    const std::string cache = root() + "/c2";
    make_cache(cache);
    qputenv("HF_HUB_CACHE", QByteArray::fromStdString(cache));
    CHECK_ERROR_CONTAINS(error_of([] { hub::resolve_model_dir("org/missing"); }), "model \"org/missing\" (revision main)",
                         "not in the Hugging Face cache " + cache, "grpo download org/missing", "HF_HUB_CACHE");
    CHECK_ERROR_CONTAINS(error_of([] { hub::resolve_model_dir("org/name", "dev"); }), "(revision dev)",
                         cache + "/models--org--name/refs/dev", "grpo download org/name --revision dev");
    const std::string absent = std::string(40, 'f');
    CHECK_ERROR_CONTAINS(error_of([&] { hub::resolve_model_dir("org/name", absent); }), "no snapshot", absent);
    CHECK_ERROR_CONTAINS(error_of([] { hub::resolve_model_dir("./not/a/dir/x"); }), "is not a directory, nor a Hub repo id");
    // A ref that holds something other than a commit is not followed.
    grpo::write_file_atomic(cache + "/models--org--name/refs/bad", "../../../etc");
    CHECK_ERROR_CONTAINS(error_of([] { hub::resolve_model_dir("org/name", "bad"); }), "no commit in");
  }

  void validates_untrusted_names() {
    for (const char* ok : {"gpt2", "Qwen/Qwen2.5-0.5B", "org_x/a.b-c", "a/b", "HuggingFaceTB/SmolLM2-135M-Instruct"})
      QVERIFY2(hub::is_valid_repo_id(ok), ok);
    for (const std::string& bad : std::vector<std::string>{"", "../x", "/abs", "a/b/c", "a--b", "a..b", "x.git", "-x", "x-", "a b", "a\\b",
                                  "org/", "/name", "caf\xc3\xa9/x", std::string(97, 'a'), "datasets/foo/bar"})
      QVERIFY2(!hub::is_valid_repo_id(bad), bad.c_str());
    QVERIFY(hub::is_valid_repo_id(std::string(96, 'a')));
    CHECK_ERROR_CONTAINS(error_of([] { hub::validate_repo_id("a--b"); }), "\"--\"");
    for (const std::string& ok : std::vector<std::string>{"main", "v1.0", "refs/pr/1", kMain})
      hub::validate_revision(ok);
    for (const std::string& bad : std::vector<std::string>{"", "../main", "a/../b", "/main", "a\\b", "a b", "a//b", std::string(257, 'a')})
      QVERIFY2(error_of([&] { hub::validate_revision(bad); }) != "(no error)", bad.c_str());
    for (const std::string& ok : std::vector<std::string>{"config.json", "sub/dir/model.safetensors", ".gitattributes", "a..b"})
      hub::validate_repo_file_path(ok);
    for (const std::string& bad : std::vector<std::string>{"", "../evil", "a/../../b", "/etc/passwd", "a\\b", "a//b", "./a", "a/", "x\ny",
                                  "\xff\xfe", std::string(1025, 'a')})
      QVERIFY2(error_of([&] { hub::validate_repo_file_path(bad); }) != "(no error)", bad.c_str());
    QVERIFY(hub::is_commit_hash(kMain));
    QVERIFY(!hub::is_commit_hash("0123456789ABCDEF0123456789abcdef01234567"));  // REGEX_COMMIT_HASH is lower case
  }
};

QTEST_GUILESS_MAIN(TestHfCache)
#include "test_hf_cache.moc"
