// GRPO advantages and losses against hand-computed values (TRL's formulas; docs/formulas.md,
// "Group advantages", "Clipped surrogate", "KL penalty", "Loss aggregation") and loss gradients
// against central finite differences in double precision.
#include <QtTest>

#include <cmath>
#include <torch/torch.h>

#include "core/common/error.h"
#include "core/grpo/advantages.h"
#include "core/grpo/loss.h"

using namespace grpo::grpo;

namespace {
torch::Tensor d(std::vector<double> v) { return torch::tensor(v, torch::kFloat64); }
bool near(double a, double b, double tol = 1e-9) { return std::fabs(a - b) <= tol; }
}  // namespace

class TestGrpoMath : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void groupAdvantagesUseUnbiasedStd() {
    // One group of 4: rewards 1,0,0,1 -> mean .5, unbiased std sqrt(1/3).
    auto a = compute_advantages(d({1, 0, 0, 1}).view({1, 4}), {}, 4, ScaleRewards::Group);
    const double s = std::sqrt(1.0 / 3.0);
    QVERIFY(near(a.advantages[0].item<double>(), 0.5 / (s + 1e-4)));
    QVERIFY(near(a.advantages[1].item<double>(), -0.5 / (s + 1e-4)));
    QVERIFY(near(a.group_std[0].item<double>(), s));
    QCOMPARE(a.frac_reward_zero_std, 0.0);
  }
  void weightsAndNoneSemantics() {
    // Two functions, two groups of 2. Sample 1: f0 None, f1 = 1 -> reward 2*1 = 2.
    // Sample 3: both None -> unscorable, advantage 0; its group has one scored sample -> std 0.
    auto per = d({1, NAN, 3, NAN, /* f1 */ 0, 1, 5, NAN}).view({2, 4});
    auto a = compute_advantages(per, {1.0, 2.0}, 2, ScaleRewards::None);
    QVERIFY(near(a.rewards[0].item<double>(), 1.0));
    QVERIFY(near(a.rewards[1].item<double>(), 2.0));
    QVERIFY(near(a.rewards[2].item<double>(), 13.0));
    QVERIFY(std::isnan(a.rewards[3].item<double>()));
    QCOMPARE(a.unscorable, int64_t(1));
    QVERIFY(near(a.advantages[0].item<double>(), -0.5));
    QVERIFY(near(a.advantages[1].item<double>(), 0.5));
    QVERIFY(near(a.advantages[2].item<double>(), 0.0));  // only scored sample of its group
    QVERIFY(near(a.advantages[3].item<double>(), 0.0));  // unscorable: 0, not dropped
    QVERIFY(near(a.frac_reward_zero_std, 0.5));
  }
  void batchScaling() {
    // Groups {0,2} and {4,6}: group means 1 and 5; batch std of {0,2,4,6} = sqrt(20/3).
    auto a = compute_advantages(d({0, 2, 4, 6}).view({1, 4}), {}, 2, ScaleRewards::Batch);
    const double s = std::sqrt(20.0 / 3.0);
    QVERIFY(near(a.advantages[0].item<double>(), -1.0 / (s + 1e-4)));
    QVERIFY(near(a.advantages[3].item<double>(), 1.0 / (s + 1e-4)));
  }
  void normalizeThenSumIsGdpo() {
    // Two functions, two groups of three: each function z-scored in its group (unbiased std, +1e-4;
    // a None left out), weighted and summed, then z-scored over the batch. Written out with loops.
    const double nan = std::nan("");
    const std::vector<std::vector<double>> f = {{1, 0, 0, 1, 1, 0}, {0, 2, 4, 3, 3, nan}};
    const std::vector<double> w = {1.0, 0.5};
    std::vector<double> sum(6, 0.0);
    for (size_t k = 0; k < 2; ++k)
      for (int g = 0; g < 2; ++g) {
        double m = 0, n = 0, v = 0;
        for (int i = 0; i < 3; ++i) if (!std::isnan(f[k][g * 3 + i])) m += f[k][g * 3 + i], n += 1;
        m /= n;
        for (int i = 0; i < 3; ++i) if (!std::isnan(f[k][g * 3 + i])) v += (f[k][g * 3 + i] - m) * (f[k][g * 3 + i] - m);
        const double sd = n >= 2 ? std::sqrt(v / (n - 1)) : 0.0;
        for (int i = 0; i < 3; ++i)
          if (!std::isnan(f[k][g * 3 + i])) sum[g * 3 + i] += w[k] * (f[k][g * 3 + i] - m) / (sd + 1e-4);
      }
    double bm = 0, bv = 0;
    for (double x : sum) bm += x / 6;
    for (double x : sum) bv += (x - bm) * (x - bm) / 5;
    auto per = torch::tensor({1., 0., 0., 1., 1., 0., 0., 2., 4., 3., 3., nan}, torch::kFloat64).view({2, 6});
    for (ScaleRewards scale : {ScaleRewards::Group, ScaleRewards::None}) {  // scale_rewards does not apply
      auto a = compute_advantages(per, w, 3, scale, 1e-4, MultiObjective::NormalizeThenSum);
      for (int i = 0; i < 6; ++i)
        QVERIFY2(std::fabs(a.advantages[i].item<double>() - (sum[i] - bm) / (std::sqrt(bv) + 1e-4)) < 1e-12,
                 std::to_string(i).c_str());
      // The reward metrics stay the plain weighted sums (a None counts as nothing).
      QCOMPARE(a.rewards[5].item<double>(), 0.0);
      QCOMPARE(a.rewards[1].item<double>(), 1.0);
    }
    // And it differs from summing first.
    auto s = compute_advantages(per, w, 3, ScaleRewards::Group);
    QVERIFY((s.advantages - compute_advantages(per, w, 3, ScaleRewards::Group, 1e-4, MultiObjective::NormalizeThenSum).advantages).abs().max().item<double>() > 0.1);
  }

  void badShapesAreErrors() {
    QVERIFY_THROWS_EXCEPTION(grpo::Error, compute_advantages(d({1, 2, 3}).view({1, 3}), {}, 2, ScaleRewards::Group));
    QVERIFY_THROWS_EXCEPTION(grpo::Error, compute_advantages(d({1, 2}).view({1, 2}), {1, 2}, 2, ScaleRewards::Group));
    QVERIFY_THROWS_EXCEPTION(grpo::Error, parse_loss_type("ppo", "config.json"));
  }

  void lossAggregationsOnPolicy() {
    // ratio 1 everywhere: per-token loss = -A. A = [1, -0.5]; mask rows [1,1,0,0] and [1,0,0,0].
    LossInputs in;
    in.logp = d({-1, -2, -3, -4, -1, -1, -1, -1}).view({2, 4}).requires_grad_(true);
    in.old_logp = in.logp.detach().clone();
    in.advantages = d({1, -0.5});
    in.mask = d({1, 1, 0, 0, 1, 0, 0, 0}).view({2, 4});
    in.num_items_in_batch = 3;
    LossConfig cfg;
    cfg.max_completion_length = 4;
    auto run = [&](LossType t) { cfg.type = t; return grpo_loss(in, cfg).loss.item<double>(); };
    QVERIFY(near(run(LossType::GRPO), (-1.0 + 0.5) / 2));
    QVERIFY(near(run(LossType::BNPO), (-2.0 + 0.5) / 3));
    QVERIFY(near(run(LossType::DrGRPO), (-2.0 + 0.5) / 8));
    QVERIFY(near(run(LossType::DAPO), (-2.0 + 0.5) / 3));
    in.num_items_in_batch = 6;  // tokens of the whole accumulated batch
    QVERIFY(near(run(LossType::DAPO), (-2.0 + 0.5) / 6));
    cfg.gradient_accumulation_steps = 2;
    QVERIFY(near(run(LossType::GRPO), (-1.0 + 0.5) / 2 / 2));
    auto out = grpo_loss(in, cfg);
    QVERIFY(near(out.metrics["ratio"], 1.0));
    QVERIFY(near(out.metrics["kl"], 0.0));
    QVERIFY(near(out.metrics["clip_ratio/region_mean"], 0.0));
  }
  void clippingAndClipMetrics() {
    // Token 0: log-ratio +0.5 with A=+1 -> clipped at 1+eps_high; token 1: -0.5 with A=-1 -> clipped at 1-eps_low.
    LossInputs in;
    in.old_logp = d({-1, -1}).view({2, 1});
    in.logp = (in.old_logp + d({0.5, -0.5}).view({2, 1})).requires_grad_(true);
    in.advantages = d({1, -1});
    in.mask = d({1, 1}).view({2, 1});
    LossConfig cfg;
    cfg.type = LossType::BNPO;
    cfg.epsilon_low = 0.2;
    cfg.epsilon_high = 0.28;
    auto out = grpo_loss(in, cfg);
    QVERIFY(near(out.loss.item<double>(), (-1.28 + 0.8) / 2));
    out.loss.backward();
    QVERIFY(near(in.logp.grad().abs().sum().item<double>(), 0.0));  // both tokens clipped: no gradient
    QVERIFY(near(out.metrics["clip_ratio/low_mean"], 0.5));
    QVERIFY(near(out.metrics["clip_ratio/high_mean"], 0.5));
    QVERIFY(near(out.metrics["clip_ratio/region_mean"], 1.0));
    QVERIFY(near(out.metrics["clip_ratio/low_min"], 0.0));
    QVERIFY(near(out.metrics["clip_ratio/high_max"], 1.0));
    QVERIFY(near(out.metrics["ratio"], (std::exp(0.5) + std::exp(-0.5)) / 2));
    QVERIFY(near(out.metrics["kl"], ((std::exp(0.5) - 1 - 0.5) + (std::exp(-0.5) - 1 + 0.5)) / 2));
  }
  void gradientsMatchFiniteDifferences() {
    torch::manual_seed(7);
    const int64_t B = 3, T = 5;
    auto old_logp = -torch::rand({B, T}, torch::kFloat64) * 3;
    // Log-ratios in (-0.15, 0.15): inside the clip band, so the loss is smooth where we probe it,
    // plus one far-out token per row that is clipped.
    auto shift = (torch::rand({B, T}, torch::kFloat64) - 0.5) * 0.3;
    shift.index_put_({torch::indexing::Slice(), 0}, 0.7);
    auto ref_logp = old_logp + (torch::rand({B, T}, torch::kFloat64) - 0.5);
    auto mask = (torch::rand({B, T}, torch::kFloat64) > 0.3).to(torch::kFloat64);
    mask.index_put_({torch::indexing::Slice(), 1}, 1.0);
    auto adv = d({1.3, -0.7, 0.4});
    for (LossType t : {LossType::GRPO, LossType::BNPO, LossType::DrGRPO, LossType::DAPO}) {
      LossConfig cfg;
      cfg.type = t;
      cfg.beta = 0.04;
      cfg.epsilon_high = 0.28;
      cfg.max_completion_length = T;
      auto f = [&](const torch::Tensor& logp) {
        LossInputs in{logp, old_logp, ref_logp, adv, mask, 0.0};
        return grpo_loss(in, cfg).loss;
      };
      auto x = (old_logp + shift).clone().requires_grad_(true);
      f(x).backward();
      auto g = x.grad();
      const double h = 1e-6;
      for (int64_t i = 0; i < B; ++i)
        for (int64_t j = 0; j < T; ++j) {
          auto xp = (old_logp + shift).clone(), xm = xp.clone();
          xp[i][j] += h;
          xm[i][j] -= h;
          double fd = (f(xp).item<double>() - f(xm).item<double>()) / (2 * h);
          double an = g[i][j].item<double>();
          if (std::fabs(fd - an) > 1e-7)
            QFAIL(qPrintable(QString("%1: d loss / d logp[%2][%3]: autograd %4, finite difference %5")
                                 .arg(to_string(t)).arg(i).arg(j).arg(an).arg(fd)));
        }
    }
  }
};

QTEST_GUILESS_MAIN(TestGrpoMath)
#include "test_grpo_math.moc"
