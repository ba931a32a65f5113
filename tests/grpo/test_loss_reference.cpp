// Every loss_type x importance_sampling_level x delta on/off x beta on/off of grpo_loss against
// the PyTorch-eager reference written from TRL's code (tests/grpo/loss_reference.py), in double
// precision on random tensors with ragged masks, an all-padding row, negative, zero and positive
// advantages, and log-ratios from tiny to large (ratios 0.02 to 50): the loss and d loss / d logp
// equal to 1e-6 relative, TRL's metrics equal. The gradients are also checked by central finite
// differences: of the loss itself where it has no stop-gradient (the clipped losses, sapo, luspo,
// and GSPO-token, whose value is the sequence level's and whose gradient equals it when a
// sequence has one advantage); for cispo and vespo, whose weights are stopped functions of the
// log-ratio, by moving logp and old_logp together, which holds the log-ratio and so the weight
// fixed. The off-policy pieces (the proximal/sampler importance-sampling correction in all four
// modes and two sets of bounds, off-policy sequence masking, the top-entropy mask with the entropy
// bonus, whose gradient reaches the entropies, and the bias-corrected KL) are checked the same way
// on each loss type at the token and sequence levels. Pairs TRL refuses are refused. The sampler-side comparison is skipped only when
// /usr/bin/python3 or its torch is missing; nothing depends on timing.
#include "tests/common/test_paths.h"
#include <QtTest/QtTest>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/common/bench_stats.h"
#include "core/common/error.h"
#include "core/common/files.h"
#include "core/grpo/config.h"
#include "core/grpo/loss.h"

using namespace grpo::grpo;
using json = nlohmann::json;

