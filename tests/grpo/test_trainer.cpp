// The trainer step on a tiny model: gradients of the LoRA factors through the packed forward,
// the chunked LM head and every loss_type against central finite differences (fp64); the base
// weights get no gradient; packing rows differently leaves the loss unchanged.
#include <QtTest>

#include <cmath>
#include <torch/torch.h>

#include "core/grpo/trainer.h"
#include "core/model/causal_lm.h"
#include "tests/common/tiny_lora.h"

namespace io = grpo::io;
namespace model = grpo::model;
namespace algo = grpo::grpo;

namespace {

model::CausalLM tiny_lora_model() { return grpo::testing::tiny_lora_model({}, torch::kFloat64); }

std::vector<algo::TrainSample> make_samples(model::CausalLM& m) {
  return grpo::testing::samples_near_policy(m, {{{1, 2, 3}, {10, 11, 12, 13}, 1.2},
                                                {{4, 5}, {14, 15}, -0.4},
                                                {{6, 7, 8, 9}, {16, 17, 18}, -0.8}});
}

}  // namespace

class TestTrainer : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void gradientsMatchFiniteDifferences() {
    // TRL's losses without a stop-gradient weight (cispo's and vespo's are checked against the
    // reference in test_loss_reference), GSPO, and the two-sided clip.
    const std::vector<std::pair<const char*, const char*>> losses = {
        {"dapo", "token"}, {"grpo", "token"}, {"bnpo", "token"}, {"dr_grpo", "token"},
        {"sapo", "token"}, {"luspo", "sequence"}, {"dapo", "sequence"}, {"grpo", "sequence_token"}};
    for (const auto& [loss_type, level] : losses) {
      auto m = tiny_lora_model();
      auto samples = make_samples(m);
      algo::TrainConfig cfg;
      cfg.loss_type = loss_type;
      cfg.importance_sampling_level = level;
      if (std::string(loss_type) == "bnpo") cfg.delta = 1.05;
      cfg.temperature = 1.0;
      cfg.beta = std::string(loss_type) == "grpo" ? 0.05 : 0.0;  // also checks the KL term
      // The entropy bonus's gradient through the LM head, per-sequence and global-token normalisers.
      if (std::string(loss_type) == "sapo") cfg.entropy_coef = 0.1, cfg.top_entropy_quantile = 0.5;
      if (std::string(loss_type) == "dapo" && std::string(level) == "sequence") cfg.entropy_coef = 0.05;
      cfg.per_device_train_batch_size = 2;                       // two micro-batches: accumulation
      cfg.max_completion_length = 6;
      algo::GrpoTrainer trainer(m, cfg);
      for (auto& p : m->lora_parameters()) p.mutable_grad() = torch::Tensor();
      trainer.forward_backward(samples, true);

      // Base weights get no gradient.
      for (const auto& kv : m->named_base_parameters()) QVERIFY(!kv.value().grad().defined());

      const double h = 1e-6;
      int checked = 0;
      auto named = m->named_lora_parameters();
      for (const auto& kv : named) {
        torch::Tensor p = kv.value();
        auto g = p.grad();
        QVERIFY2(g.defined(), kv.key().c_str());
        for (int64_t idx : {int64_t(0), p.numel() / 2, p.numel() - 1}) {
          double analytic = g.view(-1)[idx].item<double>();
          double orig;
          {
            torch::NoGradGuard ng;
            orig = p.view(-1)[idx].item<double>();
          }
          auto loss_at = [&](double v) {
            torch::NoGradGuard ng;
            p.view(-1)[idx].fill_(v);
            double l = trainer.forward_backward(samples, false).at("loss");
            p.view(-1)[idx].fill_(orig);
            return l;
          };
          double fd = (loss_at(orig + h) - loss_at(orig - h)) / (2 * h);
          double tol = 1e-6 + 1e-5 * std::fabs(fd);
          if (std::fabs(fd - analytic) > tol)
            QFAIL(qPrintable(QString("%1/%2 %3[%4]: autograd %5, finite difference %6")
                                 .arg(loss_type).arg(level).arg(kv.key().c_str()).arg(idx).arg(analytic).arg(fd)));
          ++checked;
        }
      }
      QVERIFY(checked >= 3 * 7 * 2 * 2);
    }
  }

  void proximalCorrectionWeighsTheSamplerGap() {
    auto m = tiny_lora_model();
    auto samples = make_samples(m);
    // The sampler's log-probs: the policy's own, 0.1 lower on every token (undo the helper's jitter).
    for (auto& s : samples)
      for (size_t t = 0; t < s.old_logprobs.size(); ++t) s.old_logprobs[t] -= 0.05f * float(int(t % 3) - 1) + 0.1f;
    algo::TrainConfig cfg;
    cfg.loss_type = "dapo";
    cfg.max_completion_length = 6;
    cfg.per_device_train_batch_size = 3;  // one micro-batch
    cfg.vllm_importance_sampling_correction = true;
    cfg.vllm_importance_sampling_mode = "token_truncate";
    cfg.vllm_importance_sampling_clip_max = 1.05;
    algo::GrpoTrainer trainer(m, cfg);
    auto met = trainer.forward_backward(samples, false);
    // The clip is taken around the trainer's own policy: every ratio is exactly 1.
    QCOMPARE(met.at("ratio_min"), 1.0);
    QCOMPARE(met.at("ratio_max"), 1.0);
    // The gap to the sampler is 0.1 on every token: exp(0.1) = 1.105, truncated to 1.05 everywhere.
    QVERIFY2(std::fabs(met.at("sampling/sampling_logp_difference/mean") - 0.1) < 1e-5,
             std::to_string(met.at("sampling/sampling_logp_difference/mean")).c_str());
    QVERIFY(std::fabs(met.at("sampling/sampling_logp_difference/max") - 0.1) < 1e-5);
    QCOMPARE(met.at("sampling/importance_sampling_ratio/max"), 1.05);
    QCOMPARE(met.at("sampling/importance_sampling_ratio/frac_truncated"), 1.0);
    // dapo with every ratio 1: the loss is -sum_i A_i L_i w / tokens, w = 1.05.
    const double tokens = 4 + 2 + 3;
    const double expect = -(1.2 * 4 - 0.4 * 2 - 0.8 * 3) * 1.05 / tokens;
    QVERIFY2(std::fabs(met.at("loss") - expect) < 1e-6, std::to_string(met.at("loss")).c_str());  // float advantages

    // Per sequence, masked: exp(0.1 L) = 1.49, 1.22, 1.35 for L = 4, 2, 3; above 1.3 is zeroed.
    cfg.vllm_importance_sampling_mode = "sequence_mask";
    cfg.vllm_importance_sampling_clip_max = 1.3;
    trainer.retune(cfg);
    met = trainer.forward_backward(samples, false);
    QVERIFY(std::fabs(met.at("sampling/importance_sampling_ratio/max") - std::exp(0.2)) < 1e-5);  // after masking
    QCOMPARE(met.at("sampling/importance_sampling_ratio/min"), 0.0);
    QVERIFY(std::fabs(met.at("sampling/importance_sampling_ratio/frac_masked") - 2.0 / 3.0) < 1e-12);
    QVERIFY(std::fabs(met.at("loss") - (0.4 * 2 * std::exp(0.2)) / tokens) < 1e-5);
    // Off: the ratio is taken against the sampler itself, exp(0.1) per token.
    cfg.vllm_importance_sampling_correction = false;
    trainer.retune(cfg);
    met = trainer.forward_backward(samples, false);
    QVERIFY(std::fabs(met.at("ratio_min") - std::exp(0.1)) < 1e-5);
    QVERIFY(!met.count("sampling/importance_sampling_ratio/mean"));
  }

  void adaptiveEntropyMovesTheCoefficient() {
    auto m = tiny_lora_model();
    auto samples = make_samples(m);
    algo::TrainConfig cfg;
    cfg.max_completion_length = 6;
    cfg.learning_rate = 1e-4;
    cfg.use_adaptive_entropy = true;
    cfg.entropy_coef = 0.1;
    cfg.entropy_coef_delta = 0.01;
    cfg.entropy_coef_max = 0.115;
    cfg.entropy_target = 1e6;  // every step's entropy is below it: the bonus grows to its ceiling
    algo::GrpoTrainer trainer(m, cfg);
    // Before any step nothing has been measured: no bonus, the same loss as without one.
    algo::TrainConfig plain = cfg;
    plain.use_adaptive_entropy = false;
    plain.entropy_coef = 0.0;
    algo::GrpoTrainer reference(m, plain);
    QCOMPARE(trainer.forward_backward(samples, false).at("loss"), reference.forward_backward(samples, false).at("loss"));
    QVERIFY(std::fabs(trainer.step(samples).at("entropy_coef") - 0.11) < 1e-12);
    QVERIFY(std::fabs(trainer.step(samples).at("entropy_coef") - 0.115) < 1e-12);  // the ceiling
    // Now the bonus applies at the controller's coefficient, exactly as a fixed one would.
    plain.entropy_coef = 0.115;
    reference.retune(plain);
    const double at_ceiling = trainer.forward_backward(samples, false).at("loss");
    QCOMPARE(at_ceiling, reference.forward_backward(samples, false).at("loss"));
    // A checkpoint's controller state: a resumed trainer applies the same bonus at once, where a
    // fresh one applies none before its first measurement.
    const auto state = trainer.controller_state();
    QCOMPARE(state.at("entropy_coef").get<double>(), 0.115);
    algo::GrpoTrainer resumed(m, cfg), fresh(m, cfg);
    resumed.restore_controller_state(nlohmann::json::parse(state.dump()), "state.json");
    QCOMPARE(resumed.forward_backward(samples, false).at("loss"), at_ceiling);
    QVERIFY(fresh.forward_backward(samples, false).at("loss") != at_ceiling);
    for (const auto& bad : {nlohmann::json{{"entropy_coef", "0.1"}}, nlohmann::json{{"entropy_coef", -1}},
                            nlohmann::json{{"last_world_entropy", 1e9}}, nlohmann::json::array()}) {
      bool named = false;
      try {
        fresh.restore_controller_state(bad, "ckpt/state.json");
      } catch (const std::exception& e) {
        named = std::string(e.what()).find("ckpt/state.json") != std::string::npos &&
                std::string(e.what()).find("trainer") != std::string::npos;
      }
      QVERIFY2(named, bad.dump().c_str());
    }
    QVERIFY(fresh.forward_backward(samples, false).at("loss") != at_ceiling);  // a refused state changes nothing
    // Above the target the coefficient falls one delta a step, to its floor, and no bonus applies.
    cfg.entropy_target = 0.0;
    trainer.retune(cfg);
    QVERIFY(std::fabs(trainer.step(samples).at("entropy_coef") - 0.105) < 1e-12);
    plain.entropy_coef = 0.0;
    reference.retune(plain);
    QCOMPARE(trainer.forward_backward(samples, false).at("loss"), reference.forward_backward(samples, false).at("loss"));
  }

  // num_iterations (TRL's mu): the batch's first step records the proximal log-probs, which the
  // second step takes as pi_old although the parameters have moved in between.
  void reusedBatchKeepsTheFirstStepsProximalPolicy() {
    auto m = tiny_lora_model();
    auto samples = make_samples(m);
    for (auto& s : samples)  // the sampler: the policy's own log-probs, 0.1 lower on every token
      for (size_t t = 0; t < s.old_logprobs.size(); ++t) s.old_logprobs[t] -= 0.05f * float(int(t % 3) - 1) + 0.1f;
    algo::TrainConfig cfg;
    cfg.loss_type = "dapo";
    cfg.max_completion_length = 6;
    cfg.per_device_train_batch_size = 2;  // two micro-batches: the record spans both
    cfg.learning_rate = 0.05;
    cfg.num_iterations = 2;
    cfg.vllm_importance_sampling_correction = true;
    cfg.vllm_importance_sampling_mode = "token_truncate";
    cfg.vllm_importance_sampling_clip_max = 100.0;
    algo::GrpoTrainer trainer(m, cfg);
    auto first = trainer.step(samples, 0);
    QCOMPARE(first.at("batch/reuse_pass"), 0.0);
    QCOMPARE(first.at("ratio_min"), 1.0);
    QCOMPARE(first.at("ratio_max"), 1.0);
    // What was recorded is the policy before the update, token by token: 0.1 above the sampler.
    for (const auto& s : samples) {
      QCOMPARE(s.proximal_logprobs.size(), s.completion_ids.size());
      for (size_t t = 0; t < s.completion_ids.size(); ++t)
        QVERIFY2(std::fabs(s.proximal_logprobs[t] - s.old_logprobs[t] - 0.1) < 1e-5,
                 std::to_string(s.proximal_logprobs[t] - s.old_logprobs[t]).c_str());
    }
    auto second = trainer.step(samples, 1);
    QCOMPARE(second.at("batch/reuse_pass"), 1.0);
    // The parameters moved, so the ratio to the recorded policy is no longer 1 ...
    QVERIFY2(second.at("ratio_max") > 1.0 + 1e-4 || second.at("ratio_min") < 1.0 - 1e-4,
             (std::to_string(second.at("ratio_min")) + " " + std::to_string(second.at("ratio_max"))).c_str());
    // ... and the gap it corrects is still the recorded policy's to the sampler (a fresh forward
    // taken as pi_old would have moved it).
    QVERIFY2(std::fabs(second.at("sampling/sampling_logp_difference/mean") - 0.1) < 1e-5,
             std::to_string(second.at("sampling/sampling_logp_difference/mean")).c_str());

    // Without the correction pi_old is the sampler's on every pass: nothing is recorded.
    auto plain_samples = make_samples(m);
    cfg.vllm_importance_sampling_correction = false;
    algo::GrpoTrainer plain(tiny_lora_model(), cfg);
    plain.step(plain_samples, 0);
    for (const auto& s : plain_samples) QVERIFY(s.proximal_logprobs.empty());
    // A batch with the proximal log-probs of some samples only is refused, naming them.
    plain_samples[1].proximal_logprobs.assign(plain_samples[1].completion_ids.size(), 0.0f);
    bool refused = false;
    try {
      plain.step(plain_samples, 1);
    } catch (const std::exception& e) {
      refused = std::string(e.what()).find("proximal log-probs") != std::string::npos;
    }
    QVERIFY(refused);
  }

  // A running loop's trainer shares the loop's one config object (config.h, SharedConfig): no copy
  // that a retune could leave behind.
  void trainerSharesTheRunsConfig() {
    auto cfg = std::make_shared<const algo::TrainConfig>();
    algo::GrpoTrainer trainer(tiny_lora_model(), cfg);
    QVERIFY(&trainer.config() == cfg.get());
    algo::TrainConfig next = *cfg;
    next.learning_rate = 0.02;
    auto retuned = std::make_shared<const algo::TrainConfig>(next);
    trainer.retune(retuned);
    QVERIFY(&trainer.config() == retuned.get());
    QCOMPARE(trainer.optimizer().config().learning_rate, 0.02);
    QCOMPARE(cfg.use_count(), 1L);  // the old one is let go
  }

  void packingDoesNotChangeTheLoss() {
    auto m = tiny_lora_model();
    auto samples = make_samples(m);
    algo::TrainConfig cfg;
    cfg.loss_type = "dapo";
    algo::GrpoTrainer trainer(m, cfg);
    torch::NoGradGuard ng;
    cfg.per_device_train_batch_size = 1;  // one sample per micro-batch
    trainer.retune(cfg);
    double separate = trainer.forward_backward(samples, false).at("loss");
    cfg.per_device_train_batch_size = 3;  // all in one packed row
    trainer.retune(cfg);
    double packed = trainer.forward_backward(samples, false).at("loss");
    cfg.per_device_train_batch_size = 1;
    cfg.token_budget = 12;  // token-budget rows
    trainer.retune(cfg);
    auto budget = trainer.forward_backward(samples, false);
    QVERIFY2(std::fabs(separate - packed) < 1e-10, qPrintable(QString("separate %1 packed %2 budget %3").arg(separate, 0, 'g', 17).arg(packed, 0, 'g', 17).arg(budget.at("loss"), 0, 'g', 17)));
    QVERIFY(std::fabs(separate - budget.at("loss")) < 1e-10);
    QVERIFY(budget.at("batch/samples_per_row") > 1.0);
  }

  // Both sub-row layouts (one forward per sample, or one padded (R, L) block) give the same
  // loss and the same gradients as the automatic choice.
  void rowLayoutsAgree() {
    auto m = tiny_lora_model();
    auto samples = make_samples(m);
    algo::TrainConfig cfg;
    cfg.loss_type = "dapo";
    cfg.token_budget = 4096;  // every sample in one micro-batch
    algo::GrpoTrainer trainer(m, cfg);
    std::map<algo::RowLayout, double> calls;
    auto run = [&](algo::RowLayout layout) {
      trainer.set_row_layout(layout);
      for (auto& p : m->lora_parameters())
        if (p.grad().defined()) p.mutable_grad().zero_();
      const auto metrics = trainer.forward_backward(samples, true);
      const double loss = metrics.at("loss");
      calls[layout] = metrics.at("batch/forward_calls_per_step");
      std::vector<torch::Tensor> grads;
      for (auto& p : m->lora_parameters()) grads.push_back(p.grad().clone());
      return std::make_pair(loss, grads);
    };
    auto [auto_loss, auto_grads] = run(algo::RowLayout::Auto);
    for (auto layout : {algo::RowLayout::Separate, algo::RowLayout::Padded, algo::RowLayout::Segments}) {
      auto [loss, grads] = run(layout);
      QVERIFY2(std::fabs(loss - auto_loss) < 1e-10,
               qPrintable(QString("loss %1 vs auto %2").arg(loss, 0, 'g', 17).arg(auto_loss, 0, 'g', 17)));
      QCOMPARE(grads.size(), auto_grads.size());
      for (size_t i = 0; i < grads.size(); ++i)
        QVERIFY2(torch::allclose(grads[i], auto_grads[i], 1e-8, 1e-12), qPrintable(QString("gradient %1 differs").arg(i)));
    }
    QCOMPARE(calls[algo::RowLayout::Separate], 3.0);  // the layouts really differ: one call a sample
    QCOMPARE(calls[algo::RowLayout::Padded], 1.0);    // against one (R, L) block
    QCOMPARE(calls[algo::RowLayout::Segments], 1.0);  // or one row attended per segment
  }

  // share_prompts: a group's completions attend to one forward of their prompt. The loss and every
  // gradient equal those of the copy-per-completion layout (which packingDoesNotChangeTheLoss ties
  // to one-sample forwards), in every sub-row layout, with token-budget rows that split a group,
  // and with the reference model's KL; the model forwards fewer tokens by exactly the copies saved.
  void sharedPromptsGiveTheSameLossAndGradients() {
    auto m = tiny_lora_model();
    // Two groups of three with prompts of 3 and 5 tokens, and a sample of its own.
    auto samples = grpo::testing::samples_near_policy(m, {{{1, 2, 3}, {10, 11, 12, 13}, 1.2},
                                                          {{4, 5, 6, 7, 8}, {14, 15}, -0.4},
                                                          {{1, 2, 3}, {16}, -0.8},
                                                          {{4, 5, 6, 7, 8}, {17, 18, 19}, 0.9},
                                                          {{9, 8}, {20, 21}, 0.3},
                                                          {{1, 2, 3}, {22, 23, 24}, 0.5},
                                                          {{4, 5, 6, 7, 8}, {25, 26, 27, 28}, -0.6}});
    algo::TrainConfig cfg;
    cfg.loss_type = "dapo";
    cfg.beta = 0.05;  // the reference forward takes the same layout
    cfg.token_budget = 4096;
    algo::GrpoTrainer trainer(m, cfg);
    auto run = [&](bool share, int64_t budget, algo::RowLayout layout) {
      cfg.share_prompts = share;
      cfg.token_budget = budget;
      trainer.retune(cfg);
      trainer.set_row_layout(layout);
      for (auto& p : m->lora_parameters())
        if (p.grad().defined()) p.mutable_grad().zero_();
      auto metrics = trainer.forward_backward(samples, true);
      std::vector<torch::Tensor> grads;
      for (auto& p : m->lora_parameters()) grads.push_back(p.grad().clone());
      return std::make_pair(metrics, grads);
    };
    const auto [plain, plain_grads] = run(false, 4096, algo::RowLayout::Auto);
    const double all_tokens = 3 * 3 + 5 * 3 + 2 + (4 + 1 + 3) + (2 + 3 + 4) + 2;  // prompts, then completions
    QCOMPARE(plain.at("batch/forwarded_tokens_per_step"), all_tokens);
    QCOMPARE(plain.at("batch/shared_prompt_tokens_per_step"), 0.0);
    struct Case {
      int64_t budget;
      algo::RowLayout layout;
      double saved;  // prompt copies not forwarded
    };
    // Budget 10 splits both groups, each into a unit that shares and one that does not:
    // 3+4+1 | 3+3 and 5+2+3 | 5+4.
    for (const Case& c : {Case{4096, algo::RowLayout::Auto, 2 * 3 + 2 * 5}, Case{4096, algo::RowLayout::Separate, 16},
                          Case{4096, algo::RowLayout::Padded, 16}, Case{4096, algo::RowLayout::Segments, 16},
                          Case{10, algo::RowLayout::Auto, 1 * 3 + 1 * 5}, Case{10, algo::RowLayout::Segments, 8}}) {
      const auto [shared, grads] = run(true, c.budget, c.layout);
      const QString what = QString("budget %1 layout %2").arg(c.budget).arg(int(c.layout));
      QVERIFY2(std::fabs(shared.at("loss") - plain.at("loss")) < 1e-10,
               qPrintable(what + QString(": loss %1 vs %2").arg(shared.at("loss"), 0, 'g', 17).arg(plain.at("loss"), 0, 'g', 17)));
      QVERIFY2(std::fabs(shared.at("kl_ref") - plain.at("kl_ref")) < 1e-10, qPrintable(what));
      QVERIFY2(std::fabs(shared.at("entropy") - plain.at("entropy")) < 1e-10, qPrintable(what));
      QCOMPARE(grads.size(), plain_grads.size());
      for (size_t i = 0; i < grads.size(); ++i)
        QVERIFY2(torch::allclose(grads[i], plain_grads[i], 1e-8, 1e-12), qPrintable(what + QString(": gradient %1").arg(i)));
      QCOMPARE(shared.at("batch/shared_prompt_tokens_per_step"), c.saved);
      QCOMPARE(shared.at("batch/forwarded_tokens_per_step"), all_tokens - c.saved);
      QCOMPARE(shared.at("batch/samples_per_step"), 7.0);
      if (c.layout == algo::RowLayout::Segments)  // every row really went through the segmented forward
        QCOMPARE(shared.at("batch/segmented_rows_per_step"), shared.at("batch/microbatches_per_step"));
    }
    // The 10-token rows really split the groups: no row holds more than 10 tokens.
    QVERIFY(run(true, 10, algo::RowLayout::Auto).first.at("batch/row_tokens_max") <= 10.0);
  }

  // The shared layout's mask alone: a completion that attends to a shared prompt gets the hidden
  // states it gets after its own copy of the prompt, and a completion never sees another's tokens.
  void prefixIdsMaskMatchesSeparateSequences() {
    auto m = tiny_lora_model();
    torch::NoGradGuard ng;
    // prompt [1 2 3], completions [10 11] and [12 13 14]; then a sample of its own [5 6 | 15].
    auto ids = torch::tensor({1, 2, 3, 10, 11, 12, 13, 14, 5, 6, 15}, torch::kInt64).unsqueeze(0);
    model::ForwardArgs a;
    a.seq_ids = torch::tensor({9, 9, 9, 0, 0, 1, 1, 1, 2, 2, 2}, torch::kInt64).unsqueeze(0);
    a.prefix_ids = torch::tensor({-1, -1, -1, 9, 9, 9, 9, 9, -1, -1, -1}, torch::kInt64).unsqueeze(0);
    a.position_ids = torch::tensor({0, 1, 2, 3, 4, 3, 4, 5, 0, 1, 2}, torch::kInt64).unsqueeze(0);
    auto h = m->hidden_states(ids, a)[0];  // (T, C)
    auto alone = [&](std::vector<int64_t> tokens) {
      return m->hidden_states(torch::tensor(tokens, torch::kInt64).unsqueeze(0), {})[0];
    };
    auto first = alone({1, 2, 3, 10, 11}), second = alone({1, 2, 3, 12, 13, 14}), own = alone({5, 6, 15});
    QVERIFY(torch::allclose(h.narrow(0, 0, 5), first, 1e-10, 1e-12));
    QVERIFY(torch::allclose(h.narrow(0, 5, 3), second.narrow(0, 3, 3), 1e-10, 1e-12));
    QVERIFY(torch::allclose(h.narrow(0, 8, 3), own, 1e-10, 1e-12));
    // Without prefix_ids the second completion sees neither the prompt nor the first completion.
    a.prefix_ids = torch::Tensor();
    a.position_ids = torch::Tensor();
    auto cut = m->hidden_states(ids, a)[0];
    QVERIFY(torch::allclose(cut.narrow(0, 5, 3), alone({12, 13, 14}), 1e-10, 1e-12));
    // A prefix_ids tensor of another shape is refused.
    a.prefix_ids = torch::full({1, 4}, -1, torch::kInt64);
    bool refused = false;
    try {
      m->hidden_states(ids, a);
    } catch (const std::exception& e) {
      refused = std::string(e.what()).find("prefix_ids") != std::string::npos;
    }
    QVERIFY(refused);
  }

  // Segmented attention (model/segments.h): a completion attending to a shared prompt's span gets
  // the hidden states it gets after its own copy of the prompt, a completion never sees another's
  // tokens, and the gradients through the gathers (a prompt's keys read by several segments) equal
  // those of separate forwards. Bad segment lists are refused with the segment named. Both ways of
  // attending segments: the kernel (segment_attention.h) and buckets.
  void segmentsMatchSeparateSequences_data() {
    QTest::addColumn<int>("path");
    QTest::newRow("segment kernel") << int(model::SegmentPath::Auto);
    QTest::newRow("buckets") << int(model::SegmentPath::Buckets);
  }
  void segmentsMatchSeparateSequences() {
    QFETCH(int, path);
    auto m = tiny_lora_model();
    // prompt [1 2 3], completions [10 11] and [12 13 14]; then a sample of its own [5 6 15].
    const std::vector<int64_t> tokens = {1, 2, 3, 10, 11, 12, 13, 14, 5, 6, 15};
    auto ids = torch::tensor(tokens, torch::kInt64).unsqueeze(0);
    model::ForwardArgs a;
    a.segments = {{0, 3, 0, 0}, {3, 2, 0, 3}, {5, 3, 0, 3}, {8, 3, 0, 0}};
    a.segment_path = model::SegmentPath(path);
    auto alone = [&](std::vector<int64_t> t) { return m->hidden_states(torch::tensor(t, torch::kInt64).unsqueeze(0), {})[0]; };
    auto weights = torch::linspace(-1.0, 1.0, 11 * m->config().hidden_size, torch::kFloat64).view({11, -1});
    auto grads_of = [&](const torch::Tensor& loss) {
      for (auto& p : m->lora_parameters())
        if (p.grad().defined()) p.mutable_grad().zero_();
      loss.backward();
      std::vector<torch::Tensor> g;
      for (auto& p : m->lora_parameters()) g.push_back(p.grad().clone());
      return g;
    };
    auto h = m->hidden_states(ids, a)[0];  // (T, C)
    const auto seg_grads = grads_of((h * weights).sum());
    auto first = alone({1, 2, 3, 10, 11}), second = alone({1, 2, 3, 12, 13, 14}), own = alone({5, 6, 15});
    QVERIFY(torch::allclose(h.narrow(0, 0, 5), first, 1e-10, 1e-12));
    QVERIFY(torch::allclose(h.narrow(0, 5, 3), second.narrow(0, 3, 3), 1e-10, 1e-12));
    QVERIFY(torch::allclose(h.narrow(0, 8, 3), own, 1e-10, 1e-12));
    // The same weighted sum over separate forwards: the prompt's rows once, from the first copy.
    auto sep = (first * weights.narrow(0, 0, 5)).sum() + (second.narrow(0, 3, 3) * weights.narrow(0, 5, 3)).sum() +
               (own * weights.narrow(0, 8, 3)).sum();
    const auto sep_grads = grads_of(sep);
    QCOMPARE(seg_grads.size(), sep_grads.size());
    for (size_t i = 0; i < seg_grads.size(); ++i)
      QVERIFY2(torch::allclose(seg_grads[i], sep_grads[i], 1e-9, 1e-12), qPrintable(QString("gradient %1").arg(i)));
    // Without its prefix the second completion sees only itself.
    a.segments[2].prefix_len = 0;
    {
      torch::NoGradGuard ng;
      QVERIFY(torch::allclose(m->hidden_states(ids, a)[0].narrow(0, 5, 3), alone({12, 13, 14}), 1e-10, 1e-12));
    }
    // Refused: a token in two segments, a token in none, a prefix after its segment, two rows.
    auto refused = [&](std::vector<model::AttentionSegment> segs, const torch::Tensor& input, const char* says) {
      model::ForwardArgs b;
      b.segments = std::move(segs);
      try {
        m->hidden_states(input, b);
      } catch (const std::exception& e) {
        return std::string(e.what()).find(says) != std::string::npos;
      }
      return false;
    };
    QVERIFY(refused({{0, 5, 0, 0}, {3, 8, 0, 0}}, ids, "segment 1: token 3 is already"));
    QVERIFY(refused({{0, 5, 0, 0}, {6, 5, 0, 0}}, ids, "token 5 of the row is in no segment"));
    QVERIFY(refused({{0, 5, 6, 3}, {5, 6, 0, 0}}, ids, "segment 0: its prefix"));
    QVERIFY(refused({{0, 5, 0, 0}, {5, 7, 0, 0}}, ids, "segment 1: tokens [5, +7)"));
    QVERIFY(refused({{0, 11, 0, 0}}, ids.expand({2, 11}), "one row"));
  }

  void stepMovesOnlyLoraParameters() {
    auto m = tiny_lora_model();
    auto samples = make_samples(m);
    algo::TrainConfig cfg;
    cfg.learning_rate = 1e-2;
    algo::GrpoTrainer trainer(m, cfg);
    auto base_before = m->named_base_parameters()["model.layers.0.mlp.up_proj.weight"].clone();
    auto lora_before = m->lora_parameters()[0].clone();
    auto metrics = trainer.step(samples);
    QVERIFY(metrics.at("grad_norm") > 0);
    QCOMPARE(metrics.at("learning_rate"), 1e-2);
    QVERIFY(torch::equal(base_before, m->named_base_parameters()["model.layers.0.mlp.up_proj.weight"]));
    QVERIFY(!torch::equal(lora_before, m->lora_parameters()[0]));
    for (const char* key : {"loss", "ratio", "kl", "entropy", "clip_ratio/region_mean", "completions/mean_length",
                            "batch/samples_per_step", "perf/fwd_bwd_s"})
      QVERIFY2(metrics.count(key), key);
    QCOMPARE(metrics.at("completions/mean_length"), 3.0);

    // The step's model FLOPs, counted by hand from the architecture (model/flops.h): every
    // projection's in*out, the LM head on completion tokens only, r*(in+out) per adapter (the
    // adapters' parameter count), attention over the full L x L square.
    const auto& c = m->config();
    const double h = double(c.hidden_size), q = double(c.q_dim()), kv = double(c.kv_dim());
    const double body = double(c.num_hidden_layers) * (h * q + 2 * h * kv + q * h + 3 * h * double(c.intermediate_size));
    const double head = double(c.vocab_size) * h;
    double lora = 0;
    for (const auto& p : m->lora_parameters()) lora += double(p.numel());
    const double attn = 4.0 * double(c.num_hidden_layers) * q;
    double expected = 0;
    for (const auto& s : samples) {
      const double L = double(s.prompt_ids.size() + s.completion_ids.size()), C = double(s.completion_ids.size());
      expected += 4 * body * L + 4 * head * C + 6 * lora * L + 3 * attn * L * L;
    }
    QVERIFY(lora > 0);
    QVERIFY2(std::abs(metrics.at("perf/train_flops") - expected) <= 1e-9 * expected,
             qPrintable(QString("%1 vs %2").arg(metrics.at("perf/train_flops")).arg(expected)));
  }
};

QTEST_GUILESS_MAIN(TestTrainer)
#include "test_trainer.moc"
