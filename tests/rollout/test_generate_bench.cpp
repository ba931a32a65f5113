// `grpo bench generate` on the tiny generated model, for correctness only: the JSON carries its
// keys, figures are positive, every completion has exactly max_tokens tokens. Speed is the
// benchmark's business (BENCHMARKS.md), never an assertion here.
#include <QtTest/QtTest>

#include "core/common/error.h"
#include "tools/generate_bench.h"

class TestGenerateBench : public QObject {
  Q_OBJECT

private Q_SLOTS:
  void tinyModelReportsFigures() {
    grpo::rollout::GenerateBenchOptions o;
    o.size = "tiny";
    o.prompts = 3;
    o.group = 4;
    o.prompt_min = 5;
    o.prompt_max = 11;
    o.max_tokens = 6;
    o.threads = 1;
    nlohmann::json r = grpo::rollout::bench_generate(o);
    qInfo("%s", r.dump().c_str());
    for (const char* key : {"tok_s", "tok_s_unshared", "speedup_shared", "shared_s", "unshared_s", "params",
                            "prompt_len_mean", "max_tokens", "tokens_generated"})
      QVERIFY2(r.contains(key) && r[key].is_number() && r[key].get<double>() > 0, key);
    QCOMPARE(r["tokens_generated"].get<int64_t>(), int64_t(3 * 4 * 6));
    QCOMPARE(r["prompt_len_min"].get<int64_t>(), int64_t(5));
    QCOMPARE(r["prompt_len_max"].get<int64_t>(), int64_t(11));
    QCOMPARE(r["model"].get<std::string>(), std::string("generated-tiny"));
    QVERIFY(r["outputs_match_frac"].get<double>() >= 0.0);
  }

  void missingModelDirectoryIsAnError() {
    grpo::rollout::GenerateBenchOptions o;
    o.model_dir = "/nonexistent/model";
    QVERIFY_THROWS_EXCEPTION(grpo::Error, grpo::rollout::bench_generate(o));
  }
};

QTEST_GUILESS_MAIN(TestGenerateBench)
#include "test_generate_bench.moc"
