// Learning-rate schedules against transformers.get_scheduler's formulas; AdamW's first step,
// gradient clipping, and optimizer state save/load.
#include <QtTest>

#include <cmath>
#include <torch/torch.h>

#include "core/common/error.h"
#include "core/grpo/optimizer.h"

using namespace grpo::grpo;

class TestOptimizer : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void schedules() {
    // total 10, warmup_ratio 0.1 -> 1 warmup step.
    QCOMPARE(scheduled_lr(1.0, "linear", 0, 10, 0.1), 0.0);
    QCOMPARE(scheduled_lr(1.0, "linear", 1, 10, 0.1), 1.0);
    QVERIFY(std::fabs(scheduled_lr(1.0, "linear", 5, 10, 0.1) - (1.0 - 4.0 / 9.0)) < 1e-12);
    QCOMPARE(scheduled_lr(1.0, "linear", 10, 10, 0.1), 0.0);
    QVERIFY(std::fabs(scheduled_lr(2.0, "cosine", 5, 10, 0.1) - 2.0 * 0.5 * (1 + std::cos(M_PI * 4.0 / 9.0))) < 1e-12);
    QCOMPARE(scheduled_lr(3.0, "constant", 7, 10, 0.0), 3.0);
    QCOMPARE(scheduled_lr(3.0, "constant", 0, 10, 0.2), 0.0);  // warmup honoured
    QVERIFY_THROWS_EXCEPTION(::grpo::Error, scheduled_lr(1.0, "exotic", 1, 10, 0.0));
  }
  void adamwFirstStepAndClipping() {
    auto p = torch::tensor({1.0, -2.0}, torch::kFloat32).requires_grad_(true);
    OptimizerConfig cfg;
    cfg.learning_rate = 0.1;
    cfg.max_grad_norm = 1.0;
    cfg.weight_decay = 0.0;
    Optimizer opt({p}, cfg);
    p.mutable_grad() = torch::tensor({3.0, 4.0}, torch::kFloat32);  // norm 5 -> clipped to 1
    double norm = opt.step();
    QVERIFY(std::fabs(norm - 5.0) < 1e-5);
    // Adam's first step moves each coordinate by lr * g/|g| (bias-corrected), whatever the scale.
    QVERIFY(std::fabs(p[0].item<double>() - 0.9) < 1e-5);
    QVERIFY(std::fabs(p[1].item<double>() - (-2.1)) < 1e-5);
    QCOMPARE(opt.steps_done(), int64_t(1));
  }
  void stateRoundTrip() {
    QTemporaryDir dir;
    auto run = [](Optimizer& opt, torch::Tensor& p, int steps) {
      for (int i = 0; i < steps; ++i) {
        p.mutable_grad() = torch::sin(p.detach() * (i + 1));
        opt.step();
      }
    };
    OptimizerConfig cfg;
    cfg.learning_rate = 0.05;
    cfg.lr_scheduler_type = "cosine";
    cfg.total_steps = 8;
    auto a = torch::linspace(-1, 1, 6).requires_grad_(true);
    Optimizer oa({a}, cfg);
    run(oa, a, 3);
    std::string path = dir.path().toStdString() + "/optimizer.pt";
    oa.save(path);
    auto b = a.detach().clone().requires_grad_(true);
    Optimizer ob({b}, cfg);
    ob.load(path);
    QCOMPARE(ob.steps_done(), int64_t(3));
    run(oa, a, 3);
    run(ob, b, 3);
    QVERIFY(torch::allclose(a, b, 0, 0));  // identical continuation: moments and step restored
    QVERIFY_THROWS_EXCEPTION(::grpo::Error, ob.load(path + ".missing"));
  }
};

QTEST_GUILESS_MAIN(TestOptimizer)
#include "test_optimizer.moc"
