// Datasets by name: a Hub dataset repo in a huggingface_hub cache laid out as the library lays it
// out (datasets--org--name/refs/main, snapshots/<commit>/...), README.md configs as `datasets`
// reads them, default split patterns, the Parquet conversion branch, column renames, and errors
// that name what was searched and what exists. The Parquet files are the reference files of
// tests/data/parquet (written by parquet-wasm, an Arrow writer nobody here wrote).
#include "tests/common/test_paths.h"
#include <QtTest>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/common/error_of.h"
#include "core/common/error.h"
#include "core/common/files.h"
#include "core/rollout/dataset_source.h"
#include "core/rollout/reward_math.h"

using namespace grpo::rollout;
namespace fs = std::filesystem;
using grpo::testing::error_of;

namespace {

const std::string kParquet = std::string(GRPO_TEST_DATA) + "/parquet/";
const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";

#define QVERIFY_ERROR(expr, expected)                                                                     \
  do {                                                                                                    \
    std::string e_ = error_of([&] { (void)(expr); });                                                     \
    QVERIFY2(e_.find(expected) != std::string::npos, (e_ + "  [expected: " + (expected) + "]").c_str()); \
  } while (0)

void put(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

void copy(const std::string& from, const fs::path& to) {
  fs::create_directories(to.parent_path());
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
}

// A cached dataset repo as huggingface_hub writes it: files in blobs/, relative links in the
// snapshot, the branch's commit in refs/<revision>. Returns the snapshot folder.
fs::path cached_repo(const fs::path& cache, const std::string& repo_folder, const std::string& revision = "main") {
  fs::path repo = cache / repo_folder;
  fs::path snap = repo / "snapshots" / kCommit;
  fs::create_directories(snap);
  put(repo / "refs" / revision, kCommit);
  return snap;
}

// Moves a snapshot file into blobs/ and leaves a relative symlink, as the Hub cache does.
void as_blob(const fs::path& snap, const std::string& rel, const std::string& blob) {
  fs::path file = snap / rel;
  fs::path blobs = snap.parent_path().parent_path() / "blobs";
  fs::create_directories(blobs);
  fs::rename(file, blobs / blob);
  fs::create_symlink(fs::relative(blobs / blob, file.parent_path()), file);
}

}  // namespace

class TestDatasetSource : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  fs::path cache_;

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    cache_ = fs::path(tmp_.path().toStdString()) / "hub";
    fs::create_directories(cache_);
    qputenv("HF_HUB_CACHE", QByteArray::fromStdString(cache_.string()));
  }

  // openai/gsm8k's own README.md configs (main and socratic, data_files with split and path
  // globs), its files as blobs behind symlinks.
  void gsm8kByNameConfigAndSplit() {
    fs::path snap = cached_repo(cache_, "datasets--openai--gsm8k");
    put(snap / "README.md", R"(---
annotations_creators:
- crowdsourced
language:
- en
license:
- mit
configs:
- config_name: main
  data_files:
  - split: train
    path: main/train-*
  - split: test
    path: main/test-*
- config_name: socratic
  data_files:
  - split: train
    path: socratic/train-*
  - split: test
    path: socratic/test-*
---
# Dataset Card for GSM8K
)");
    copy(kParquet + "gsm8k_like.parquet", snap / "main" / "train-00000-of-00001.parquet");
    as_blob(snap, "main/train-00000-of-00001.parquet", "a1b2c3");
    copy(kParquet + "gsm8k_like.parquet", snap / "main" / "test-00000-of-00001.parquet");
    copy(kParquet + "types_snappy_v1_dict.parquet", snap / "socratic" / "train-00000-of-00001.parquet");

    DatasetRef ref;
    ref.name = "openai/gsm8k";
    ref.config = "main";
    ref.columns = {{"question", "prompt"}};
    auto files = dataset_files(ref);
    QCOMPARE(files.size(), size_t(1));
    QVERIFY2(files[0].find("main/train-00000-of-00001.parquet") != std::string::npos, files[0].c_str());
    auto examples = load_dataset_ref(ref);
    QCOMPARE(examples.size(), size_t(40));
    QVERIFY(examples[0].prompt_text.rfind("Natalia sold clips", 0) == 0);
    QVERIFY(examples[0].answer.has_value());
    QCOMPARE(reference_answer(*examples[0].answer), std::string("26"));  // "#### 26"

    // No config: gsm8k marks none as default and has two, so the error lists them.
    ref.config.clear();
    QVERIFY_ERROR(dataset_files(ref), "configs: main, socratic");
    ref.config = "nope";
    QVERIFY_ERROR(dataset_files(ref), "no config \"nope\"");
    ref.config = "main";
    ref.split = "validation";
    QVERIFY_ERROR(dataset_files(ref), "splits found: \"test\", \"train\"");
    ref.split = "test";
    QCOMPARE(load_dataset_ref(ref).size(), size_t(40));

    // Without the rename there is no prompt column: the error names the file and row.
    ref.columns = nlohmann::json::object();
    QVERIFY_ERROR(load_dataset_ref(ref), "field \"prompt\": missing");
    // A revision that is not in the cache names the cache and says how to get it.
    ref.revision = "v2";
    QVERIFY_ERROR(dataset_files(ref), "v2");
  }

  // A chat dataset: list<struct<role, content>> prompts and a solution column; README with
  // default: true and data_files as a plain list.
  void chatDatasetDefaultConfig() {
    fs::path snap = cached_repo(cache_, "datasets--org--chat");
    put(snap / "README.md", "---\nconfigs:\n- config_name: plain\n  data_files: other/*.jsonl\n"
                            "- config_name: chat\n  default: true\n  data_files:\n  - split: train\n    path: \"data/*.parquet\"\n---\n");
    copy(kParquet + "chat_prompt.parquet", snap / "data" / "part-0.parquet");
    put(snap / "other" / "x.jsonl", "{\"prompt\": \"hi\"}\n");
    std::string def;
    auto configs = dataset_configs(snap.string(), &def);
    QCOMPARE(configs, (std::vector<std::string>{"plain", "chat"}));
    QCOMPARE(def, std::string("chat"));
    DatasetRef ref;
    ref.name = "org/chat";
    auto ex = load_dataset_ref(ref);
    QCOMPARE(ex.size(), size_t(24));
    QVERIFY(ex[0].messages.has_value());
    QCOMPARE((*ex[0].messages)[0]["role"].get<std::string>(), std::string("system"));
    QCOMPARE(*ex[0].answer, std::string("\\boxed{0}"));  // "solution" feeds the rewards
    QCOMPARE(ex[0].metadata["level"].get<int64_t>(), int64_t(0));
    ref.config = "plain";
    QCOMPARE(load_dataset_ref(ref).at(0).prompt_text, std::string("hi"));
  }

  // No README configs: `datasets`' default patterns (sharded data/<split>-..., split names in
  // folders, in file names), and everything is train when nothing names a split.
  void defaultSplitPatterns() {
    fs::path root = fs::path(tmp_.path().toStdString()) / "local";
    copy(kParquet + "gsm8k_like.parquet", root / "sharded" / "data" / "train-00000-of-00002.parquet");
    copy(kParquet + "gsm8k_like.parquet", root / "sharded" / "data" / "train-00001-of-00002.parquet");
    copy(kParquet + "gsm8k_like.parquet", root / "sharded" / "data" / "test-00000-of-00001.parquet");
    DatasetRef ref;
    ref.name = (root / "sharded").string();
    QCOMPARE(dataset_files(ref).size(), size_t(2));
    ref.split = "test";
    QCOMPARE(dataset_files(ref).size(), size_t(1));

    put(root / "bydir" / "train" / "a.jsonl", "{\"prompt\": \"a\"}\n");
    put(root / "bydir" / "validation" / "b.jsonl", "{\"prompt\": \"b\"}\n");
    ref.name = (root / "bydir").string();
    ref.split = "validation";
    QCOMPARE(load_dataset_ref(ref).at(0).prompt_text, std::string("b"));

    put(root / "byname" / "my_train.csv", "prompt,answer\nq1,1\n");
    put(root / "byname" / "dev-1.csv", "prompt,answer\nq2,2\n");
    put(root / "byname" / "README.md", "# no front matter\n");
    ref.name = (root / "byname").string();
    ref.split = "validation";  // "dev" is a validation keyword
    QCOMPARE(*load_dataset_ref(ref).at(0).answer, std::string("2"));
    ref.split = "train";
    QCOMPARE(load_dataset_ref(ref).at(0).prompt_text, std::string("q1"));

    put(root / "flat" / "questions.jsonl", "{\"prompt\": \"only\"}\n");
    ref.name = (root / "flat").string();
    QCOMPARE(load_dataset_ref(ref).at(0).prompt_text, std::string("only"));
    ref.split = "test";
    QVERIFY_ERROR(dataset_files(ref), "splits found: \"train\"");
  }

  // The refs/convert/parquet branch: <config>/<split>/NNNN.parquet (and partial-<split>).
  void parquetConversionBranch() {
    fs::path snap = cached_repo(cache_, "datasets--org--converted", "refs/convert/parquet");
    copy(kParquet + "gsm8k_like.parquet", snap / "main" / "train" / "0000.parquet");
    copy(kParquet + "gsm8k_like.parquet", snap / "main" / "partial-test" / "0000.parquet");
    DatasetRef ref;
    ref.name = "org/converted";
    ref.revision = "refs/convert/parquet";
    ref.config = "main";
    ref.columns = {{"question", "prompt"}};
    QCOMPARE(load_dataset_ref(ref).size(), size_t(40));
    ref.split = "test";
    QCOMPARE(dataset_files(ref).size(), size_t(1));
    ref.config = "other";
    QVERIFY_ERROR(dataset_files(ref), "no config \"other\"");
  }

  void renamesAndTheirErrors() {
    nlohmann::ordered_json row = {{"question", "q"}, {"answer", "#### 4"}, {"id", 7}};
    auto out = rename_columns(row, {{"question", "prompt"}}, "f:1");
    QCOMPARE(out.begin().key(), std::string("prompt"));  // the file's column order is kept
    QCOMPARE(out["id"].get<int>(), 7);
    // Renaming onto a column that stays is ambiguous.
    nlohmann::ordered_json both = {{"question", "q"}, {"prompt", "p"}};
    QVERIFY_ERROR(rename_columns(both, {{"question", "prompt"}}, "f:2"), "f:2");
    QVERIFY_ERROR(validate_column_map(nlohmann::json::array(), "dataset_columns"), "expected an object");
    QVERIFY_ERROR(validate_column_map({{"a", "x"}, {"b", "x"}}, "dataset_columns"), "two columns are renamed to \"x\"");
    QVERIFY_ERROR(validate_column_map({{"a", 3}}, "dataset_columns"), "non-empty column name");
  }

  // Untrusted front matter: deep nesting and an unterminated block are clear errors.
  void hostileReadme() {
    fs::path root = fs::path(tmp_.path().toStdString()) / "hostile";
    put(root / "data" / "train.jsonl", "{\"prompt\": \"x\"}\n");
    put(root / "README.md", "---\nconfigs: " + std::string(100000, '[') + "\n---\n");
    DatasetRef ref;
    ref.name = root.string();
    QVERIFY_ERROR(dataset_files(ref), "nested deeper than 32");
    put(root / "README.md", "---\nconfigs:\n- config_name: x\n");
    QVERIFY_ERROR(dataset_files(ref), "never ends");
    put(root / "README.md", "---\nconfigs: [unclosed\n---\n");
    QVERIFY_ERROR(dataset_files(ref), "YAML front matter");
    std::string deep = "---\nconfigs:\n";
    for (int i = 0; i < 40; ++i) deep += std::string(static_cast<size_t>(2 * i + 2), ' ') + "- \n";
    put(root / "README.md", deep + "---\n");
    QVERIFY_ERROR(dataset_files(ref), "deeper than 32");
  }

  void aFileIsItself() {
    DatasetRef ref;
    ref.name = kParquet + "chat_prompt.parquet";
    QCOMPARE(load_dataset_ref(ref).size(), size_t(24));
    ref.name = kParquet + "README.md";
    QVERIFY_ERROR(dataset_files(ref), "not a dataset file");
    // load_dataset (train_file) reads Parquet by its extension too.
    QCOMPARE(load_dataset(kParquet + "chat_prompt.parquet").size(), size_t(24));
  }
};

QTEST_GUILESS_MAIN(TestDatasetSource)
#include "test_dataset_source.moc"
