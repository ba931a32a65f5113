// `grpo train` on a dataset named as TRL names it: dataset_name is a repo id in a Hugging Face
// cache laid out as huggingface_hub lays it out (blobs + snapshot links + refs/main), its files
// are Parquet written by parquet-wasm (tests/data/arith_dataset: README.md configs, train and test
// splits, TRL conversational prompts with a `solution` column), and the rewards are TRL's names.
// The real CLI on the embedded demo model, a few steps: the run reads the split, logs TRL's metric
// names, evaluates on the test split, and pins the dataset's snapshot commit in its config. A bad
// split stops before anything is written, naming the splits that exist.
// (That the same config learns is measured in BENCHMARKS.md, "Hub dataset".)
#include "tests/common/test_paths.h"
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/common/run_cli.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const std::string kCommit = "4f1d2c3b4a5968778695a4b3c2d1e0f9a8b7c6d5";

// The CLI with the test's Hub cache, offline.
CliResult run_cli_cached(const QStringList& args, const QString& cache, int timeout_ms = 600000) {
  auto env = QProcessEnvironment::systemEnvironment();
  env.insert("HF_HUB_CACHE", cache);
  env.insert("HF_HUB_OFFLINE", "1");
  return run_cli(args, timeout_ms, env);
}

// tests/data/arith_dataset as a cached Hub repo: every file a blob behind a relative link.
void cache_repo(const fs::path& cache) {
  const fs::path repo = cache / "datasets--grpo-test--arith";
  const fs::path snap = repo / "snapshots" / kCommit;
  fs::create_directories(repo / "refs");
  std::ofstream(repo / "refs" / "main") << kCommit;
  const fs::path src = fs::path(GRPO_TEST_DATA) / "arith_dataset";
  int n = 0;
  for (const auto& e : fs::recursive_directory_iterator(src)) {
    if (!e.is_regular_file()) continue;
    const fs::path rel = e.path().lexically_relative(src);
    const fs::path blob = repo / "blobs" / ("blob" + std::to_string(n++));
    fs::create_directories(blob.parent_path());
    fs::copy_file(e.path(), blob);
    fs::create_directories((snap / rel).parent_path());
    fs::create_symlink(blob.lexically_relative((snap / rel).parent_path()), snap / rel);
  }
}

std::string config_yaml(const std::string& split) {
  std::ostringstream y;
  y << "model_name_or_path: " << GRPO_RESOURCES << "/models/tiny-arith\n"
    << "dataset_name: grpo-test/arith\n"
    << "dataset_train_split: " << split << "\n"
    << "dataset_test_split: test\n"
    << "reward_funcs:\n"
    << "  - accuracy_reward\n"
    << "  - {name: soft_overlong_punishment, max_completion_len: 8, soft_punish_cache: 2}\n"
    << "reward_weights: [1.0, 0.5]\n"
    << "num_generations: 4\nprompts_per_step: 8\nmax_prompt_length: 64\nmax_completion_length: 8\n"
    << "temperature: 0.7\nlearning_rate: 2.5e-3\nr: 8\nlora_alpha: 16\ntoken_budget: 256\n"
    << "max_steps: 4\neval_steps: 2\nlogging_steps: 1\nsave_steps: 0\nseed: 7\n";
  return y.str();
}

}  // namespace

class TestHubDatasetRun : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  fs::path root_;

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    root_ = tmp_.path().toStdString();
    cache_repo(root_ / "hub");
  }

  void trainsOnAHubDatasetWithTrlRewardNames() {
    const fs::path cfg = root_ / "run.yaml";
    std::ofstream(cfg) << config_yaml("train");
    const fs::path run = root_ / "run";
    auto r = run_cli_cached({"train", QString::fromStdString(cfg.string()), "--output", QString::fromStdString(run.string())},
                     QString::fromStdString((root_ / "hub").string()));
    QVERIFY2(r.code == 0, r.out.c_str());

    std::ifstream metrics(run / "metrics.jsonl");
    std::string line;
    int steps = 0, evals = 0;
    while (std::getline(metrics, line)) {
      const json m = json::parse(line);
      ++steps;
      QVERIFY2(m.contains("rewards/accuracy_reward/mean"), line.c_str());  // TRL's metric names
      QVERIFY2(m.contains("rewards/soft_overlong_punishment_reward/mean"), line.c_str());
      const double acc = m["rewards/accuracy_reward/mean"].get<double>();
      QVERIFY(acc >= 0.0 && acc <= 1.0);
      if (m.contains("eval/accuracy")) {
        ++evals;
        const double e = m["eval/accuracy"].get<double>();
        QVERIFY2(e >= 0.0 && e <= 1.0, line.c_str());
      }
    }
    QCOMPARE(steps, 4);
    QVERIFY(evals >= 1);

    // The resolved config pins the dataset's snapshot, as it pins the model's.
    std::ifstream in(run / "config.json");
    const json resolved = json::parse(in);
    QCOMPARE(resolved["dataset_name"], json("grpo-test/arith"));
    QCOMPARE(resolved["dataset_revision"], json(kCommit));
    QCOMPARE(resolved["reward_funcs"][0], json("accuracy_reward"));
  }

  void aMissingSplitStopsBeforeWritingAnything() {
    const fs::path cfg = root_ / "bad.yaml";
    std::ofstream(cfg) << config_yaml("validation");
    const fs::path run = root_ / "bad-run";
    auto r = run_cli_cached({"train", QString::fromStdString(cfg.string()), "--output", QString::fromStdString(run.string())},
                     QString::fromStdString((root_ / "hub").string()));
    QVERIFY(r.code != 0);
    QVERIFY2(r.out.find("no data files for split \"validation\"") != std::string::npos, r.out.c_str());
    QVERIFY2(r.out.find("splits found: \"test\", \"train\"") != std::string::npos, r.out.c_str());
    QVERIFY2(!fs::exists(run / "metrics.jsonl"), "a run that cannot read its data wrote metrics");
  }
};

QTEST_GUILESS_MAIN(TestHubDatasetRun)
#include "test_hub_dataset_run.moc"
