// `grpo bench grpo-step` on the tiny generated model, for correctness only: our trainer's step
// and the PyTorch-eager baseline (tests/bench/grpo_step_baseline.py, TRL's math) give the same
// loss and grad_norm on the same model, adapter and ragged batch for every loss type of TRL's
// (and GSPO, GSPO-token, the two-sided clip), and the JSON carries its keys.
// No timing assertions (speed lives in BENCHMARKS.md). Skipped only when /usr/bin/python3 or its
// torch is missing.
#include "tests/common/test_paths.h"
#include <QtTest/QtTest>

#include <cmath>
#include <cstdlib>

#include "core/common/error.h"
#include "tools/grpo_step_bench.h"

namespace {

const char* kPython = "/usr/bin/python3";

bool python_has_torch() {
  if (!QFileInfo::exists(kPython)) return false;
  return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
}

grpo::grpo::GrpoStepBenchOptions tiny_options() {
  grpo::grpo::GrpoStepBenchOptions o;
  o.size = "tiny";
  o.prompts = 3;
  o.group = 3;
  o.prompt_min = 4;
  o.prompt_max = 12;
  o.completion_min = 2;
  o.completion_max = 15;
  o.token_budget = 48;
  o.per_device_train_batch_size = 4;
  o.lora_r = 4;
  o.lora_alpha = 8;
  o.learning_rate = 1e-3;  // large enough that later steps' losses check the AdamW update
  o.iters = 2;
  o.threads = 1;
  o.python = kPython;
  o.script = std::string(GRPO_TEST_DATA) + "/../bench/grpo_step_baseline.py";
  return o;
}

}  // namespace

class TestGrpoStepBench : public QObject {
  Q_OBJECT

private Q_SLOTS:
  void oursAndPythonAgree_data() {
    QTest::addColumn<qint64>("token_budget");
    QTest::addColumn<QString>("loss_type");
    QTest::addColumn<QString>("level");
    QTest::newRow("packed rows") << qint64(48) << "dapo" << "";
    QTest::newRow("fixed-count micro-batches") << qint64(0) << "dapo" << "";
    // Every other loss type of TRL's, and GSPO; the per-micro-batch ones on the baseline's micro-batches.
    for (const char* t : {"grpo", "bnpo", "dr_grpo", "cispo", "sapo", "luspo", "vespo"})
      QTest::newRow(t) << qint64(48) << t << "";
    QTest::newRow("dapo, GSPO") << qint64(48) << "dapo" << "sequence";
    QTest::newRow("grpo, GSPO-token") << qint64(48) << "grpo" << "sequence_token";
  }

  void oursAndPythonAgree() {
    if (!python_has_torch()) QSKIP("/usr/bin/python3 with torch is missing (apt install python3-torch)");
    QFETCH(qint64, token_budget);
    QFETCH(QString, loss_type);
    QFETCH(QString, level);
    auto o = tiny_options();
    o.token_budget = token_budget;
    o.loss_type = loss_type.toStdString();
    o.importance_sampling_level = level.toStdString();
    if (o.loss_type == "cispo") o.epsilon_high = 1.05;  // some tokens above the cap
    if (o.loss_type == "dapo" && level.isEmpty()) o.delta = 1.1;  // the two-sided cap is used too
    nlohmann::json r = grpo::grpo::bench_grpo_step(o);  // throws on a mismatch
    qInfo("%s", r.dump().c_str());
    for (const char* key : {"tok_s", "python_tok_s", "speedup", "step_s", "python_step_s", "samples", "tokens",
                            "params", "grad_norm", "python_grad_norm", "python_padded_tokens"})
      QVERIFY2(r.contains(key) && r[key].is_number() && r[key].get<double>() > 0, key);
    for (const char* key : {"loss", "python_loss", "loss_abs_diff", "loss_rel_diff"})
      QVERIFY2(r.contains(key) && r[key].is_number(), key);
    QCOMPARE(r["samples"].get<int64_t>(), int64_t(9));
    QCOMPARE(r["loss_type"].get<std::string>(), o.loss_type);
    const double loss = r["loss"].get<double>(), py = r["python_loss"].get<double>();
    QVERIFY2(std::fabs(loss - py) <= 1e-4 * std::max(1e-3, std::fabs(loss)),
             qPrintable(QString("ours %1, Python %2").arg(loss, 0, 'g', 10).arg(py, 0, 'g', 10)));
    QCOMPARE(r["losses"].size(), size_t(3));
    QCOMPARE(r["python_losses"].size(), size_t(3));
    // The steps changed the adapter: later losses differ from the first.
    QVERIFY(r["losses"][2].get<double>() != r["losses"][0].get<double>());
  }

  void refusedLossesAreErrors() {
    auto o = tiny_options();
    o.loss_type = "sapo";
    o.importance_sampling_level = "sequence_token";
    QVERIFY_THROWS_EXCEPTION(grpo::Error, grpo::grpo::bench_grpo_step(o));
    o.loss_type = "ppo";
    o.importance_sampling_level = "";
    QVERIFY_THROWS_EXCEPTION(grpo::Error, grpo::grpo::bench_grpo_step(o));
  }

  void brokenBaselineIsAnError() {
    auto o = tiny_options();
    o.script = "/nonexistent/grpo_step_baseline.py";
    QVERIFY_THROWS_EXCEPTION(grpo::Error, grpo::grpo::bench_grpo_step(o));
  }
};

QTEST_GUILESS_MAIN(TestGrpoStepBench)
#include "test_grpo_step_bench.moc"
