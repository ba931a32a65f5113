// LoRA: identities (B = 0, disabled, merged), gradients against central finite differences in
// double precision, frozen base, dropout, PEFT save/load round trip and adapter_config.json, and
// the errors for adapters that do not fit or use unsupported features.
#include <QtTest>

#include <set>

#include <cmath>

#include "core/common/error.h"
#include "core/io/safetensors.h"
#include "core/model/causal_lm.h"
#include "core/model/peft_io.h"
#include "core/model/weights.h"
#include "model_test_util.h"

using namespace grpo;
using namespace grpo::model;
using namespace grpo::model::test;

namespace {

const std::string kBase = "qwen2-tied-bf16";
const std::string kAdapter = "qwen2-tied-bf16-lora-r4";

torch::Tensor logits_of(CausalLM& m, const torch::Tensor& ids) {
  torch::NoGradGuard g;
  return m->forward(ids);
}

void randomize_lora(CausalLM& m, double std = 0.1) {
  torch::NoGradGuard g;
  for (auto& p : m->lora_parameters()) p.normal_(0.0, std);
}

// A layer in training mode with a frozen base and an adapter of rank r and scaling s, every factor
// (and the bias) random.
LoraLinear trained_adapter_layer(int64_t in, int64_t out, int64_t r, double s, bool bias, torch::ScalarType dt) {
  LoraLinear lin{LoraLinearOptions(in, out).bias(bias).dtype(dt)};
  lin->reset_parameters(0.3);
  lin->add_lora(r, s, 0.0);
  for (auto* p : {&lin->weight, &lin->bias})
    if (p->defined()) p->set_requires_grad(false);
  {
    torch::NoGradGuard g;
    lin->lora_A->weight.normal_(0.0, 0.4);
    lin->lora_B->weight.normal_(0.0, 0.4);
    if (bias) lin->bias.normal_(0.0, 0.5);
  }
  lin->train();
  return lin;
}

std::string contents_of_golden_adapter_with(const std::string& dir, const std::string& key, nlohmann::json value) {
  auto j = nlohmann::json::parse(read_file(golden_model(kAdapter) + "/adapter_config.json"));
  j[key] = std::move(value);
  write_file_atomic(dir + "/adapter_config.json", j.dump(2));
  write_file_atomic(dir + "/adapter_model.safetensors",
                    read_file(golden_model(kAdapter) + "/adapter_model.safetensors"));
  return dir;
}

// Expects load_adapter to throw an Error whose text contains every piece of `needles`.
void expect_load_error(CausalLM& m, const std::string& dir, const std::vector<std::string>& needles) {
  try {
    load_adapter(*m, dir);
  } catch (const Error& e) {
    for (const auto& n : needles)
      QVERIFY2(std::string(e.what()).find(n) != std::string::npos, e.what());
    QVERIFY(!m->has_lora());  // a rejected adapter leaves the model without one
    return;
  }
  QFAIL("no error");
}

}  // namespace

