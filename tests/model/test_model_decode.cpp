// Decoding paths against plain full forwards of each sequence alone: left-padded batches, KV-cache
// incremental decoding (rows of different lengths, padding holes), prefill-then-expand to G rows,
// and packed rows with a block-diagonal causal mask. Every family runs them: sliding windows
// (mistral, gemma2, gemma3_text: window 4, shorter than the sequences), soft-capping, Gemma's norms,
// gemma3's two rope bases and Phi-3's fused projections and partial rotary must all agree.
#include <QtTest>

#include "core/model/causal_lm.h"
#include "core/model/kv_cache.h"
#include "core/model/weights.h"
#include "model_test_util.h"

using namespace grpo;
using namespace grpo::model;
using namespace grpo::model::test;

namespace {

constexpr double kTol = 1e-4;

CausalLM make_model(const QString& which) {
  if (which == "qwen2-golden") return from_pretrained(golden_model("qwen2-tied-bf16"));
  if (which == "llama-golden") return from_pretrained(golden_model("llama-untied-f32"));
  for (const char* family : {"mistral", "gemma", "gemma2", "gemma3_text", "phi3"})
    if (which == QString(family) + "-random") {
      CausalLM m{CausalLMOptions(small_config(family, std::string(family) != "mistral" && std::string(family) != "phi3"))};
      torch::NoGradGuard g;  // norms away from their neutral value, so each norm's form matters
      for (auto& item : m->named_base_parameters())
        if (item.key().find("norm") != std::string::npos) item.value().uniform_(-0.4, 0.4).add_(family[0] == 'g' ? 0.0 : 1.0);
      return m;
    }
  auto cfg = small_config(which == "llama3-random" ? "llama" : "qwen3", false);
  if (which == "llama3-random") cfg.rope_scaling = io::RopeScaling{"llama3", 4.0, 1.0, 4.0, 16};
  CausalLM m{CausalLMOptions(cfg)};
  return m;
}

std::vector<int64_t> random_tokens(int64_t n, int64_t vocab) {
  auto t = torch::randint(3, vocab, {n}, torch::kInt64);
  return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + n);
}

// Logits (T, V) of one sequence run alone.
torch::Tensor alone(CausalLM& m, const std::vector<int64_t>& seq) {
  return m->forward(torch::tensor(seq, torch::kInt64).unsqueeze(0))[0];
}

// Left-pads rows to the longest: ids (B, T) with pad 0, mask (B, T).
std::pair<torch::Tensor, torch::Tensor> left_pad(const std::vector<std::vector<int64_t>>& rows) {
  int64_t T = 0;
  for (const auto& r : rows) T = std::max<int64_t>(T, int64_t(r.size()));
  auto ids = torch::zeros({int64_t(rows.size()), T}, torch::kInt64);
  auto mask = torch::zeros({int64_t(rows.size()), T}, torch::kInt64);
  for (size_t b = 0; b < rows.size(); ++b) {
    const int64_t n = int64_t(rows[b].size());
    ids[int64_t(b)].narrow(0, T - n, n).copy_(torch::tensor(rows[b], torch::kInt64));
    mask[int64_t(b)].narrow(0, T - n, n).fill_(1);
  }
  return {ids, mask};
}

void add_models() {
  QTest::addColumn<QString>("model");
  QTest::newRow("qwen2-golden") << "qwen2-golden";
  QTest::newRow("llama-golden") << "llama-golden";
  QTest::newRow("qwen3-random") << "qwen3-random";
  QTest::newRow("llama3-random") << "llama3-random";
  for (const char* family : {"mistral", "gemma", "gemma2", "gemma3_text", "phi3"})
    QTest::newRow((std::string(family) + "-random").c_str()) << QString(family) + "-random";
}

}  // namespace