namespace {

const char* kPython = "/usr/bin/python3";

bool python_has_torch() {
  if (!QFileInfo::exists(kPython)) return false;
  return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
}

struct Case {
  LossConfig cfg;
  bool has_delta = false;
  LossInputs in;
  std::string name;
};

const char* mode_name(IsCorrectionMode m) { return kIsCorrectionModes.name(m); }

json rows(const torch::Tensor& t) {
  json out = json::array();
  auto c = t.contiguous();
  for (int64_t i = 0; i < c.size(0); ++i) {
    json r = json::array();
    for (int64_t j = 0; j < c.size(1); ++j) r.push_back(c[i][j].item<double>());
    out.push_back(r);
  }
  return out;
}

// One batch for all cases: B = 6 completions of up to T = 7 tokens.
struct Batch {
  torch::Tensor logp, old_logp, ref_logp, advantages, mask;
  torch::Tensor sampling_logp, entropy;  // the sampler's log-probs (old_logp as the proximal policy's), entropies
};

Batch make_batch() {
  torch::manual_seed(31);
  const int64_t B = 6, T = 7;
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  Batch b;
  b.old_logp = -(torch::rand({B, T}, opts) * 4.0 + 0.01);
  // Log-ratios: most small (inside or near the clip band), a few large and a few tiny ratios.
  auto shift = (torch::rand({B, T}, opts) - 0.5) * 0.6;
  shift[0][1] = 3.9;   // ratio ~50
  shift[1][0] = -3.9;  // ratio ~0.02
  shift[2][2] = 1.2;
  shift[3][1] = -1.1;
  shift[4][3] = 0.9;
  b.logp = b.old_logp + shift;
  b.ref_logp = b.old_logp + (torch::rand({B, T}, opts) - 0.5);
  // Ragged: lengths 7, 3, 5, 1, 0 (all padding), 6.
  const int64_t lens[B] = {7, 3, 5, 1, 0, 6};
  b.mask = torch::zeros({B, T}, opts);
  for (int64_t i = 0; i < B; ++i)
    if (lens[i] > 0) b.mask[i].narrow(0, 0, lens[i]).fill_(1.0);
  // Padding log-probs are zero, as the trainer lays rows out.
  b.logp = b.logp * b.mask;
  b.old_logp = b.old_logp * b.mask;
  b.ref_logp = b.ref_logp * b.mask;
  b.advantages = torch::tensor({1.3, -0.7, 0.0, -1.9, 0.8, 0.45}, opts);
  // The sampler's log-probs, against old_logp as the proximal policy: small gaps, one token far
  // above (masked or truncated per token) and one whole sequence far below the sampler.
  auto gap = (torch::rand({B, T}, opts) - 0.5) * 0.4;
  gap[0][2] = -2.5;                          // sampler far below: proximal/sampler ratio ~12
  gap[5].narrow(0, 0, 6).add_(0.3);          // a sequence the sampler liked more: ratio ~0.17 per sequence
  gap[3][0] = 1.5;                           // negative advantage, far off-policy (masked by OPSM)
  b.sampling_logp = (b.old_logp + gap) * b.mask;
  b.entropy = (torch::rand({B, T}, opts) * 2.0) * b.mask;
  return b;
}

const std::vector<LossType> kTypes = {LossType::GRPO,  LossType::BNPO, LossType::DrGRPO, LossType::DAPO,
                                      LossType::CISPO, LossType::SAPO, LossType::LUSPO,  LossType::VESPO};
const std::vector<ImportanceSamplingLevel> kLevels = {ImportanceSamplingLevel::Token, ImportanceSamplingLevel::Sequence,
                                                      ImportanceSamplingLevel::SequenceToken};

std::vector<Case> make_cases(const Batch& b) {
  std::vector<Case> cases;
  for (LossType t : kTypes)
    for (ImportanceSamplingLevel l : kLevels)
      for (bool delta : {false, true})
        for (double beta : {0.0, 0.04}) {
          if (refused_loss_level(t, l)) continue;
          Case c;
          c.cfg.type = t;
          c.cfg.level = l;
          c.cfg.epsilon_low = 0.2;
          c.cfg.epsilon_high = t == LossType::CISPO ? 2.0 : 0.28;  // cispo: the ratio's cap
          c.cfg.delta = delta ? 1.5 : 0.0;
          c.has_delta = delta;
          c.cfg.sapo_temperature_pos = 1.0;
          c.cfg.sapo_temperature_neg = 1.05;
          c.cfg.vespo_k_pos = 2.0, c.cfg.vespo_lambda_pos = 3.0, c.cfg.vespo_k_neg = 3.0, c.cfg.vespo_lambda_neg = 2.0;
          c.cfg.beta = beta;
          c.cfg.max_completion_length = 10;
          c.cfg.gradient_accumulation_steps = 2;
          c.in = LossInputs{b.logp, b.old_logp, b.ref_logp, b.advantages, b.mask, 33.0};
          c.name = std::string(to_string(t)) + "/" + to_string(l) + (delta ? "/delta" : "") + (beta != 0 ? "/beta" : "");
          cases.push_back(c);
        }
  // The off-policy pieces on each loss type at the token and sequence levels: the proximal
  // correction in every mode with two sets of bounds, off-policy masking with and without it, the
  // top-entropy mask with the entropy bonus, and the bias-corrected KL.
  for (LossType t : kTypes)
    for (ImportanceSamplingLevel l : {ImportanceSamplingLevel::Token, ImportanceSamplingLevel::Sequence}) {
      Case base;
      base.cfg.type = t;
      base.cfg.level = l;
      base.cfg.epsilon_high = t == LossType::CISPO ? 2.0 : 0.28;
      base.cfg.max_completion_length = 10;
      base.cfg.gradient_accumulation_steps = 2;
      base.in = LossInputs{b.logp, b.old_logp, b.ref_logp, b.advantages, b.mask, 33.0};
      const std::string stem = std::string(to_string(t)) + "/" + to_string(l);
      for (IsCorrectionMode m : {IsCorrectionMode::TokenTruncate, IsCorrectionMode::TokenMask,
                                 IsCorrectionMode::SequenceTruncate, IsCorrectionMode::SequenceMask})
        for (bool tight : {false, true}) {
          Case c = base;
          c.cfg.is_correction = true;
          c.cfg.is_mode = m;
          c.cfg.is_clip_max = tight ? 1.5 : 3.0;
          if (tight) c.cfg.is_clip_min = 0.6;
          c.in.sampling_logp = b.sampling_logp;
          c.name = stem + "/is:" + mode_name(m) + (tight ? "[0.6,1.5]" : "[,3]");
          cases.push_back(c);
        }
      for (bool correction : {false, true}) {
        Case c = base;
        c.cfg.off_policy_mask_threshold = 0.05;
        if (correction) {
          c.cfg.is_correction = true;
          c.in.sampling_logp = b.sampling_logp;
        }
        c.name = stem + "/opsm" + (correction ? "+is" : "");
        cases.push_back(c);
      }
      {
        Case c = base;
        c.cfg.top_entropy_quantile = 0.6;
        c.cfg.entropy_bonus = true;
        c.cfg.entropy_coef = 0.05;
        c.in.entropy = b.entropy;
        c.name = stem + "/entropy";
        cases.push_back(c);
      }
      {
        Case c = base;
        c.cfg.beta = 0.04;
        c.cfg.use_bias_correction_kl = true;
        c.name = stem + "/beta-bias-corrected";
        cases.push_back(c);
      }
    }
  return cases;
}

json case_json(const Case& c) {
  json cfg = {{"loss_type", to_string(c.cfg.type)},
              {"importance_sampling_level", to_string(c.cfg.level)},
              {"epsilon", c.cfg.epsilon_low},
              {"epsilon_high", c.cfg.epsilon_high},
              {"delta", c.has_delta ? json(c.cfg.delta) : json(nullptr)},
              {"sapo_temperature_pos", c.cfg.sapo_temperature_pos},
              {"sapo_temperature_neg", c.cfg.sapo_temperature_neg},
              {"vespo_k_pos", c.cfg.vespo_k_pos},
              {"vespo_lambda_pos", c.cfg.vespo_lambda_pos},
              {"vespo_k_neg", c.cfg.vespo_k_neg},
              {"vespo_lambda_neg", c.cfg.vespo_lambda_neg},
              {"beta", c.cfg.beta},
              {"use_bias_correction_kl", c.cfg.use_bias_correction_kl},
              {"max_completion_length", c.cfg.max_completion_length},
              {"off_policy_mask_threshold", c.cfg.off_policy_mask_threshold ? json(*c.cfg.off_policy_mask_threshold) : json(nullptr)},
              {"top_entropy_quantile", c.cfg.top_entropy_quantile},
              {"entropy_bonus", c.cfg.entropy_bonus},
              {"entropy_coef", c.cfg.entropy_coef},
              {"vllm_importance_sampling_correction", c.cfg.is_correction},
              {"vllm_importance_sampling_mode", mode_name(c.cfg.is_mode)},
              {"vllm_importance_sampling_clip_min", c.cfg.is_clip_min ? json(*c.cfg.is_clip_min) : json(nullptr)},
              {"vllm_importance_sampling_clip_max", c.cfg.is_clip_max ? json(*c.cfg.is_clip_max) : json(nullptr)}};
  json j = {{"config", cfg},
          {"logp", rows(c.in.logp)},
          {"old_logp", rows(c.in.old_logp)},
          {"ref_logp", rows(c.in.ref_logp)},
          {"advantages", [&] { json a = json::array(); for (int64_t i = 0; i < c.in.advantages.size(0); ++i) a.push_back(c.in.advantages[i].item<double>()); return a; }()},
          {"mask", rows(c.in.mask)},
          {"num_items_in_batch", c.in.num_items_in_batch},
          {"gradient_accumulation_steps", c.cfg.gradient_accumulation_steps}};
  if (c.in.sampling_logp.defined()) j["sampling_logp"] = rows(c.in.sampling_logp);
  if (c.in.entropy.defined()) j["entropy"] = rows(c.in.entropy);
  return j;
}

// Loss and d loss / d logp of grpo_loss at `logp` and `old_logp`.
std::pair<double, torch::Tensor> ours(const Case& c, const torch::Tensor& logp, const torch::Tensor& old_logp) {
  LossInputs in = c.in;
  in.logp = logp.clone().requires_grad_(true);
  in.old_logp = old_logp;
  auto out = grpo_loss(in, c.cfg);
  out.loss.backward();
  return {out.loss.item<double>(), in.logp.grad()};
}

// The loss with logp and old_logp moved; the sampler's log-probs move with old_logp by `co_shift`
// (so the proximal/sampler ratio and the off-policy gap are held where the test co-moves).
double loss_at(const Case& c, const torch::Tensor& logp, const torch::Tensor& old_logp, const torch::Tensor& co_shift) {
  LossInputs in = c.in;
  in.logp = logp;
  in.old_logp = old_logp;
  if (in.sampling_logp.defined()) in.sampling_logp = in.sampling_logp + co_shift;
  return grpo_loss(in, c.cfg).loss.item<double>();
}

bool close(double a, double ref, double rtol, double floor) { return std::fabs(a - ref) <= rtol * std::max(std::fabs(ref), floor); }

}  // namespace

