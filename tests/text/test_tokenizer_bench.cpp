// The tokenizer benchmark against Hugging Face tokenizers' Rust core (via node, when
// tests/bench has been installed with `npm ci --prefix tests/bench`): our ids must equal
// theirs on ~4 MB of mixed text, and we must run at >= 0.5x their single-thread speed.
#include <QtTest/QtTest>

#include "core/text/tokenizer_bench.h"

class TestTokenizerBench : public QObject {
  Q_OBJECT

private Q_SLOTS:
  void bench_text_is_deterministic() {
    QCOMPARE(grpo::text::bench_text(10000), grpo::text::bench_text(10000));
    QVERIFY(grpo::text::bench_text(10000).size() >= 10000);
  }

  void against_rust() {
    for (const char* name : {"qwen3", "mistral"}) {
      nlohmann::json r = grpo::text::bench_tokenize(
          std::string(GRPO_TEST_DATA) + "/golden/tokenizers/" + name, GRPO_BENCH_DIR);
      qInfo("%s: %s", name, r.dump().c_str());
      QVERIFY(r["load_s"].get<double>() < 1.0);
      if (r["rust_encode_mb_s"].is_null()) {
        QVERIFY(r.contains("rust_error"));
        QSKIP("node or the npm tokenizers package is missing (npm ci --prefix tests/bench)");
      }
      QVERIFY2(r["ids_match"].get<bool>(), "our ids differ from Hugging Face tokenizers'");
#ifdef NDEBUG
      QVERIFY2(r["ratio"].get<double>() >= 0.5, "encode slower than half the Rust library's speed");
#endif
    }
  }
};

QTEST_GUILESS_MAIN(TestTokenizerBench)
#include "test_tokenizer_bench.moc"