class TestModelDecode : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void initTestCase() { torch::manual_seed(7); }

  void leftPaddedBatchEqualsSeparate_data() { add_models(); }
  void leftPaddedBatchEqualsSeparate() {
    QFETCH(QString, model);
    auto m = make_model(model);
    m->eval();
    torch::NoGradGuard g;
    const int64_t V = m->config().vocab_size;
    std::vector<std::vector<int64_t>> rows = {random_tokens(6, V), random_tokens(11, V), random_tokens(1, V)};
    auto [ids, mask] = left_pad(rows);
    ForwardArgs a;
    a.attention_mask = mask;
    auto logits = m->forward(ids, a);  // (B, T, V)
    a.last_only = true;
    auto last = m->forward(ids, a);    // (B, 1, V)
    for (size_t b = 0; b < rows.size(); ++b) {
      const int64_t n = int64_t(rows[b].size()), T = ids.size(1);
      auto ref = alone(m, rows[b]);
      QVERIFY(max_abs_diff(logits[int64_t(b)].narrow(0, T - n, n), ref) <= kTol);
      QVERIFY(max_abs_diff(last[int64_t(b)][0], ref[n - 1]) <= kTol);
    }
  }

  void kvCacheIncrementalEqualsFull_data() { add_models(); }
  void kvCacheIncrementalEqualsFull() {
    QFETCH(QString, model);
    auto m = make_model(model);
    m->eval();
    torch::InferenceMode g;
    const int64_t V = m->config().vocab_size;
    std::vector<std::vector<int64_t>> prompts = {random_tokens(5, V), random_tokens(9, V), random_tokens(2, V)};
    std::vector<std::vector<int64_t>> seqs = prompts;  // real tokens fed so far per row
    KVCache cache(m->config().num_hidden_layers, /*reserve=*/12);  // forces one regrow
    auto [ids, mask] = left_pad(prompts);
    ForwardArgs a;
    a.attention_mask = mask;
    a.cache = &cache;
    auto logits = m->forward(ids, a);
    QCOMPARE(cache.length(), int64_t(9));
    for (size_t b = 0; b < prompts.size(); ++b) {
      const int64_t n = int64_t(prompts[b].size());
      QVERIFY(max_abs_diff(logits[int64_t(b)].narrow(0, 9 - n, n), alone(m, prompts[b])) <= kTol);
    }
    // Steps: a chunk of 2 tokens, then single tokens; row 2 skips step 3 (a padding hole).
    for (int step = 0; step < 7; ++step) {
      const int64_t T = step == 0 ? 2 : 1;
      auto new_ids = torch::randint(3, V, {3, T}, torch::kInt64);
      auto new_mask = torch::ones({3, T}, torch::kInt64);
      if (step == 3) new_mask[2].fill_(0);
      ForwardArgs s;
      s.cache = &cache;
      s.attention_mask = new_mask;
      auto out = m->forward(new_ids, s);  // (B, T, V)
      for (int64_t b = 0; b < 3; ++b) {
        if (new_mask[b][0].item<int64_t>() == 0) continue;
        for (int64_t t = 0; t < T; ++t) seqs[size_t(b)].push_back(new_ids[b][t].item<int64_t>());
        auto ref = alone(m, seqs[size_t(b)]);
        const int64_t n = int64_t(seqs[size_t(b)].size());
        double d = max_abs_diff(out[b], ref.narrow(0, n - T, T));
        QVERIFY2(d <= kTol, qPrintable(QString("step %1 row %2 diff %3").arg(step).arg(b).arg(d)));
      }
    }
    QCOMPARE(cache.token_counts()[2].item<int64_t>(), int64_t(seqs[2].size()));
  }

  void prefillThenExpandEqualsSeparate_data() { add_models(); }
  void prefillThenExpandEqualsSeparate() {
    QFETCH(QString, model);
    auto m = make_model(model);
    m->eval();
    torch::InferenceMode g;
    const int64_t V = m->config().vocab_size, G = 3;
    std::vector<std::vector<int64_t>> prompts = {random_tokens(4, V), random_tokens(7, V)};
    KVCache cache(m->config().num_hidden_layers);
    auto [ids, mask] = left_pad(prompts);
    ForwardArgs a;
    a.attention_mask = mask;
    a.cache = &cache;
    a.last_only = true;
    auto first = m->forward(ids, a);  // (2, 1, V)
    cache.expand_rows(G);
    QCOMPARE(cache.batch_size(), int64_t(2 * G));
    std::vector<std::vector<int64_t>> seqs;
    for (const auto& p : prompts)
      for (int64_t g2 = 0; g2 < G; ++g2) seqs.push_back(p);
    for (int step = 0; step < 5; ++step) {
      auto next = torch::randint(3, V, {2 * G, 1}, torch::kInt64);  // each sample its own token
      ForwardArgs s;
      s.cache = &cache;
      auto out = m->forward(next, s);  // (B*G, 1, V)
      for (int64_t r = 0; r < 2 * G; ++r) {
        seqs[size_t(r)].push_back(next[r][0].item<int64_t>());
        auto ref = alone(m, seqs[size_t(r)]);
        QVERIFY(max_abs_diff(out[r][0], ref[ref.size(0) - 1]) <= kTol);
      }
    }
    for (size_t p = 0; p < prompts.size(); ++p)
      QVERIFY(max_abs_diff(first[int64_t(p)][0], alone(m, prompts[p])[int64_t(prompts[p].size()) - 1]) <= kTol);
    // select_rows: keep rows 5 and 0 (reordered); decoding continues for them alone.
    cache.select_rows(torch::tensor(std::vector<int64_t>{5, 0}, torch::kInt64));
    auto next = torch::randint(3, V, {2, 1}, torch::kInt64);
    ForwardArgs s;
    s.cache = &cache;
    auto out = m->forward(next, s);
    for (int64_t i = 0; i < 2; ++i) {
      auto seq = seqs[size_t(i == 0 ? 5 : 0)];
      seq.push_back(next[i][0].item<int64_t>());
      auto ref = alone(m, seq);
      QVERIFY(max_abs_diff(out[i][0], ref[ref.size(0) - 1]) <= kTol);
    }
  }

  void packedRowsEqualSeparate_data() { add_models(); }
  void packedRowsEqualSeparate() {
    QFETCH(QString, model);
    auto m = make_model(model);
    m->eval();
    torch::NoGradGuard g;
    const int64_t V = m->config().vocab_size, T = 18;
    // Row 0: lengths 5, 8, 3 and 2 padding slots; row 1: lengths 9, 9.
    std::vector<std::vector<int64_t>> lens = {{5, 8, 3}, {9, 9}};
    auto ids = torch::zeros({2, T}, torch::kInt64);
    std::vector<torch::Tensor> seq_rows;
    std::vector<std::vector<std::vector<int64_t>>> seqs(2);
    for (int64_t r = 0; r < 2; ++r) {
      std::vector<int64_t> cu = {0};
      for (auto n : lens[size_t(r)]) {
        auto s = random_tokens(n, V);
        ids[r].narrow(0, cu.back(), n).copy_(torch::tensor(s, torch::kInt64));
        seqs[size_t(r)].push_back(s);
        cu.push_back(cu.back() + n);
      }
      seq_rows.push_back(seq_ids_from_cu_seqlens(cu, T));
    }
    ForwardArgs a;
    a.seq_ids = torch::cat(seq_rows, 0);  // (2, T)
    QCOMPARE(a.seq_ids[0][T - 1].item<int64_t>(), int64_t(-1));
    auto pos = packed_position_ids(a.seq_ids);
    QCOMPARE(pos[0][5].item<int64_t>(), int64_t(0));
    QCOMPARE(pos[0][12].item<int64_t>(), int64_t(7));
    auto logits = m->forward(ids, a);  // (2, T, V)
    ForwardArgs one;
    one.seq_ids = a.seq_ids.narrow(0, 0, 1);
    auto single = m->forward(ids.narrow(0, 0, 1), one);  // (1, T, V)
    for (int64_t r = 0; r < 2; ++r) {
      int64_t off = 0;
      for (const auto& s : seqs[size_t(r)]) {
        const int64_t n = int64_t(s.size());
        auto ref = alone(m, s);
        QVERIFY(max_abs_diff(logits[r].narrow(0, off, n), ref) <= kTol);
        if (r == 0) QVERIFY(max_abs_diff(single[0].narrow(0, off, n), ref) <= kTol);
        off += n;
      }
    }
    // Explicit position ids give the same result.
    ForwardArgs b = a;
    b.position_ids = pos;
    QVERIFY(max_abs_diff(m->forward(ids, b), logits) == 0.0);
  }
};

QTEST_GUILESS_MAIN(TestModelDecode)
#include "test_model_decode.moc"
