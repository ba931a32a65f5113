// Sampler: determinism under a seed, independence from batching and prefix sharing, the
// top-k/top-p/min-p masks, stop tokens, stop strings and length limits, the empirical sampling
// distribution, and agreement between the sampler's log-probs and a full teacher-forced forward
// (the trainer's recomputation): |ratio - 1| <= 1e-4 in fp32.
#include "tests/common/test_paths.h"
#include <QtTest>

#include <cmath>
#include <torch/torch.h>

#include "core/model/causal_lm.h"
#include "core/rollout/sampler.h"
#include "core/text/tokenizer.h"
#include "tests/common/tiny_model.h"

using namespace grpo;

namespace {

io::ModelConfig tiny_config(int64_t vocab = 48) { return testing::tiny_qwen2_config(vocab, 32); }

model::CausalLM tiny_model(int64_t vocab = 48, double init_std = 0.3) {
  torch::manual_seed(1234);
  model::CausalLM m(model::CausalLMOptions(tiny_config(vocab)));
  m->init_weights(init_std);  // a large std gives peaked, varied next-token distributions
  return m;
}

const std::vector<std::vector<int64_t>> kPrompts = {{1, 5, 7}, {2, 3}, {9, 4, 4, 11, 6}};

}  // namespace

class TestSampler : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void deterministicUnderSeed() {
    auto m = tiny_model();
    rollout::Sampler s(m);
    rollout::SamplingParams p;
    p.max_tokens = 12;
    p.seed = 7;
    auto a = s.generate(kPrompts, 4, p);
    auto b = s.generate(kPrompts, 4, p);
    QCOMPARE(a.size(), kPrompts.size());
    bool any_diff_within_group = false;
    for (size_t i = 0; i < a.size(); ++i)
      for (size_t j = 0; j < 4; ++j) {
        QCOMPARE(a[i][j].token_ids, b[i][j].token_ids);
        QCOMPARE(a[i][j].token_ids.size(), a[i][j].logprobs.size());
        QCOMPARE(a[i][j].finish_reason, std::string("length"));
        if (j > 0 && a[i][j].token_ids != a[i][0].token_ids) any_diff_within_group = true;
      }
    QVERIFY(any_diff_within_group);  // samples of a group are not copies of each other
    p.seed = 8;
    auto c = s.generate(kPrompts, 4, p);
    bool differs = false;
    for (size_t i = 0; i < a.size(); ++i)
      for (size_t j = 0; j < 4; ++j) differs |= a[i][j].token_ids != c[i][j].token_ids;
    QVERIFY(differs);
  }

  void sharedPrefixEqualsUnsharedAndBatchingDoesNotMatter() {
    auto m = tiny_model();
    rollout::Sampler s(m);
    rollout::SamplingParams p;
    p.max_tokens = 10;
    p.seed = 99;
    p.temperature = 0.8;
    auto shared = s.generate(kPrompts, 3, p, true);
    auto unshared = s.generate(kPrompts, 3, p, false);
    // The last prompt alone, keyed as it was in the batch (prompt index 2).
    auto alone = s.generate({kPrompts[2]}, 3, p, true, {2});
    for (size_t i = 0; i < kPrompts.size(); ++i)
      for (size_t j = 0; j < 3; ++j) {
        QCOMPARE(shared[i][j].token_ids, unshared[i][j].token_ids);
        for (size_t t = 0; t < shared[i][j].logprobs.size(); ++t)
          QVERIFY(std::fabs(shared[i][j].logprobs[t] - unshared[i][j].logprobs[t]) < 1e-4);
      }
    for (size_t j = 0; j < 3; ++j) QCOMPARE(alone[0][j].token_ids, shared[2][j].token_ids);
  }

  void filterMasks() {
    torch::manual_seed(5);
    auto logits = torch::randn({4, 50}) * 3;
    rollout::SamplingParams p;
    p.top_k = 7;
    auto lp = rollout::processed_logprobs(logits, p);
    QVERIFY((torch::isfinite(lp).sum(1) == 7).all().item<bool>());
    QVERIFY(torch::allclose(lp.exp().sum(1), torch::ones({4}), 1e-5, 1e-5));
    // top_p: the kept set is the smallest prefix (by probability) whose mass reaches top_p.
    p = {};
    p.top_p = 0.6;
    lp = rollout::processed_logprobs(logits, p);
    auto probs = torch::softmax(logits, 1);
    for (int64_t r = 0; r < 4; ++r) {
      auto sorted = std::get<0>(probs[r].sort(0, true));
      auto cum = sorted.cumsum(0);
      int64_t need = (cum < 0.6).sum().item<int64_t>() + 1;
      QCOMPARE(torch::isfinite(lp[r]).sum().item<int64_t>(), need);
    }
    // min_p: tokens below min_p * max prob are removed.
    p = {};
    p.min_p = 0.1;
    lp = rollout::processed_logprobs(logits, p);
    auto keep = probs >= probs.amax(1, true) * 0.1;
    QVERIFY(torch::equal(torch::isfinite(lp), keep));
    // temperature scales the logits before normalisation; 0 is greedy.
    p = {};
    p.temperature = 0.5;
    QVERIFY(torch::allclose(rollout::processed_logprobs(logits, p), torch::log_softmax(logits / 0.5, 1), 1e-5, 1e-5));
    p.temperature = 0.0;
    lp = rollout::processed_logprobs(logits, p);
    QVERIFY(torch::equal(lp.argmax(1), logits.argmax(1)));
    QVERIFY((torch::isfinite(lp).sum(1) == 1).all().item<bool>());
  }

  void stopTokensAndLength() {
    auto m = tiny_model();
    rollout::Sampler s(m);
    rollout::SamplingParams p;
    p.max_tokens = 30;
    p.seed = 3;
    auto free_run = s.generate(kPrompts, 2, p);
    // Use the 4th token generated for prompt 0 / sample 0 as a stop id: that sample must stop there.
    const int64_t stop_id = free_run[0][0].token_ids[3];
    p.stop_token_ids = {stop_id};
    auto stopped = s.generate(kPrompts, 2, p);
    for (size_t i = 0; i < kPrompts.size(); ++i)
      for (size_t j = 0; j < 2; ++j) {
        const auto& c = stopped[i][j];
        const auto& f = free_run[i][j];
        auto first = std::find(f.token_ids.begin(), f.token_ids.end(), stop_id);
        if (first == f.token_ids.end()) {
          QCOMPARE(c.finish_reason, std::string("length"));
          QCOMPARE(c.token_ids.size(), size_t(30));
        } else {
          QCOMPARE(c.finish_reason, std::string("stop"));
          QCOMPARE(c.token_ids, std::vector<int64_t>(f.token_ids.begin(), first + 1));  // stop token kept
        }
      }
    QVERIFY(stopped[0][0].token_ids.size() <= 4);
  }

  void stopStrings() {
    const std::string dir = std::string(GRPO_TEST_DATA) + "/golden/tokenizers/qwen3";
    auto tok = text::Tokenizer::load(dir);
    auto m = tiny_model(tok.vocab_size(), 0.05);
    rollout::Sampler s(m, &tok);
    rollout::SamplingParams p;
    p.max_tokens = 16;
    p.seed = 11;
    auto prompt = std::vector<std::vector<int64_t>>{{9707, 11, 1879}};
    auto free_run = s.generate(prompt, 1, p)[0][0];
    std::vector<int32_t> ids(free_run.token_ids.begin(), free_run.token_ids.end());
    // A stop string made of the text of tokens 5..6: generation must stop by token 7.
    std::vector<int32_t> piece(ids.begin() + 5, ids.begin() + 7);
    const std::string stop = tok.decode(piece);
    QVERIFY(!stop.empty());
    p.stop = {stop};
    auto c = s.generate(prompt, 1, p)[0][0];
    QCOMPARE(c.finish_reason, std::string("stop"));
    QVERIFY(c.token_ids.size() <= 7);
    std::vector<int32_t> got(c.token_ids.begin(), c.token_ids.end());
    QVERIFY(tok.decode(got).find(stop) != std::string::npos);
    QCOMPARE(std::vector<int64_t>(c.token_ids.begin(), c.token_ids.end()),
             std::vector<int64_t>(free_run.token_ids.begin(), free_run.token_ids.begin() + c.token_ids.size()));
  }

  void empiricalDistributionMatches() {
    // 4000 one-token samples of one prompt: frequencies vs the model's softmax(logits / T).
    auto m = tiny_model(12, 0.15);
    rollout::Sampler s(m);
    rollout::SamplingParams p;
    p.max_tokens = 1;
    p.temperature = 1.3;
    p.seed = 2024;
    const int64_t N = 4000;
    auto out = s.generate({{3, 1, 4}}, N, p)[0];
    torch::NoGradGuard ng;
    m->eval();
    auto probs = torch::softmax(m->forward(torch::tensor({{3, 1, 4}}, torch::kInt64)).select(1, 2) / 1.3, -1)[0];
    std::vector<double> count(12, 0);
    for (const auto& c : out) count[c.token_ids[0]] += 1;
    double chi2 = 0;
    for (int v = 0; v < 12; ++v) {
      double e = probs[v].item<double>() * N;
      if (e > 5) chi2 += (count[v] - e) * (count[v] - e) / e;
    }
    // 11 degrees of freedom: P(chi2 > 31.3) = 0.001.
    QVERIFY2(chi2 < 31.3, qPrintable(QString("chi2 = %1").arg(chi2)));
  }

  void logprobsMatchTeacherForcedForward() {
    auto m = tiny_model();
    rollout::Sampler s(m);
    rollout::SamplingParams p;
    p.max_tokens = 14;
    p.seed = 5;
    p.temperature = 0.7;
    auto out = s.generate(kPrompts, 2, p);
    torch::NoGradGuard ng;
    m->eval();
    double worst = 0;
    for (size_t i = 0; i < kPrompts.size(); ++i)
      for (const auto& c : out[i]) {
        std::vector<int64_t> full = kPrompts[i];
        full.insert(full.end(), c.token_ids.begin(), c.token_ids.end());
        auto logits = m->forward(torch::tensor(full, torch::kInt64).unsqueeze(0))[0];  // (T, V)
        auto lp = torch::log_softmax(logits / p.temperature, -1);
        const size_t P = kPrompts[i].size();
        for (size_t t = 0; t < c.token_ids.size(); ++t) {
          double trainer = lp[P - 1 + t][c.token_ids[t]].item<double>();
          worst = std::max(worst, std::fabs(std::exp(trainer - c.logprobs[t]) - 1.0));
        }
      }
    QVERIFY2(worst <= 1e-4, qPrintable(QString("max |ratio - 1| = %1").arg(worst)));
  }
};

QTEST_GUILESS_MAIN(TestSampler)
#include "test_sampler.moc"