class TestModelLora : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void initTestCase() { torch::manual_seed(42); }

  void zeroBEqualsBaseAndOnlyLoraTrains() {
    auto m = from_pretrained(golden_model(kBase));
    m->eval();
    auto ids = load_reference(golden_model(kBase)).input_ids;
    auto base = logits_of(m, ids);
    LoraConfig cfg;
    cfg.r = 8;
    m->add_lora(cfg);
    QVERIFY(torch::equal(logits_of(m, ids), base));  // B = 0 at init
    QCOMPARE(int64_t(m->lora_parameters().size()), int64_t(2 * 7 * 2));
    for (const auto& item : m->named_parameters())
      QCOMPARE(item.value().requires_grad(), item.key().find(".lora_") != std::string::npos);
    auto& q = m->model->decoder_layers[1]->self_attn->q_proj;
    QCOMPARE(q->lora_A->weight.sizes().vec(), (std::vector<int64_t>{8, 64}));
    QCOMPARE(q->lora_B->weight.sizes().vec(), (std::vector<int64_t>{64, 8}));
    QVERIFY(q->lora_A->weight.abs().max().item<float>() > 0);           // Kaiming-uniform
    QVERIFY(q->lora_A->weight.abs().max().item<float>() <= 1 / std::sqrt(64.0) + 1e-6);  // bound 1/sqrt(in)
    QCOMPARE(q->lora_B->weight.abs().max().item<float>(), 0.f);
    // Targets from a list only.
    cfg.target_modules = {"q_proj", "v_proj"};
    m->add_lora(cfg);
    QCOMPARE(int64_t(m->lora_parameters().size()), int64_t(2 * 2 * 2));
    QVERIFY(!m->model->decoder_layers[0]->mlp->up_proj->has_lora());
  }

  void disabledEqualsBaseExactly() {
    auto m = from_pretrained(golden_model(kBase));
    m->eval();
    auto ref = load_reference(golden_model(kAdapter));
    auto base = logits_of(m, ref.input_ids);
    load_adapter(*m, golden_model(kAdapter));
    auto with = logits_of(m, ref.input_ids);
    QVERIFY(max_abs_diff(with, base) > 0.1);
    m->set_adapter_enabled(false);
    QVERIFY(torch::equal(logits_of(m, ref.input_ids), base));
    m->set_adapter_enabled(true);
    QVERIFY(torch::equal(logits_of(m, ref.input_ids), with));
  }

  void mergedEqualsUnmerged() {
    auto m = from_pretrained(golden_model(kBase));
    m->eval();
    auto ref = load_reference(golden_model(kAdapter));
    load_adapter(*m, golden_model(kAdapter));
    auto w0 = m->model->decoder_layers[0]->mlp->down_proj->weight.clone();
    auto unmerged = logits_of(m, ref.input_ids);
    m->merge_adapter();
    QVERIFY(m->adapter_merged());
    QVERIFY(max_abs_diff(m->model->decoder_layers[0]->mlp->down_proj->weight, w0) > 1e-3);
    auto merged = logits_of(m, ref.input_ids);
    QVERIFY2(max_abs_diff(merged, unmerged) <= 1e-4, qPrintable(QString::number(max_abs_diff(merged, unmerged))));
    QVERIFY(max_abs_diff(merged[0], ref.logits) <= 1e-4);  // still PEFT's logits
    m->unmerge_adapter();
    QVERIFY(!m->adapter_merged());
    QVERIFY(max_abs_diff(m->model->decoder_layers[0]->mlp->down_proj->weight, w0) <= 1e-6);
    QVERIFY(max_abs_diff(logits_of(m, ref.input_ids), unmerged) <= 1e-4);
    // Disabling a merged adapter gives the base model back.
    m->merge_adapter();
    m->set_adapter_enabled(false);
    auto base = from_pretrained(golden_model(kBase));
    base->eval();
    QVERIFY(max_abs_diff(logits_of(m, ref.input_ids), logits_of(base, ref.input_ids)) <= 1e-4);
  }

  void baseWeightsGetNoGradient() {
    auto m = from_pretrained(golden_model(kBase));
    LoraConfig cfg;
    cfg.r = 4;
    m->add_lora(cfg);
    randomize_lora(m);
    m->train();
    auto ids = torch::randint(300, {2, 12}, torch::kInt64);
    auto logits = m->forward(ids);
    auto loss = torch::nll_loss(torch::log_softmax(logits.view({-1, 300}), -1), ids.view({-1}));
    loss.backward();
    for (const auto& item : m->named_base_parameters())
      QVERIFY2(!item.value().grad().defined(), item.key().c_str());
    for (const auto& item : m->named_lora_parameters()) {
      QVERIFY2(item.value().grad().defined(), item.key().c_str());
      QVERIFY2(item.value().grad().abs().sum().item<float>() > 0, item.key().c_str());
    }
  }

  // The fused LoRA node (frozen base, no dropout) against the formula written out with plain
  // autograd ops: the output and the gradients of x, A and B, with and without a bias, with and
  // without a gradient for the input, in fp64 and fp32; a bf16 layer hands A and B fp32 gradients.
  void fusedLoraNodeMatchesTheFormula_data() {
    QTest::addColumn<int>("dtype");
    QTest::addColumn<bool>("bias");
    QTest::addColumn<bool>("inputGrad");
    QTest::addColumn<int>("batch");  // 2 x 5 rows: adapter products; 2 x 40: adapters folded into W
    QTest::addColumn<double>("tol");
    QTest::newRow("fp64") << int(torch::kFloat64) << false << true << 2 << 1e-12;
    QTest::newRow("fp64-bias") << int(torch::kFloat64) << true << true << 2 << 1e-12;
    QTest::newRow("fp64-frozen-input") << int(torch::kFloat64) << true << false << 2 << 1e-12;
    QTest::newRow("fp64-merged") << int(torch::kFloat64) << true << true << 16 << 1e-12;
    QTest::newRow("fp32") << int(torch::kFloat32) << false << true << 2 << 1e-5;
    QTest::newRow("fp32-merged") << int(torch::kFloat32) << false << true << 16 << 1e-5;
    QTest::newRow("bf16") << int(torch::kBFloat16) << true << true << 16 << 3e-2;  // never folded
  }
  void fusedLoraNodeMatchesTheFormula() {
    QFETCH(int, dtype);
    QFETCH(bool, bias);
    QFETCH(bool, inputGrad);
    QFETCH(int, batch);
    QFETCH(double, tol);
    const auto dt = static_cast<torch::ScalarType>(dtype);
    auto lin = trained_adapter_layer(12, 10, 3, 1.7, bias, dt);
    QCOMPARE(lora_group_merges(batch * 5, dt, {lin.get()}), batch > 2 && dt != torch::kBFloat16);
    auto x = torch::randn({batch, 5, 12}).to(dt).requires_grad_(inputGrad);
    auto dy = torch::randn({batch, 5, 10}).to(dt);
    auto y = lin->forward(x);
    QCOMPARE(y.sizes().vec(), (std::vector<int64_t>{batch, 5, 10}));
    QVERIFY2(graph_has(y, "LoraLinearFunction"), "the fused node was not used");
    y.backward(dy);
    auto gA = lin->lora_A->weight.grad().clone(), gB = lin->lora_B->weight.grad().clone();
    QCOMPARE(gA.scalar_type(), lin->lora_A->weight.scalar_type());  // fp32 for a bf16 layer
    QCOMPARE(gB.scalar_type(), lin->lora_B->weight.scalar_type());
    QCOMPARE(x.grad().defined(), inputGrad);
    // The reference, in fp64 whatever the layer's dtype.
    auto x64 = x.detach().to(torch::kFloat64).requires_grad_(true);
    auto A = lin->lora_A->weight.detach().to(torch::kFloat64).requires_grad_(true);
    auto B = lin->lora_B->weight.detach().to(torch::kFloat64).requires_grad_(true);
    auto W = lin->weight.detach().to(torch::kFloat64);
    auto ref = torch::matmul(x64, W.t()) + 1.7 * torch::matmul(torch::matmul(x64, A.t()), B.t());
    if (bias) ref = ref + lin->bias.detach().to(torch::kFloat64);
    ref.backward(dy.to(torch::kFloat64));
    auto close = [&](const torch::Tensor& a, const torch::Tensor& b) { return close_to(a, b, tol); };
    QVERIFY2(close(y, ref), "output");
    QVERIFY2(close(gA, A.grad()), "grad of lora_A");
    QVERIFY2(close(gB, B.grad()), "grad of lora_B");
    if (inputGrad) QVERIFY2(close(x.grad(), x64.grad()), "grad of the input");
  }

  // The grouped node (q, k and v; gate and up: one input, one stacked A product, one dx) against each
  // projection's formula written out with plain autograd ops: outputs and the gradients of x, every A
  // and every B, with ranks and scalings that differ per projection (rank_pattern, alpha_pattern),
  // biases, an output that receives no gradient, a frozen input, fp32 and bf16. The no-grad path
  // must give the node's values bit for bit (a checkpointed layer recomputes through the node what
  // its first pass computed without one), and a group with one adapter off falls back to the layers.
  void fusedLoraGroupMatchesTheFormula_data() {
    QTest::addColumn<int>("dtype");
    QTest::addColumn<int>("batch");  // 2 x 5 rows: adapter products; 2 x 40: adapters folded into W
    QTest::addColumn<bool>("bias");
    QTest::addColumn<bool>("inputGrad");
    QTest::addColumn<bool>("unevenRanks");
    QTest::addColumn<int>("unused");    // an output left out of the loss, -1: none
    QTest::addColumn<int>("disabled");  // a layer whose adapter is off, -1: none
    QTest::addColumn<double>("tol");
    QTest::newRow("fp64") << int(torch::kFloat64) << 2 << false << true << false << -1 << -1 << 1e-12;
    QTest::newRow("fp64-bias-uneven") << int(torch::kFloat64) << 2 << true << true << true << -1 << -1 << 1e-12;
    QTest::newRow("fp64-bias-uneven-merged") << int(torch::kFloat64) << 16 << true << true << true << -1 << -1 << 1e-12;
    QTest::newRow("fp64-unused-output") << int(torch::kFloat64) << 2 << true << true << true << 1 << -1 << 1e-12;
    QTest::newRow("fp64-unused-output-merged") << int(torch::kFloat64) << 16 << true << true << true << 1 << -1 << 1e-12;
    QTest::newRow("fp64-frozen-input") << int(torch::kFloat64) << 2 << false << false << true << -1 << -1 << 1e-12;
    QTest::newRow("fp64-one-adapter-off") << int(torch::kFloat64) << 2 << true << true << true << -1 << 2 << 1e-12;
    QTest::newRow("fp32") << int(torch::kFloat32) << 2 << true << true << true << -1 << -1 << 1e-5;
    QTest::newRow("fp32-merged") << int(torch::kFloat32) << 16 << true << true << true << -1 << -1 << 1e-5;
    QTest::newRow("bf16") << int(torch::kBFloat16) << 16 << true << true << false << -1 << -1 << 3e-2;
  }
  void fusedLoraGroupMatchesTheFormula() {
    QFETCH(int, dtype);
    QFETCH(int, batch);
    QFETCH(bool, bias);
    QFETCH(bool, inputGrad);
    QFETCH(bool, unevenRanks);
    QFETCH(int, unused);
    QFETCH(int, disabled);
    QFETCH(double, tol);
    const auto dt = static_cast<torch::ScalarType>(dtype);
    const std::vector<int64_t> outs{10, 6, 7}, ranks = unevenRanks ? std::vector<int64_t>{3, 2, 5} : std::vector<int64_t>{3, 3, 3};
    const std::vector<double> scalings{1.7, 0.6, 2.2};
    std::vector<LoraLinear> lins;
    std::vector<LoraLinearImpl*> layers;
    for (size_t i = 0; i < outs.size(); ++i) {
      lins.push_back(trained_adapter_layer(12, outs[i], ranks[i], scalings[i], bias, dt));
      auto& lin = lins.back();
      if (int(i) == disabled) lin->set_lora_enabled(false);
      layers.push_back(lin.get());
    }
    QCOMPARE(lora_group_merges(batch * 5, dt, layers), batch > 2 && dt != torch::kBFloat16);
    auto x = torch::randn({batch, 5, 12}).to(dt).requires_grad_(inputGrad);
    auto ys = lora_linear_group(x, layers);
    QCOMPARE(ys.size(), outs.size());
    // One node for the group (behind each output's view), or one per layer where an adapter is off.
    auto node_of = [](const torch::Tensor& y) { return y.grad_fn()->next_edges().at(0).function.get(); };
    QVERIFY(graph_has(ys[0], "LoraLinearFunction"));
    QCOMPARE(node_of(ys[0]) == node_of(ys[1]), disabled < 0);
    std::vector<torch::Tensor> dys;
    auto loss = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64));
    for (size_t i = 0; i < outs.size(); ++i) {
      QCOMPARE(ys[i].sizes().vec(), (std::vector<int64_t>{batch, 5, outs[i]}));
      dys.push_back(torch::randn({batch, 5, outs[i]}).to(dt));
      if (int(i) != unused) loss = loss + (ys[i].to(torch::kFloat64) * dys[i].to(torch::kFloat64)).sum();
    }
    loss.backward();
    {
      torch::NoGradGuard g;  // the no-grad path: the same values, bit for bit
      auto again = lora_linear_group(x.detach(), layers);
      for (size_t i = 0; i < outs.size(); ++i) QVERIFY2(torch::equal(again[i], ys[i].detach()), "no-grad values differ");
    }
    QCOMPARE(x.grad().defined(), inputGrad);
    // The reference, per projection, in fp64 whatever the layers' dtype.
    auto x64 = x.detach().to(torch::kFloat64).requires_grad_(true);
    auto ref_loss = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64));
    std::vector<torch::Tensor> As, Bs, refs;
    for (size_t i = 0; i < outs.size(); ++i) {
      auto& lin = lins[i];
      As.push_back(lin->lora_A->weight.detach().to(torch::kFloat64).requires_grad_(true));
      Bs.push_back(lin->lora_B->weight.detach().to(torch::kFloat64).requires_grad_(true));
      auto ref = torch::matmul(x64, lin->weight.detach().to(torch::kFloat64).t());
      if (int(i) != disabled) ref = ref + scalings[i] * torch::matmul(torch::matmul(x64, As[i].t()), Bs[i].t());
      if (bias) ref = ref + lin->bias.detach().to(torch::kFloat64);
      if (int(i) != unused) ref_loss = ref_loss + (ref * dys[i].to(torch::kFloat64)).sum();
      refs.push_back(ref);
    }
    ref_loss.backward();
    auto close = [&](const torch::Tensor& a, const torch::Tensor& b) { return close_to(a, b, tol); };
    // No gradient is the same as a zero one.
    auto grad_of = [](const torch::Tensor& p) { return p.grad().defined() ? p.grad() : torch::zeros_like(p); };
    for (size_t i = 0; i < outs.size(); ++i) {
      const auto name = std::to_string(i);
      QVERIFY2(close(ys[i], refs[i]), ("output " + name).c_str());
      if (int(i) == disabled) {
        QVERIFY2(!lins[i]->lora_A->weight.grad().defined(), ("an adapter that is off got a gradient, " + name).c_str());
        continue;
      }
      const auto& gA = grad_of(lins[i]->lora_A->weight);
      const auto& gB = grad_of(lins[i]->lora_B->weight);
      QCOMPARE(gA.scalar_type(), lins[i]->lora_A->weight.scalar_type());  // fp32 for a bf16 layer
      QCOMPARE(gB.scalar_type(), lins[i]->lora_B->weight.scalar_type());
      QVERIFY2(close(gA, grad_of(As[i])), ("grad of lora_A " + name).c_str());
      QVERIFY2(close(gB, grad_of(Bs[i])), ("grad of lora_B " + name).c_str());
    }
    if (inputGrad) QVERIFY2(close(x.grad(), x64.grad()), "grad of the input");
  }

  void gradientsMatchFiniteDifferences_data() {
    QTest::addColumn<QString>("type");
    QTest::addColumn<bool>("rslora");
    QTest::newRow("qwen2") << "qwen2" << false;
    QTest::newRow("qwen3-rslora") << "qwen3" << true;
    QTest::newRow("llama-untied") << "llama" << false;
    // Soft-capping, sandwich norms, (1 + w) norms, sliding windows, two rope bases, fused projections.
    QTest::newRow("gemma2") << "gemma2" << false;
    QTest::newRow("gemma3_text") << "gemma3_text" << false;
    QTest::newRow("phi3-fused") << "phi3" << false;
    QTest::newRow("mistral-sliding") << "mistral" << false;
  }
  void gradientsMatchFiniteDifferences() {
    QFETCH(QString, type);
    QFETCH(bool, rslora);
    auto cfg = small_config(type.toStdString(), type != "llama" && type != "phi3" && type != "mistral");
    CausalLM m{CausalLMOptions(cfg).dtype(torch::kFloat64)};
    {
      torch::NoGradGuard g;  // non-trivial norms and biases
      for (auto& item : m->named_base_parameters())
        if (item.key().find("norm") != std::string::npos || item.key().find("bias") != std::string::npos)
          item.value().uniform_(0.5, 1.5);
    }
    LoraConfig lc;
    lc.r = 2;
    lc.lora_alpha = 3;
    lc.use_rslora = rslora;
    m->add_lora(lc);
    randomize_lora(m, 0.3);
    m->eval();
    // Two left-padded rows: padding must not leak into the gradient either.
    auto ids = torch::randint(3, cfg.vocab_size, {2, 7}, torch::kInt64);
    auto mask = torch::ones({2, 7}, torch::kInt64);
    mask[1].narrow(0, 0, 3).fill_(0);
    auto weights = torch::randn({2, 7, cfg.vocab_size}, torch::kFloat64) * mask.unsqueeze(-1).to(torch::kFloat64);
    ForwardArgs a;
    a.attention_mask = mask;
    auto loss_fn = [&] { return (m->forward(ids, a) * weights).sum(); };
    loss_fn().backward();
    const double eps = 1e-6;
    int checked = 0;
    for (auto& item : m->named_lora_parameters()) {
      auto p = item.value();
      auto grad = p.grad().clone();
      for (int k = 0; k < 3; ++k) {
        int64_t i = torch::randint(p.numel(), {1}, torch::kInt64).item<int64_t>();
        torch::NoGradGuard g;
        auto flat = p.view({-1});
        const double orig = flat[i].item<double>();
        flat[i].fill_(orig + eps);
        const double up = loss_fn().item<double>();
        flat[i].fill_(orig - eps);
        const double down = loss_fn().item<double>();
        flat[i].fill_(orig);
        const double fd = (up - down) / (2 * eps), ad = grad.view({-1})[i].item<double>();
        QVERIFY2(std::abs(fd - ad) <= 1e-6 * std::max(1.0, std::abs(fd)),
                 qPrintable(QString("%1[%2]: autograd %3, finite difference %4").arg(item.key().c_str()).arg(i).arg(ad).arg(fd)));
        ++checked;
      }
    }
    // Every adapted projection (A and B): 7 a layer, 4 for Phi-3's fused qkv_proj and gate_up_proj.
    const int per_layer = cfg.fused_qkv ? 4 : 7;
    QCOMPARE(checked, int(cfg.num_hidden_layers) * per_layer * 2 * 3);
  }

  // Gradient checkpointing recomputes each layer in backward: the loss and every gradient
  // (LoRA factors with dropout on, so the recompute must replay the same masks; and the full
  // model when the base trains) equal those of the plain forward.
  void gradientCheckpointingGivesSameGradients_data() {
    QTest::addColumn<bool>("full");
    QTest::addColumn<bool>("segmented");
    QTest::newRow("lora+dropout") << false << false;
    QTest::newRow("full") << true << false;
    QTest::newRow("lora+dropout, segments") << false << true;  // the recompute replays the gathers too
  }
  void gradientCheckpointingGivesSameGradients() {
    QFETCH(bool, full);
    QFETCH(bool, segmented);
    auto m = from_pretrained(golden_model(kBase));
    if (full) {
      m->set_base_trainable(true);
    } else {
      LoraConfig cfg;
      cfg.r = 4;
      cfg.lora_dropout = 0.3;
      m->add_lora(cfg);
      randomize_lora(m);
    }
    m->train();
    auto ids = torch::randint(300, {1, 16}, torch::kInt64);
    ForwardArgs args;
    if (segmented)  // a prompt of 4 with a completion of 3, then a sequence of its own
      args.segments = {{0, 4, 0, 0}, {4, 3, 0, 4}, {7, 9, 0, 0}};
    else
      args.seq_ids = seq_ids_from_cu_seqlens({0, 7, 16}, 16);  // two packed sequences
    auto params = full ? m->parameters() : m->lora_parameters();
    auto run = [&](bool ckpt) {
      m->set_gradient_checkpointing(ckpt);
      for (auto& p : params) p.mutable_grad() = torch::Tensor();
      torch::manual_seed(7);
      auto logits = m->forward(ids, args);
      auto loss = torch::nll_loss(torch::log_softmax(logits.view({-1, 300}), -1), ids.view({-1}));
      loss.backward();
      std::vector<torch::Tensor> grads;
      for (auto& p : params) grads.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
      return std::make_pair(loss.item<double>(), grads);
    };
    auto [loss0, g0] = run(false);
    auto [loss1, g1] = run(true);
    // The recompute path really ran: the graph holds one checkpoint node per layer.
    auto count_checkpoints = [](const torch::Tensor& out) {
      int found = 0;
      std::vector<torch::autograd::Node*> todo{out.grad_fn().get()};
      std::set<torch::autograd::Node*> seen;
      while (!todo.empty() && seen.size() < 100000) {
        auto* n = todo.back();
        todo.pop_back();
        if (!n || !seen.insert(n).second) continue;
        if (n->name().find("CheckpointFunction") != std::string::npos) ++found;
        for (const auto& e : n->next_edges()) todo.push_back(e.function.get());
      }
      return found;
    };
    m->set_gradient_checkpointing(true);
    QCOMPARE(count_checkpoints(m->forward(ids, args)), int(m->config().num_hidden_layers));
    m->set_gradient_checkpointing(false);
    QCOMPARE(count_checkpoints(m->forward(ids, args)), 0);
    m->set_gradient_checkpointing(true);
    QVERIFY(m->gradient_checkpointing());
    QCOMPARE(loss1, loss0);
    QCOMPARE(g1.size(), g0.size());
    int with_grad = 0;
    for (size_t i = 0; i < g0.size(); ++i) {
      QCOMPARE(g1[i].defined(), g0[i].defined());
      if (!g0[i].defined()) continue;
      ++with_grad;
      const double scale = std::max(1e-6, g0[i].abs().max().item<double>());
      QVERIFY2(max_abs_diff(g1[i], g0[i]) <= 1e-5 * scale,
               qPrintable(QString("param %1: %2").arg(i).arg(max_abs_diff(g1[i], g0[i]))));
    }
    QVERIFY(with_grad >= int(g0.size()) - 1);  // everything trains (a tied model: all params)
    if (!full) {
      // Dropout really drew masks: another seed changes the loss, so equal losses above mean
      // the recompute replayed them.
      m->set_gradient_checkpointing(false);
      torch::manual_seed(8);
      auto other = torch::nll_loss(torch::log_softmax(m->forward(ids, args).view({-1, 300}), -1), ids.view({-1}));
      QVERIFY(std::abs(other.item<double>() - loss0) > 1e-6);
    }
  }

  void dropoutOnlyInTrainMode() {
    auto m = from_pretrained(golden_model(kBase));
    LoraConfig cfg;
    cfg.r = 4;
    cfg.lora_dropout = 0.5;
    m->add_lora(cfg);
    randomize_lora(m);
    auto ids = torch::randint(300, {1, 10}, torch::kInt64);
    m->eval();
    auto e1 = logits_of(m, ids), e2 = logits_of(m, ids);
    QVERIFY(torch::equal(e1, e2));
    m->train();
    auto t1 = logits_of(m, ids), t2 = logits_of(m, ids);
    QVERIFY(max_abs_diff(t1, t2) > 1e-4);
  }

  void scaling() {
    LoraConfig c;
    c.r = 16;
    c.lora_alpha = 32;
    QCOMPARE(c.scaling(), 2.0);
    c.use_rslora = true;
    QCOMPARE(c.scaling(), 8.0);
    c.target_modules = {"q_prj"};
    try {
      c.validate("cfg");
      QFAIL("no error");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("q_proj") != std::string::npos, e.what());
    }
  }

  void peftSaveLoadRoundTrip() {
    auto m = from_pretrained(golden_model(kBase));
    m->eval();
    LoraConfig cfg;
    cfg.r = 8;
    cfg.lora_alpha = 16;
    cfg.use_rslora = true;
    cfg.target_modules = {"v_proj", "q_proj", "down_proj"};
    m->add_lora(cfg);
    randomize_lora(m);
    auto ids = torch::randint(300, {2, 9}, torch::kInt64);
    auto before = logits_of(m, ids);
    QTemporaryDir tmp;
    auto dir = tmp.path().toStdString() + "/policy-v1";
    save_adapter(*m, dir);
    auto f = io::SafetensorsFile::open(dir + "/adapter_model.safetensors");
    QCOMPARE(f.metadata().at("format"), std::string("pt"));
    QCOMPARE(int64_t(f.tensors().size()), int64_t(2 * 3 * 2));
    const auto* t = f.find("base_model.model.model.layers.1.mlp.down_proj.lora_A.weight");
    QVERIFY(t != nullptr);
    QCOMPARE(t->dtype, io::DType::F32);
    QCOMPARE(t->shape, (std::vector<int64_t>{8, 128}));
    QVERIFY(f.find("base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight") != nullptr);
    auto j = nlohmann::json::parse(read_file(dir + "/adapter_config.json"));
    QCOMPARE(j["r"].get<int64_t>(), int64_t(8));
    QCOMPARE(j["lora_alpha"].dump(), std::string("16"));
    QCOMPARE(j["use_rslora"].get<bool>(), true);
    QCOMPARE(j["target_modules"], nlohmann::json({"down_proj", "q_proj", "v_proj"}));
    QCOMPARE(j["base_model_name_or_path"].get<std::string>(), std::string("ceo-tiny/qwen2-tied-bf16"));
    auto fresh = from_pretrained(golden_model(kBase));
    fresh->eval();
    load_adapter(*fresh, dir);
    QVERIFY(torch::equal(logits_of(fresh, ids), before));
    QCOMPARE(fresh->lora_config().use_rslora, true);
    QVERIFY(!QDir(QString::fromStdString(dir)).entryList(QDir::Files).join(",").contains("tmp"));
  }

  void adapterConfigMatchesPeft() {
    LoraConfig cfg;
    cfg.r = 4;
    cfg.lora_alpha = 8;
    auto mine = adapter_config_json(cfg, "qwen2-tied-bf16");
    auto text = read_file(golden_model(kAdapter) + "/adapter_config.json");
    auto golden = nlohmann::json::parse(text);
    QCOMPARE(mine.dump(), golden.dump());
    QCOMPARE(mine.size(), size_t(24));
    // And written as PEFT writes it (json.dumps(indent=2, sort_keys=True)).
    auto m = from_pretrained(golden_model(kBase));
    m->add_lora(cfg);
    QTemporaryDir tmp;
    save_adapter(*m, tmp.path().toStdString(), "qwen2-tied-bf16");
    QCOMPARE(read_file(tmp.path().toStdString() + "/adapter_config.json"), text);
  }

  void adapterThatDoesNotFitIsNamed() {
    QTemporaryDir tmp;
    // Shape: a model with other dimensions (hidden 32 instead of 64).
    CausalLM small{CausalLMOptions(small_config("qwen2", true))};
    expect_load_error(small, golden_model(kAdapter),
                      {"tensor base_model.model.model.layers.0.", "expected [",
                       "hint: adapter trained for another base model?"});
    // Unexpected: a one-layer base model.
    auto cfg1 = small_config("qwen2", true);
    cfg1.hidden_size = 64;
    cfg1.intermediate_size = 128;
    cfg1.num_hidden_layers = 1;
    cfg1.head_dim = 16;
    CausalLM one{CausalLMOptions(cfg1)};
    expect_load_error(one, golden_model(kAdapter),
                      {"unexpected tensor base_model.model.model.layers.1.", "adapter trained for another base model?"});
    // Missing: the config promises a projection the file lacks.
    auto m = from_pretrained(golden_model(kBase));
    auto dir = tmp.path().toStdString() + "/missing";
    std::filesystem::create_directories(dir);
    {
      auto f = io::SafetensorsFile::open(golden_model(kAdapter) + "/adapter_model.safetensors");
      std::vector<io::TensorView> views;
      for (const auto& t : f.tensors())
        if (t.name != "base_model.model.model.layers.1.mlp.up_proj.lora_B.weight")
          views.push_back({t.name, t.dtype, t.shape, f.data(t), t.nbytes()});
      io::write_safetensors(dir + "/adapter_model.safetensors", views, {{"format", "pt"}});
      write_file_atomic(dir + "/adapter_config.json", read_file(golden_model(kAdapter) + "/adapter_config.json"));
    }
    expect_load_error(m, dir, {"missing tensor base_model.model.model.layers.1.mlp.up_proj.lora_B.weight"});
  }

  // PEFT's modules_to_save (ModulesToSaveWrapper): while the adapter is enabled the model uses the
  // adapter's whole copy of lm_head / embed_tokens, disabled the base's. On disk as PEFT's
  // get_peft_model_state_dict writes them: base_model.model.<module>.weight (it drops
  // "modules_to_save.default"). A copy of a tied embedding does not carry the tie: with only
  // embed_tokens saved, the logits still come from the base embedding.
  void modulesToSaveReplaceTheirModules_data() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<QStringList>("saved");
    QTest::newRow("untied, lm_head + embed_tokens") << "llama-untied-f32" << QStringList{"lm_head", "embed_tokens"};
    QTest::newRow("tied, embed_tokens") << "qwen2-tied-bf16" << QStringList{"embed_tokens"};
    QTest::newRow("tied, lm_head") << "qwen2-tied-bf16" << QStringList{"lm_head"};
  }
  void modulesToSaveReplaceTheirModules() {
    QFETCH(QString, model);
    QFETCH(QStringList, saved);
    const std::string dir_model = golden_model(model.toStdString());
    auto ids = load_reference(dir_model).input_ids;
    torch::NoGradGuard g;
    auto base = from_pretrained(dir_model);
    base->eval();
    const auto base_logits = base->forward(ids);
    const auto E = base->model->embed_tokens->weight.detach().clone();
    const auto head = (base->tied() ? E : base->lm_head->weight.detach()).clone() + torch::randn_like(E) * 0.2;
    const auto embed = E + torch::randn_like(E) * 0.2;
    const bool save_head = saved.contains("lm_head"), save_embed = saved.contains("embed_tokens");

    LoraConfig lc;
    lc.r = 4;
    lc.lora_alpha = 8;
    lc.target_modules = {"q_proj", "v_proj"};
    for (const auto& s : saved) lc.modules_to_save.push_back(s.toStdString());
    auto writer = from_pretrained(dir_model);
    writer->add_lora(lc);
    randomize_lora(writer, 0.3);
    if (save_head) writer->set_saved_module("lm_head", head);
    if (save_embed) writer->set_saved_module("model.embed_tokens", embed);
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString();
    save_adapter(*writer, dir);
    auto file = io::SafetensorsFile::open(dir + "/adapter_model.safetensors");
    QCOMPARE(file.find("base_model.model.lm_head.weight") != nullptr, save_head);
    QCOMPARE(file.find("base_model.model.model.embed_tokens.weight") != nullptr, save_embed);
    const auto written = nlohmann::json::parse(read_file(dir + "/adapter_config.json"));
    QCOMPARE(written["modules_to_save"].size(), size_t(saved.size()));

    auto m = from_pretrained(dir_model);
    load_adapter(*m, dir);
    m->eval();
    QCOMPARE(m->saved_modules().size(), size_t(saved.size()));
    const auto got = m->forward(ids);

    // Expected, by hand: the LoRA model on the saved embedding, then the saved head, or the base
    // head (the base embedding itself for a tied model).
    auto ref = from_pretrained(dir_model);
    LoraConfig plain = lc;
    plain.modules_to_save.clear();
    ref->add_lora(plain);
    auto mine = ref->named_lora_parameters();
    for (const auto& item : writer->named_lora_parameters()) mine[item.key()].copy_(item.value());
    ref->eval();
    if (save_embed) ref->model->embed_tokens->weight.copy_(embed);
    const auto hidden = ref->hidden_states(ids)[0];  // (T, C)
    const auto W = save_head ? head : (ref->tied() ? E : ref->lm_head->weight.detach());
    const auto want = torch::mm(hidden, W.t());
    const double d = max_abs_diff(got[0], want);
    QVERIFY2(d < 1e-4, qPrintable(QString::number(d)));
    QVERIFY(max_abs_diff(got, base_logits) > 1e-2);  // the adapter does change them

    m->set_adapter_enabled(false);
    QVERIFY(max_abs_diff(m->forward(ids), base_logits) == 0.0);
    m->set_adapter_enabled(true);
    m->remove_lora();
    QVERIFY(m->saved_modules().empty());
  }

  void modulesToSaveErrors() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString();
    auto m = from_pretrained(golden_model(kBase));
    // Listed but absent from the file.
    contents_of_golden_adapter_with(dir, "modules_to_save", nlohmann::json::array({"lm_head"}));
    expect_load_error(m, dir, {"adapter_model.safetensors", "missing tensor base_model.model.lm_head.weight", "modules_to_save"});
    QVERIFY(!m->has_lora());  // a failed load leaves the model as it was
    // In the file but not listed, and a wrong shape.
    contents_of_golden_adapter_with(dir, "modules_to_save", nullptr);
    auto f = io::SafetensorsFile::open(golden_model(kAdapter) + "/adapter_model.safetensors");
    std::vector<io::TensorView> views;
    for (const auto& t : f.tensors()) views.push_back({t.name, t.dtype, t.shape, f.data(t), t.nbytes()});
    std::vector<float> small(10 * 64, 0.5f);
    views.push_back({"base_model.model.lm_head.weight", io::DType::F32, {10, 64}, small.data(), small.size() * 4});
    io::write_safetensors(dir + "/adapter_model.safetensors", views, {{"format", "pt"}});
    expect_load_error(m, dir, {"unexpected tensor base_model.model.lm_head.weight"});
    auto j = nlohmann::json::parse(read_file(dir + "/adapter_config.json"));
    j["modules_to_save"] = {"lm_head"};
    write_file_atomic(dir + "/adapter_config.json", j.dump(2));
    expect_load_error(m, dir, {"lm_head.weight: shape 10x64, expected 300x64"});
    QVERIFY(!m->has_lora());
  }

  void unsupportedAdapterFeaturesAreClearErrors_data() {
    QTest::addColumn<QString>("key");
    QTest::addColumn<QString>("value");
    QTest::newRow("dora") << "use_dora" << "true";
    QTest::newRow("bias") << "bias" << "\"all\"";
    QTest::newRow("modules_to_save of another module") << "modules_to_save" << "[\"score\"]";
    QTest::newRow("embedding target") << "target_modules" << "[\"q_proj\",\"embed_tokens\"]";
    QTest::newRow("layer_replication") << "layer_replication" << "[[0, 1]]";  // patterns: test_peft_patterns
    QTest::newRow("unknown module") << "target_modules" << "[\"attn_proj\"]";
    QTest::newRow("another family's module") << "target_modules" << "[\"qkv_proj\"]";  // Phi-3's, not Qwen2's
  }
  void unsupportedAdapterFeaturesAreClearErrors() {
    QFETCH(QString, key);
    QFETCH(QString, value);
    QTemporaryDir tmp;
    auto dir = contents_of_golden_adapter_with(tmp.path().toStdString(), key.toStdString(),
                                               nlohmann::json::parse(value.toStdString()));
    auto m = from_pretrained(golden_model(kBase));
    expect_load_error(m, dir, {"adapter_config.json", key.toStdString()});
  }

  void embeddingLoraTensorsRejected() {
    QTemporaryDir tmp;
    auto dir = tmp.path().toStdString();
    std::vector<float> z(4 * 300, 0.f);
    io::write_safetensors(dir + "/adapter_model.safetensors",
                          {{"base_model.model.model.embed_tokens.lora_embedding_A", io::DType::F32, {4, 300}, z.data(),
                            z.size() * 4}},
                          {{"format", "pt"}});
    write_file_atomic(dir + "/adapter_config.json", read_file(golden_model(kAdapter) + "/adapter_config.json"));
    auto m = from_pretrained(golden_model(kBase));
    expect_load_error(m, dir, {"lora_embedding_A", "embeddings"});
  }
};

QTEST_GUILESS_MAIN(TestModelLora)
#include "test_model_lora.moc"
