// The tokenizer benchmark's text against Hugging Face tokenizers' Rust core (via node, when
// tests/bench has been installed with `npm ci --prefix tests/bench`): our ids must equal theirs
// on ~4 MB of mixed text. Speed is the benchmark's business (`grpo bench tokenize`,
// BENCHMARKS.md), never an assertion here.
#include "tests/common/test_paths.h"
#include <QtTest/QtTest>

#include "tools/tokenizer_bench.h"

class TestTokenizerBench : public QObject {
  Q_OBJECT

private Q_SLOTS:
  void bench_text_is_deterministic() {
    QCOMPARE(grpo::text::bench_text(10000), grpo::text::bench_text(10000));
    QVERIFY(grpo::text::bench_text(10000).size() >= 10000);
  }

  void ids_match_rust_on_bench_text() {
    for (const char* name : {"qwen3", "mistral"}) {
      nlohmann::json r = grpo::text::bench_tokenize(
          std::string(GRPO_TEST_DATA) + "/golden/tokenizers/" + name, GRPO_BENCH_DIR);
      qInfo("%s: %s", name, r.dump().c_str());
      QVERIFY(r["load_s"].get<double>() > 0.0);
      if (r["rust_encode_mb_s"].is_null()) {
        QVERIFY(r.contains("rust_error"));
        QSKIP("node or the npm tokenizers package is missing (npm ci --prefix tests/bench)");
      }
      QVERIFY2(r["ids_match"].get<bool>(), "our ids differ from Hugging Face tokenizers'");
    }
  }
};

QTEST_GUILESS_MAIN(TestTokenizerBench)
#include "test_tokenizer_bench.moc"