class TestLossReference : public QObject {
  Q_OBJECT

private Q_SLOTS:
  void matchesTrlReference() {
    if (!python_has_torch()) QSKIP("/usr/bin/python3 with torch is missing (apt install python3-torch)");
    const Batch b = make_batch();
    const auto cases = make_cases(b);
    json all = {{"cases", json::array()}};
    for (const auto& c : cases) all["cases"].push_back(case_json(c));
    const auto dir = std::filesystem::temp_directory_path() / ("grpo-loss-ref-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string in_path = (dir / "cases.json").string();
    grpo::write_file_atomic(in_path, all.dump());
    const std::string script = std::string(GRPO_TEST_DATA) + "/../grpo/loss_reference.py";
    const std::string cmd = std::string(kPython) + " " + grpo::shell_quote(script) + " " + grpo::shell_quote(in_path) + " 2>&1";
    std::string output;
    FILE* p = popen(cmd.c_str(), "r");
    QVERIFY(p != nullptr);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) output.append(buf, n);
    const int status = pclose(p);
    std::filesystem::remove_all(dir);
    QVERIFY2(status == 0, output.c_str());
    const json py = json::parse(output.substr(output.find('{')));
    QCOMPARE(py["results"].size(), cases.size());

    // Worst |loss - reference| and |grad - reference| per loss_type/level (the report's table).
    std::map<std::string, std::pair<double, double>> worst;
    for (size_t k = 0; k < cases.size(); ++k) {
      const Case& c = cases[k];
      const json& r = py["results"][k];
      auto [loss, grad] = ours(c, c.in.logp, c.in.old_logp);
      const double ref_loss = r["loss"].get<double>();
      auto key = std::string(to_string(c.cfg.type)) + " " + to_string(c.cfg.level) + (c.cfg.is_correction ? " +IS" : "");
      auto& w = worst[key];
      w.first = std::max(w.first, std::fabs(loss - ref_loss));
      QVERIFY2(close(loss, ref_loss, 1e-6, 1e-12),
               qPrintable(QString("%1: loss %2, reference %3").arg(c.name.c_str()).arg(loss, 0, 'g', 17).arg(ref_loss, 0, 'g', 17)));
      for (int64_t i = 0; i < grad.size(0); ++i)
        for (int64_t j = 0; j < grad.size(1); ++j) {
          const double g = grad[i][j].item<double>(), ref = r["grad"][i][j].get<double>();
          w.second = std::max(w.second, std::fabs(g - ref));
          if (!close(g, ref, 1e-6, 1e-12))
            QFAIL(qPrintable(QString("%1: d loss / d logp[%2][%3] = %4, reference %5")
                                 .arg(c.name.c_str()).arg(i).arg(j).arg(g, 0, 'g', 17).arg(ref, 0, 'g', 17)));
        }
      if (c.cfg.entropy_bonus) {  // the bonus's gradient reaches the entropies
        LossInputs in = c.in;
        in.entropy = c.in.entropy.clone().requires_grad_(true);
        grpo_loss(in, c.cfg).loss.backward();
        QVERIFY2(r.contains("entropy_grad") && !r["entropy_grad"].is_null(), c.name.c_str());
        for (int64_t i = 0; i < in.entropy.size(0); ++i)
          for (int64_t j = 0; j < in.entropy.size(1); ++j) {
            const double g = in.entropy.grad()[i][j].item<double>(), ref = r["entropy_grad"][i][j].get<double>();
            if (!close(g, ref, 1e-6, 1e-12))
              QFAIL(qPrintable(QString("%1: d loss / d entropy[%2][%3] = %4, reference %5")
                                   .arg(c.name.c_str()).arg(i).arg(j).arg(g, 0, 'g', 17).arg(ref, 0, 'g', 17)));
          }
      }
      // TRL's metrics, under TRL's names.
      LossInputs in = c.in;
      auto out = grpo_loss(in, c.cfg);
      for (const auto& [name, v] : r["metrics"].items()) {
        QVERIFY2(out.metrics.count(name), qPrintable(QString("%1: no metric %2").arg(c.name.c_str(), name.c_str())));
        QVERIFY2(std::fabs(out.metrics.at(name) - v.get<double>()) <= 1e-9,
                 qPrintable(QString("%1: %2 = %3, reference %4").arg(c.name.c_str(), name.c_str()).arg(out.metrics.at(name)).arg(v.get<double>())));
      }
      for (const char* name : {"clip_ratio/region_mean", "cispo_clip_ratio", "vespo/phi_seq_mean",
                               "sampling/importance_sampling_ratio/mean", "sampling/importance_sampling_ratio/frac_masked",
                               "sampling/importance_sampling_ratio/frac_truncated", "off_policy_mask/frac_dropped",
                               "entropy_mask/frac_trained"})
        QVERIFY2(out.metrics.count(name) == r["metrics"].count(name),
                 qPrintable(QString("%1: metric %2 logged by one side only").arg(c.name.c_str(), name)));
    }
    QString table = "\nloss_type level | max |loss - ref| | max |grad - ref|\n";
    for (const auto& [k, v] : worst) table += QString("%1 | %2 | %3\n").arg(k.c_str()).arg(v.first, 0, 'g', 3).arg(v.second, 0, 'g', 3);
    qInfo("%s", qPrintable(table));
  }

