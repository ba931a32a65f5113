// core/model against Hugging Face: golden logits (transformers / PEFT), checkpoint load errors,
// save_pretrained round trips for configs outside the golden set, inspect.
#include <QtTest>

#include <cmath>

#include "core/common/error.h"
#include "core/io/safetensors.h"
#include "core/model/causal_lm.h"
#include "core/model/mlp.h"
#include "core/model/norm.h"
#include "tools/forward_bench.h"
#include "tools/nodes_bench.h"
#include "core/model/inspect.h"
#include "core/model/kv_cache.h"
#include "core/model/peft_io.h"
#include "core/model/rope.h"
#include "core/model/segment_attention.h"
#include "core/model/weights.h"
#include "model_test_util.h"

using namespace grpo;
using namespace grpo::model;
using namespace grpo::model::test;

namespace {

torch::Tensor full_logits(CausalLM& m, const torch::Tensor& ids) {
  torch::NoGradGuard g;
  m->eval();
  return m->forward(ids)[0];  // (T, V)
}

// Copies a golden checkpoint into `dst`, replacing or dropping or adding one tensor.
void rewrite_checkpoint(const std::string& src, const std::string& dst, const std::string& name,
                        const std::string& action) {
  auto f = io::SafetensorsFile::open(src + "/model.safetensors");
  std::vector<io::TensorView> views;
  std::vector<float> extra(4, 0.f);
  std::vector<torch::Tensor> keep;
  for (const auto& t : f.tensors()) {
    if (t.name == name && action == "drop") continue;
    io::TensorView v{t.name, t.dtype, t.shape, f.data(t), t.nbytes()};
    if (t.name == name && action == "transpose") std::swap(v.shape[0], v.shape[1]);
    views.push_back(v);
  }
  if (action == "add") views.push_back({name, io::DType::F32, {4}, extra.data(), 16});
  io::write_safetensors(dst + "/model.safetensors", views, {{"format", "pt"}});
  write_file_atomic(dst + "/config.json", read_file(src + "/config.json"));
}

}  // namespace