  void gradientsMatchFiniteDifferences() {
    const Batch b = make_batch();
    const double h = 1e-6;
    for (const Case& c : make_cases(b)) {
      // cispo, vespo: the weight is a stopped function of the log-ratio; moving old_logp with logp
      // holds it, so the difference quotient is the gradient autograd gives.
      const bool co_move = c.cfg.type == LossType::CISPO || c.cfg.type == LossType::VESPO;
      // Except that the bias-corrected KL is the importance weight times the KL: co-moving holds
      // the weight, so its own gradient would be missed. The reference comparison covers it.
      if (co_move && c.cfg.use_bias_correction_kl) continue;
      auto [loss, grad] = ours(c, c.in.logp, c.in.old_logp);
      (void)loss;
      for (int64_t i = 0; i < grad.size(0); ++i)
        for (int64_t j = 0; j < grad.size(1); ++j) {
          auto e = torch::zeros_like(c.in.logp);
          e[i][j] = h;
          const auto old_p = co_move ? c.in.old_logp + e : c.in.old_logp;
          const auto old_m = co_move ? c.in.old_logp - e : c.in.old_logp;
          const auto co = co_move ? e : torch::zeros_like(e);
          const double fd = (loss_at(c, c.in.logp + e, old_p, co) - loss_at(c, c.in.logp - e, old_m, -co)) / (2 * h);
          const double an = grad[i][j].item<double>();
          if (std::fabs(fd - an) > 1e-6 * std::max(std::fabs(an), 1e-2))
            QFAIL(qPrintable(QString("%1: d loss / d logp[%2][%3]: autograd %4, finite difference %5")
                                 .arg(c.name.c_str()).arg(i).arg(j).arg(an, 0, 'g', 12).arg(fd, 0, 'g', 12)));
          if (c.in.mask[i][j].item<double>() == 0.0) QCOMPARE(an, 0.0);  // padding takes no gradient
        }
    }
  }

  void gspoTokenIsGspoWithOneAdvantagePerSequence() {
    // Same value and, with one advantage per sequence, the same gradient as the sequence level.
    const Batch b = make_batch();
    for (const Case& c : make_cases(b)) {
      if (c.cfg.level != ImportanceSamplingLevel::SequenceToken) continue;
      Case s = c;
      s.cfg.level = ImportanceSamplingLevel::Sequence;
      auto [l1, g1] = ours(c, c.in.logp, c.in.old_logp);
      auto [l2, g2] = ours(s, s.in.logp, s.in.old_logp);
      QVERIFY2(std::fabs(l1 - l2) <= 1e-12 * std::max(1.0, std::fabs(l2)), c.name.c_str());
      QVERIFY2((g1 - g2).abs().max().item<double>() <= 1e-12, c.name.c_str());
    }
  }

  void refusedPairsAreRefused() {
    const Batch b = make_batch();
    for (LossType t : {LossType::CISPO, LossType::SAPO, LossType::LUSPO, LossType::VESPO}) {
      LossConfig cfg;
      cfg.type = t;
      cfg.level = ImportanceSamplingLevel::SequenceToken;
      LossInputs in{b.logp, b.old_logp, b.ref_logp, b.advantages, b.mask, 0.0};
      QVERIFY_THROWS_EXCEPTION(grpo::Error, grpo_loss(in, cfg));
      TrainConfig tc;
      tc.model_name_or_path = "m";
      tc.task = "arith";
      tc.loss_type = to_string(t);
      tc.importance_sampling_level = "sequence_token";
      try {
        tc.validate("run.yaml");
        QFAIL("validate accepted a pair TRL refuses");
      } catch (const grpo::Error& e) {
        const std::string what = e.what();
        QVERIFY2(what.find("Unknown loss type") != std::string::npos && what.find(to_string(t)) != std::string::npos,
                 what.c_str());
      }
      tc.importance_sampling_level = "sequence";
      tc.validate("run.yaml");  // GSPO itself takes every loss
    }
  }