class TestModel : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void initTestCase() { torch::manual_seed(1234); }

  // Logits of every position against transformers' (tests/data/golden/README.md and
  // MODELS_FROM_SOURCE.md say how each reference was made).
  void goldenLogits_data() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("adapter");
    QTest::addColumn<QString>("reference");
    const QString full = "reference_logits.json", shorter = "reference_logits_short.json";
    QTest::newRow("llama-untied-f32") << "llama-untied-f32" << "" << full;
    QTest::newRow("qwen2-tied-bf16") << "qwen2-tied-bf16" << "" << full;
    QTest::newRow("qwen2-tied-bf16+lora-r4") << "qwen2-tied-bf16" << "qwen2-tied-bf16-lora-r4" << full;
    QTest::newRow("llama-rope-linear") << "llama-rope-linear-f32" << "" << full;
    // dynamic: 14 tokens exceed max_position_embeddings 8 (NTK-scaled base); 6 do not.
    QTest::newRow("llama-rope-dynamic") << "llama-rope-dynamic-f32" << "" << full;
    QTest::newRow("llama-rope-dynamic-short") << "llama-rope-dynamic-f32" << "" << shorter;
    QTest::newRow("llama-rope-yarn") << "llama-rope-yarn-f32" << "" << full;
    QTest::newRow("mistral-sliding-window") << "mistral-sw-f32" << "" << full;  // window 6 < 14 tokens
    QTest::newRow("gemma") << "gemma-f32" << "" << full;
    // Soft-capped attention and logits, even layers sliding (window 6), query_pre_attn_scalar.
    QTest::newRow("gemma2") << "gemma2-f32" << "" << full;
    // Sliding/full layers with their own rope bases, linear scaling on the full ones, q/k norms.
    QTest::newRow("gemma3_text") << "gemma3-text-f32" << "" << full;
    QTest::newRow("phi3") << "phi3-f32" << "" << full;
    // longrope: 14 tokens exceed original_max_position_embeddings 8 (long factors); 6 do not.
    QTest::newRow("phi3-longrope") << "phi3-longrope-f32" << "" << full;
    QTest::newRow("phi3-longrope-short") << "phi3-longrope-f32" << "" << shorter;
  }
  void goldenLogits() {
    QFETCH(QString, model);
    QFETCH(QString, adapter);
    QFETCH(QString, reference);
    auto dir = golden_model(model.toStdString());
    auto ref = load_reference(golden_model((adapter.isEmpty() ? model : adapter).toStdString()), reference.toStdString());
    auto m = from_pretrained(dir);
    if (!adapter.isEmpty()) load_adapter(*m, golden_model(adapter.toStdString()));
    auto logits = full_logits(m, ref.input_ids);
    QCOMPARE(logits.sizes().vec(), ref.logits.sizes().vec());
    double diff = max_abs_diff(logits, ref.logits);
    qInfo("max abs diff %g", diff);
    QVERIFY2(diff <= 1e-4, qPrintable(QString("max abs diff %1").arg(diff)));
  }

  void computeLogitsForCli() {
    auto ref = load_reference(golden_model("qwen2-tied-bf16-lora-r4"));
    auto ids = std::vector<int64_t>(ref.input_ids.data_ptr<int64_t>(),
                                    ref.input_ids.data_ptr<int64_t>() + ref.input_ids.numel());
    auto all = compute_logits(golden_model("qwen2-tied-bf16"), ids, golden_model("qwen2-tied-bf16-lora-r4"), false);
    QCOMPARE(all.size(), ids.size());
    auto last = compute_logits(golden_model("qwen2-tied-bf16"), ids, golden_model("qwen2-tied-bf16-lora-r4"), true);
    QCOMPARE(last.size(), size_t(1));
    const int64_t T = ref.logits.size(0), V = ref.logits.size(1);
    double diff = 0;
    for (int64_t v = 0; v < V; ++v) {
      diff = std::max(diff, double(std::abs(all[size_t(T - 1)][size_t(v)] - ref.logits[T - 1][v].item<float>())));
      diff = std::max(diff, double(std::abs(last[0][size_t(v)] - all[size_t(T - 1)][size_t(v)])));
    }
    QVERIFY2(diff <= 1e-4, qPrintable(QString::number(diff)));
    QVERIFY_THROWS_EXCEPTION(Error, compute_logits(golden_model("qwen2-tied-bf16"), {5, 300}, "", true));
  }

  void inspectReportsArchitecture() {
    auto j = inspect_model(golden_model("qwen2-tied-bf16"));
    QCOMPARE(j["architecture"].get<std::string>(), std::string("Qwen2ForCausalLM"));
    QCOMPARE(j["model_type"].get<std::string>(), std::string("qwen2"));
    QCOMPARE(j["layers"].get<int64_t>(), int64_t(2));
    QCOMPARE(j["hidden"].get<int64_t>(), int64_t(64));
    QCOMPARE(j["heads"].get<int64_t>(), int64_t(4));
    QCOMPARE(j["kv_heads"].get<int64_t>(), int64_t(2));
    QCOMPARE(j["head_dim"].get<int64_t>(), int64_t(16));
    QCOMPARE(j["vocab"].get<int64_t>(), int64_t(300));
    QCOMPARE(j["dtype_on_disk"].get<std::string>(), std::string("BF16"));
    QCOMPARE(j["tied"].get<bool>(), true);
    auto m = from_pretrained(golden_model("qwen2-tied-bf16"));
    QCOMPARE(j["params"].get<int64_t>(), m->num_base_parameters());
    auto text = format_model_summary(j);
    QVERIFY(text.find("Qwen2ForCausalLM") != std::string::npos);
    QVERIFY(text.find("tied") != std::string::npos);
    auto l = inspect_model(golden_model("llama-untied-f32"));
    QCOMPARE(l["tied"].get<bool>(), false);
    QCOMPARE(l["dtype_on_disk"].get<std::string>(), std::string("F32"));
  }

  void shapeMismatchNamesTensor() {
    QTemporaryDir tmp;
    auto dst = tmp.path().toStdString();
    rewrite_checkpoint(golden_model("llama-untied-f32"), dst, "model.layers.1.mlp.up_proj.weight", "transpose");
    try {
      from_pretrained(dst);
      QFAIL("no error");
    } catch (const Error& e) {
      std::string what = e.what();
      QVERIFY2(what.find("tensor model.layers.1.mlp.up_proj.weight: shape [64,128], expected [128,64] "
                         "(hint: wrong base model?)") != std::string::npos,
               e.what());
    }
  }

  void missingAndUnexpectedTensorsNamed() {
    QTemporaryDir tmp;
    auto dst = tmp.path().toStdString();
    rewrite_checkpoint(golden_model("llama-untied-f32"), dst, "model.layers.0.self_attn.k_proj.weight", "drop");
    try {
      from_pretrained(dst);
      QFAIL("no error");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("missing tensor model.layers.0.self_attn.k_proj.weight") != std::string::npos,
               e.what());
    }
    rewrite_checkpoint(golden_model("llama-untied-f32"), dst, "model.layers.0.self_attn.k_proj.bias", "add");
    try {
      from_pretrained(dst);
      QFAIL("no error");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("unexpected tensor model.layers.0.self_attn.k_proj.bias") != std::string::npos,
               e.what());
    }
  }

  void savedCheckpointReloads_data() {
    QTest::addColumn<QString>("type");
    QTest::addColumn<bool>("tied");
    QTest::addColumn<bool>("llama3");
    QTest::newRow("qwen3-random-tied") << "qwen3" << true << false;
    QTest::newRow("qwen3-random-untied") << "qwen3" << false << false;
    QTest::newRow("llama-llama3-rope") << "llama" << false << true;
    QTest::newRow("qwen2-random") << "qwen2" << true << false;
  }
  void savedCheckpointReloads() {
    QFETCH(QString, type);
    QFETCH(bool, tied);
    QFETCH(bool, llama3);
    auto cfg = small_config(type.toStdString(), tied);
    if (llama3) cfg.rope_scaling = io::RopeScaling{"llama3", 8.0, 1.0, 4.0, 64};
    CausalLM m{CausalLMOptions(cfg)};
    {  // non-trivial norms so that a missed norm would show
      torch::NoGradGuard g;
      for (auto& item : m->named_base_parameters())
        if (item.key().find("norm") != std::string::npos) item.value().uniform_(0.5, 1.5);
    }
    QTemporaryDir tmp;
    auto dir = tmp.path().toStdString() + "/ckpt";
    save_pretrained(*m, dir);
    auto f = io::SafetensorsFile::open(dir + "/model.safetensors");
    QCOMPARE(f.find("lm_head.weight") != nullptr, !tied);
    QCOMPARE(f.metadata().at("format"), std::string("pt"));
    if (type == "qwen3") QVERIFY(f.find("model.layers.1.self_attn.k_norm.weight") != nullptr);
    if (type == "qwen2") QVERIFY(f.find("model.layers.0.self_attn.q_proj.bias") != nullptr);
    QVERIFY(f.find("model.layers.0.self_attn.o_proj.bias") == nullptr);
    auto back = from_pretrained(dir);
    QCOMPARE(back->config().rope_scaling.has_value(), llama3);
    auto ids = torch::randint(cfg.vocab_size, {1, 150}, torch::kInt64);  // past 64 positions (llama3 ctx)
    auto a = full_logits(m, ids), b = full_logits(back, ids);
    QVERIFY(torch::equal(a, b));
    // bf16 on disk: converted back to fp32 on load, close to the original.
    save_pretrained(*m, dir + "-bf16", torch::kBFloat16);
    QCOMPARE(io::ModelConfig::load(dir + "-bf16/config.json").torch_dtype, std::string("bfloat16"));
    auto c = from_pretrained(dir + "-bf16");
    QVERIFY(max_abs_diff(full_logits(c, ids), a) < 0.05);
  }

  void llama3InvFreqMatchesFormula() {
    auto cfg = small_config("llama", false);
    cfg.head_dim = 64;
    cfg.rope_scaling = io::RopeScaling{"llama3", 8.0, 1.0, 4.0, 8192};
    auto inv = rope_inv_freq(cfg);
    const double pi = 3.14159265358979323846;
    for (int64_t i = 0; i < 32; ++i) {
      double f = 1.0 / std::pow(cfg.rope_theta, double(2 * i) / 64.0);
      double wavelen = 2 * pi / f, lo_w = 8192.0 / 1.0, hi_w = 8192.0 / 4.0, expect;
      if (wavelen < hi_w) expect = f;
      else if (wavelen > lo_w) expect = f / 8.0;
      else {
        double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
        expect = (1 - smooth) * f / 8.0 + smooth * f;
      }
      QVERIFY2(std::abs(inv[i].item<double>() - expect) <= 1e-6 * expect, qPrintable(QString::number(i)));
    }
  }

  void bf16ComputeTracksFp32() {
    // The CUDA default (bf16 weights and activations, fp32 norms/softmax/logits) run on the CPU.
    auto ref = load_reference(golden_model("qwen2-tied-bf16"));
    auto m = from_pretrained(golden_model("qwen2-tied-bf16"), torch::kBFloat16);
    QCOMPARE(m->model->embed_tokens->weight.scalar_type(), torch::kBFloat16);
    auto logits = full_logits(m, ref.input_ids);
    QCOMPARE(logits.scalar_type(), torch::kFloat32);
    const double scale = ref.logits.abs().max().item<double>(), diff = max_abs_diff(logits, ref.logits);
    qInfo("bf16 max abs diff %g (logits up to %g)", diff, scale);
    QVERIFY(diff <= 0.03 * scale);
    // And with a padded batch + KV cache (the sampler's path).
    KVCache cache(m->config().num_hidden_layers);
    ForwardArgs a;
    a.cache = &cache;
    a.attention_mask = torch::ones({1, ref.input_ids.size(1)}, torch::kInt64);
    torch::NoGradGuard g;
    auto step = m->forward(ref.input_ids, a);
    QVERIFY(max_abs_diff(step, logits.unsqueeze(0)) <= 0.03 * scale);
  }

  void f16CheckpointLoads() {
    auto m = from_pretrained(golden_model("llama-untied-f32"));
    QTemporaryDir tmp;
    save_pretrained(*m, tmp.path().toStdString(), torch::kFloat16);
    auto f = io::SafetensorsFile::open(tmp.path().toStdString() + "/model.safetensors");
    QCOMPARE(f.at("lm_head.weight").dtype, io::DType::F16);
    auto back = from_pretrained(tmp.path().toStdString());
    auto ids = load_reference(golden_model("llama-untied-f32")).input_ids;
    QVERIFY(max_abs_diff(full_logits(back, ids), full_logits(m, ids)) <= 0.05);
  }

  void benchReportsThroughputAndMfu() {
    ForwardBenchOptions o;
    o.size = "tiny";
    o.seq_len = 32;
    o.lora_r = 4;
    o.iters = 1;
    auto j = bench_forward(o);
    for (const char* k : {"gemm_gflops", "prefill_tok_s", "lora_fwd_bwd_tok_s", "mfu", "params", "seq_len",
                          "flops_per_token_lora_fwd_bwd"})
      QVERIFY2(j.contains(k) && j[k].is_number() && j[k].get<double>() > 0, k);
    QCOMPARE(j["seq_len"].get<int64_t>(), int64_t(32));
    // 25m: the documented size really is ~25M parameters.
    CausalLM m{CausalLMOptions(bench_model_config("25m")).init_weights(false)};
    QVERIFY(m->num_base_parameters() > 20'000'000 && m->num_base_parameters() < 30'000'000);
    QVERIFY_THROWS_EXCEPTION(Error, bench_model_config("7b"));
  }

  // `grpo bench nodes` at a small shape: every node reported, each checked against its composite
  // (the bench refuses a node that differs by more than 1e-4), and its bounds refused.
  void nodesBenchReportsEveryNode() {
    NodesBenchOptions o;
    o.rows = 40;
    o.hidden = 16;
    o.intermediate = 24;
    o.q_dim = 16;
    o.kv_dim = 8;
    o.lora_r = 4;
    o.threads = 0;
    o.iters = 2;
    auto j = bench_nodes(o);
    for (const char* n : {"lora_qkv", "lora_gate_up", "lora_down", "rmsnorm", "swiglu"}) {
      QVERIFY2(j["nodes"].contains(n), n);
      const auto& e = j["nodes"][n];
      QVERIFY2(e["fused_ms"].get<double>() > 0 && e["composite_ms"].get<double>() > 0, n);
      QVERIFY2(e["max_rel_diff"].get<double>() <= 1e-4, n);
    }
    QVERIFY(j["speedup"].get<double>() > 0);
    QVERIFY(j["folded"].get<bool>());  // 40 x 80 >= 4 x 512: the adapters are folded at this shape
    o.iters = 0;
    QVERIFY_THROWS_EXCEPTION(Error, bench_nodes(o));
  }

  // The fused SwiGLU node against silu(g) * u through autograd: values and both gradients in fp64
  // and fp32, one input without a gradient, and the composite kept where the node does not apply
  // (bf16 here).
  void fusedSwigluMatchesTheComposite() {
    for (auto dt : {torch::kFloat64, torch::kFloat32}) {
      const double tol = dt == torch::kFloat64 ? 1e-13 : 1e-6;
      auto near = [&](const torch::Tensor& a, const torch::Tensor& b) { return close_to(a, b, tol); };
      // Values well into sigmoid's tails, so both ends of the derivative are exercised.
      auto g = (torch::randn({3, 7, 11}) * 6).to(dt).requires_grad_(true);
      auto u = torch::randn({3, 7, 11}).to(dt).requires_grad_(true);
      auto dh = torch::randn({3, 7, 11}).to(dt);
      auto h = swiglu(g, u);
      QVERIFY2(graph_has(h, "SwiGLUFunction"), "the fused node was not used");
      auto grads = torch::autograd::grad({h}, {g, u}, {dh});
      auto ref = torch::silu(g) * u;
      auto ref_grads = torch::autograd::grad({ref}, {g, u}, {dh});
      QVERIFY2(near(h, ref), "value");
      QVERIFY2(near(grads[0], ref_grads[0]), "grad of the gate");
      QVERIFY2(near(grads[1], ref_grads[1]), "grad of up");
      auto frozen_u = u.detach();
      auto gg = torch::autograd::grad({swiglu(g, frozen_u)}, {g}, {dh})[0];
      auto rg = torch::autograd::grad({torch::silu(g) * frozen_u}, {g}, {dh})[0];
      QVERIFY2(near(gg, rg), "grad of the gate, up frozen");
    }
    auto g = torch::randn({4, 5}).to(torch::kBFloat16).requires_grad_(true), u = torch::randn({4, 5}).to(torch::kBFloat16);
    auto h = swiglu(g, u);
    QVERIFY(!graph_has(h, "SwiGLUFunction"));
    QVERIFY(torch::equal(h, torch::silu(g) * u));
  }

  // The fused RMSNorm and RoPE nodes against the composite through autograd, in fp64 and fp32:
  // values and the input's gradient, for Llama's and Gemma's norms, and RoPE with tables of batch
  // 1 and of the input's batch, partial rotary (the node on the rotated dims) and a norm weight that
  // trains (its gradient from the node); the composite kept where the nodes do not apply (bf16).
  void fusedNormAndRopeMatchTheComposite() {
    for (auto dt : {torch::kFloat64, torch::kFloat32}) {
      const double tol = dt == torch::kFloat64 ? 1e-12 : 2e-6;
      for (bool gemma : {false, true}) {
        // 27 values a row: three blocks of the kernel's eight partial sums and a tail of three.
        RMSNorm norm(RMSNormOptions(27).eps(1e-5).offset_one(gemma).dtype(dt));
        {
          torch::NoGradGuard ng;
          norm->weight.copy_(torch::randn({27}).to(dt));
        }
        norm->weight.set_requires_grad(false);
        auto x = (torch::randn({2, 5, 27}) * 3).to(dt).requires_grad_(true);
        auto dy = torch::randn({2, 5, 27}).to(dt);
        auto y = norm(x);
        QVERIFY2(graph_has(y, "RMSNormFunction"), "the fused norm was not used");
        auto w = gemma ? norm->weight + 1.0 : norm->weight;
        auto ref = w * (x * torch::rsqrt(x.pow(2).mean(-1, true) + 1e-5));
        QVERIFY2(close_to(y, ref, tol), "norm value");
        auto gx = torch::autograd::grad({y}, {x}, {dy})[0], rx = torch::autograd::grad({ref}, {x}, {dy})[0];
        QVERIFY2(close_to(gx, rx, tol), "norm gradient");
        torch::NoGradGuard ng;
        QVERIFY2(torch::equal(norm(x), y.detach()), "the no-grad norm differs from the node");
      }
      auto inv = torch::pow(10000.0, -torch::arange(0, 16, 2, torch::kFloat64) / 16.0).to(torch::kFloat32);
      for (int64_t table_batch : {1, 2}) {
        auto pos = torch::stack({torch::arange(7), torch::arange(3, 10)}).narrow(0, 0, table_batch);
        auto tables = rope_tables(inv, pos, dt);
        auto x = torch::randn({2, 7, 3, 16}).to(dt).requires_grad_(true);
        auto dy = torch::randn({2, 7, 3, 16}).to(dt);
        auto y = apply_rope(x, tables);
        QVERIFY2(graph_has(y, "RopeFunction"), "the fused rope was not used");
        auto rotated = torch::cat({-x.narrow(-1, 8, 8), x.narrow(-1, 0, 8)}, -1);
        auto ref = x * tables.cos + rotated * tables.sin;
        QVERIFY2(close_to(y, ref, tol), "rope value");
        auto gx = torch::autograd::grad({y}, {x}, {dy})[0], rx = torch::autograd::grad({ref}, {x}, {dy})[0];
        QVERIFY2(close_to(gx, rx, tol), "rope gradient");
      }
    }
    for (bool gemma : {false, true}) {  // a weight that trains gets its gradient from the node too
      RMSNorm trained(RMSNormOptions(8).offset_one(gemma).dtype(torch::kFloat64));
      {
        torch::NoGradGuard ng;
        trained->weight.copy_(torch::randn({8}, torch::kFloat64));
      }
      auto x = torch::randn({3, 8}, torch::kFloat64).requires_grad_(true);
      auto dy = torch::randn({3, 8}, torch::kFloat64);
      auto y = trained(x);
      QVERIFY(graph_has(y, "RMSNormFunction"));
      auto w = gemma ? trained->weight + 1.0 : trained->weight;
      auto ref = w * (x * torch::rsqrt(x.pow(2).mean(-1, true) + 1e-6));
      auto g = torch::autograd::grad({y}, {x, trained->weight}, {dy});
      auto rg = torch::autograd::grad({ref}, {x, trained->weight}, {dy});
      QVERIFY2(close_to(g[0], rg[0], 1e-12) && close_to(g[1], rg[1], 1e-12), "gradients with the weight training");
    }
    auto inv = torch::pow(10000.0, -torch::arange(0, 4, 2, torch::kFloat64) / 4.0).to(torch::kFloat32);
    auto partial = rope_tables(inv, torch::arange(5).view({1, 5}), torch::kFloat32);  // 4 of 8 dims
    auto q = torch::randn({1, 5, 2, 8}).requires_grad_(true);
    auto rotated = torch::cat({-q.narrow(-1, 2, 2), q.narrow(-1, 0, 2)}, -1);
    auto ref = torch::cat({q.narrow(-1, 0, 4) * partial.cos + rotated * partial.sin, q.narrow(-1, 4, 4)}, -1);
    QVERIFY2(close_to(apply_rope(q, partial), ref, 2e-6), "partial rotary");
    auto qb = q.detach().to(torch::kBFloat16).requires_grad_(true);
    QVERIFY(!graph_has(apply_rope(qb, rope_tables(inv, torch::arange(5).view({1, 5}), torch::kBFloat16)), "RopeFunction"));
  }

  // The segment kernel against the formula written with plain operators, per segment, in fp64:
  // values and the gradients of q, k and v, with probabilities kept and recomputed, head sizes
  // with and without a copy of their own (12, 32, 64), one and three query heads per kv head,
  // prompts read by several completions (their key gradients add up), one-token segments and key
  // rows longer than a block of the score loop. fp32 runs the same cases against the fp64
  // reference, through the vectorised exp. Bad shapes and segments are refused.
  void segmentKernelMatchesTheFormula() {
    // A shared prompt of 40 with completions of 1 and 30; a sample of its own (25); a third
    // completion of the first prompt, after that sample (its keys must be loaded again); a prompt
    // of 3 with one completion of 2; a lone token.
    const std::vector<AttentionSegment> segs = {{0, 40, 0, 0}, {40, 1, 0, 40}, {41, 30, 0, 40}, {71, 25, 0, 0},
                                                {96, 3, 0, 40}, {99, 3, 0, 0}, {102, 2, 99, 3}, {104, 1, 0, 0}};
    const int64_t T = 105;
    // softmax(q k^T * scale + causal mask) v, segment by segment, query head h on kv head h / G.
    auto reference = [&](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale) {
      const int64_t H = q.size(1), KVH = k.size(1), G = H / KVH;
      std::vector<torch::Tensor> outs(static_cast<size_t>(T));
      for (const auto& s : segs) {
        std::vector<int64_t> keys;
        for (int64_t j = 0; j < s.prefix_len; ++j) keys.push_back(s.prefix_begin + j);
        for (int64_t j = 0; j < s.len; ++j) keys.push_back(s.begin + j);
        auto idx = torch::tensor(keys, torch::kInt64);
        auto ks = k.index_select(0, idx).repeat_interleave(G, 1), vs = v.index_select(0, idx).repeat_interleave(G, 1);
        auto qs = q.narrow(0, s.begin, s.len);                                         // (len, H, D)
        auto scores = torch::einsum("thd,jhd->htj", {qs, ks}) * scale;                 // (H, len, Lk)
        auto visible = torch::arange(int64_t(keys.size())).unsqueeze(0) <=
                       (torch::arange(s.len) + s.prefix_len).unsqueeze(1);             // (len, Lk)
        scores = scores.masked_fill(visible.logical_not().unsqueeze(0), -INFINITY);
        auto o = torch::einsum("htj,jhd->thd", {torch::softmax(scores, -1), vs});       // (len, H, D)
        for (int64_t t = 0; t < s.len; ++t) outs[size_t(s.begin + t)] = o[t];
      }
      return torch::stack(outs);
    };
    for (auto [H, KVH, D] : {std::tuple<int64_t, int64_t, int64_t>{4, 2, 32}, {3, 1, 12}, {2, 2, 64}}) {
      auto q = torch::randn({T, H, D}, torch::kFloat64).requires_grad_(true);
      auto k = torch::randn({T, KVH, D}, torch::kFloat64).requires_grad_(true);
      auto v = torch::randn({T, KVH, D}, torch::kFloat64).requires_grad_(true);
      auto dout = torch::randn({T, H, D}, torch::kFloat64);
      const double scale = 1.0 / std::sqrt(double(D));
      auto ref = reference(q, k, v, scale);
      auto ref_grads = torch::autograd::grad({ref}, {q, k, v}, {dout});
      for (auto dt : {torch::kFloat64, torch::kFloat32})
        for (double keep : {0.0, 1e9}) {  // probabilities recomputed, then kept
          const double tol = dt == torch::kFloat64 ? 1e-12 : 2e-5;
          const auto what = QString("H %1 KVH %2 D %3 %4 keep %5").arg(H).arg(KVH).arg(D).arg(dt == torch::kFloat64 ? "fp64" : "fp32").arg(keep);
          auto qc = q.detach().to(dt).requires_grad_(true), kc = k.detach().to(dt).requires_grad_(true),
               vc = v.detach().to(dt).requires_grad_(true);
          auto out = segment_attention(qc, kc, vc, segs, scale, keep);
          QVERIFY2(graph_has(out, "SegmentAttentionFunction"), qPrintable(what));
          auto grads = torch::autograd::grad({out}, {qc, kc, vc}, {dout.to(dt)});
          QVERIFY2(close_to(out.to(torch::kFloat64), ref, tol), qPrintable(what + ": value"));
          for (int i = 0; i < 3; ++i)
            QVERIFY2(close_to(grads[size_t(i)].to(torch::kFloat64), ref_grads[size_t(i)], tol),
                     qPrintable(what + QString(": gradient of %1").arg("qkv"[i])));
          torch::NoGradGuard ng;  // inference takes the same path without a node
          QVERIFY2(torch::equal(segment_attention(qc, kc, vc, segs, scale, keep), out.detach()), qPrintable(what));
        }
    }
    auto q = torch::randn({T, 4, 8}), k = torch::randn({T, 2, 8});
    auto refused = [&](auto call, const char* says) {
      try {
        call();
      } catch (const Error& e) {
        return std::string(e.what()).find(says) != std::string::npos;
      }
      return false;
    };
    QVERIFY(refused([&] { segment_attention(q, k, k, {{0, T - 1, 0, 0}}, 1.0); }, "token 104 of the row is in no segment"));
    QVERIFY(refused([&] { segment_attention(q, torch::randn({T, 3, 8}), torch::randn({T, 3, 8}), segs, 1.0); },
                    "H a multiple of KVH"));
    QVERIFY(refused([&] { segment_attention(q.to(torch::kBFloat16), k.to(torch::kBFloat16), k.to(torch::kBFloat16), segs, 1.0); },
                    "fp32 or fp64"));
  }

  void unsupportedConfigIsClearError() {
    auto cfg = small_config("llama", false);
    cfg.model_type = "gpt2";
    QVERIFY_THROWS_EXCEPTION(Error, CausalLM(CausalLMOptions(cfg)));
  }
};

QTEST_GUILESS_MAIN(TestModel)
#include "test_model.moc"