  void twoSidedClipCapsTheRatio() {
    // One token with A = -1 and rho = 3: -min(3 * -1, 1.28 * -1) = 3 without delta, and
    // min(3, delta) = 1.5 with delta 1.5 (INTELLECT-2's cap on the negative-advantage side).
    auto d = [](std::vector<double> v) { return torch::tensor(v, torch::kFloat64); };
    LossInputs in;
    in.old_logp = d({-1.0}).view({1, 1});
    in.logp = (in.old_logp + std::log(3.0)).requires_grad_(true);
    in.advantages = d({-1.0});
    in.mask = d({1.0}).view({1, 1});
    LossConfig cfg;
    cfg.type = LossType::BNPO;
    cfg.epsilon_high = 0.28;
    QVERIFY(std::fabs(grpo_loss(in, cfg).loss.item<double>() - 3.0) < 1e-12);
    cfg.delta = 1.5;
    auto out = grpo_loss(in, cfg);
    QVERIFY(std::fabs(out.loss.item<double>() - 1.5) < 1e-12);
    out.loss.backward();
    QVERIFY(std::fabs(in.logp.grad().item<double>()) < 1e-15);  // capped: no gradient
  }
};

QTEST_GUILESS_MAIN(TestLossReference)
#include "test_loss_reference.moc"
