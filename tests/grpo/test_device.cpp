// The model and the GRPO trainer on a compute device: GRPO_TEST_DEVICE=cuda|cpu (default: cuda
// when LibTorch sees one, else cpu). CTest runs it on the CPU; scripts/gpu_check.sh runs it on
// CUDA. Checks, against references nobody here wrote or against the CPU:
//   - golden logits (transformers / PEFT) from checkpoints loaded onto the device, in fp32 (TF32
//     off) and in the device's default compute dtype (bf16 on CUDA), with a dtype's tolerance;
//   - incremental decoding with a KV cache on the device equals the full forward;
//   - the LoRA gradients of every loss_type on the device equal the CPU's (same weights, fp32);
//   - gradient checkpointing with LoRA dropout gives the gradients of the plain backward (the
//     recompute replays the device generator's dropout masks);
//   - a few optimizer steps in the device's compute dtype keep the loss finite and lower it.
#include <QtTest>

#include <cmath>
#include <cstdlib>
#include <torch/torch.h>

#include "core/grpo/trainer.h"
#include "core/model/causal_lm.h"
#include "core/model/kv_cache.h"
#include "core/model/peft_io.h"
#include "core/model/weights.h"
#include "tests/common/tiny_lora.h"
#include "tests/model/model_test_util.h"

namespace io = grpo::io;
namespace model = grpo::model;
namespace algo = grpo::grpo;

namespace {

torch::Device test_device() {
  const char* env = std::getenv("GRPO_TEST_DEVICE");
  const std::string want = env && *env ? env : (torch::cuda::is_available() ? "cuda" : "cpu");
  return torch::Device(want);
}

// The tiny LoRA model in `dtype` on `device`; every parameter (base and LoRA) copied from `like`
// when given, so two devices hold the same function.
model::CausalLM tiny_lora_model(torch::Device device, torch::Dtype dtype, const model::CausalLM* like) {
  auto m = grpo::testing::tiny_lora_model({}, dtype, device);
  if (like) {
    torch::NoGradGuard ng;
    auto src = (*like)->named_parameters(/*recurse=*/true);
    for (auto& kv : m->named_parameters(true)) kv.value().copy_(src[kv.key()].to(device, kv.value().scalar_type()));
  }
  return m;
}

std::vector<algo::TrainSample> make_samples(model::CausalLM& m) {
  return grpo::testing::samples_near_policy(m, {{{1, 2, 3}, {10, 11, 12, 13}, 1.2},
                                                {{4, 5}, {14, 15}, -0.4},
                                                {{6, 7, 8, 9}, {16, 17, 18}, -0.8},
                                                {{3, 1}, {19, 20, 21, 22, 23}, 0.5}});
}

algo::TrainConfig train_config(const char* loss_type) {
  algo::TrainConfig cfg;
  cfg.loss_type = loss_type;
  cfg.temperature = 1.0;
  cfg.beta = std::string(loss_type) == "grpo" ? 0.05 : 0.0;  // also the KL term
  cfg.per_device_train_batch_size = 2;
  cfg.max_completion_length = 8;
  return cfg;
}

// Largest |a - b| relative to the largest |b| (1 when b is all zeros).
double relative_diff(const torch::Tensor& a, const torch::Tensor& b) {
  auto a64 = a.to(torch::kCPU, torch::kFloat64), b64 = b.to(torch::kCPU, torch::kFloat64);
  return (a64 - b64).abs().max().item<double>() / std::max(1e-12, b64.abs().max().item<double>());
}

}  // namespace

class TestDevice : public QObject {
  Q_OBJECT
  torch::Device device_ = torch::kCPU;

private Q_SLOTS:
  void initTestCase() {
    device_ = test_device();
    if (device_.is_cuda() && !torch::cuda::is_available())
      QFAIL("GRPO_TEST_DEVICE=cuda but LibTorch sees no CUDA device (a CPU-only LibTorch, or no driver)");
    // fp32 means fp32 here: TensorFloat-32 matmuls would carry ~1e-3 relative error.
    at::globalContext().setAllowTF32CuBLAS(false);
    at::globalContext().setAllowTF32CuDNN(false);
    qInfo("device %s, default compute dtype %s", device_.str().c_str(),
          c10::toString(model::default_compute_dtype(device_)));
  }

  void goldenLogits_data() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("adapter");
    QTest::addColumn<bool>("fp32");
    for (bool fp32 : {true, false}) {
      const char* tag = fp32 ? "fp32" : "compute-dtype";
      QTest::newRow(qPrintable(QString("llama-untied-f32 ") + tag)) << "llama-untied-f32" << "" << fp32;
      QTest::newRow(qPrintable(QString("qwen2-tied-bf16 ") + tag)) << "qwen2-tied-bf16" << "" << fp32;
      QTest::newRow(qPrintable(QString("qwen2-tied-bf16+lora-r4 ") + tag))
          << "qwen2-tied-bf16" << "qwen2-tied-bf16-lora-r4" << fp32;
    }
  }
  void goldenLogits() {
    QFETCH(QString, model);
    QFETCH(QString, adapter);
    QFETCH(bool, fp32);
    using model::test::golden_model;
    const auto dtype = fp32 ? torch::kFloat32 : model::default_compute_dtype(device_);
    auto ref = model::test::load_reference(golden_model((adapter.isEmpty() ? model : adapter).toStdString()));
    auto m = model::from_pretrained(golden_model(model.toStdString()), dtype, device_);
    if (!adapter.isEmpty()) model::load_adapter(*m, golden_model(adapter.toStdString()));
    m->eval();
    torch::NoGradGuard g;
    auto logits = m->forward(ref.input_ids.to(device_))[0].to(torch::kCPU);  // (T, V) fp32
    QCOMPARE(logits.sizes().vec(), ref.logits.sizes().vec());
    const double diff = model::test::max_abs_diff(logits, ref.logits);
    // fp32: as tight as the CPU test. bf16 weights and activations: 8 mantissa bits through two
    // layers, judged against the logits' own scale.
    const double scale = ref.logits.abs().max().item<double>();
    const double tol = dtype == torch::kFloat32 ? 1e-4 : 0.05 * std::max(1.0, scale);
    qInfo("%s on %s: max abs diff %g (tolerance %g, logits up to %g)", c10::toString(dtype),
          device_.str().c_str(), diff, tol, scale);
    QVERIFY2(diff <= tol, qPrintable(QString("max abs diff %1 > %2").arg(diff).arg(tol)));
    // The prediction itself survives the dtype: the arg-max token agrees almost everywhere.
    const double agree = (logits.argmax(-1) == ref.logits.argmax(-1)).to(torch::kFloat64).mean().item<double>();
    QVERIFY2(agree >= (dtype == torch::kFloat32 ? 1.0 : 0.9), qPrintable(QString("arg-max agreement %1").arg(agree)));
  }

  void kvCacheDecodeEqualsFullForward() {
    auto m = model::from_pretrained(model::test::golden_model("qwen2-tied-bf16"), torch::kFloat32, device_);
    m->eval();
    torch::InferenceMode g;
    const int64_t V = m->config().vocab_size;
    torch::manual_seed(3);
    auto seq = torch::randint(3, V, {1, 12}, torch::kInt64).to(device_);  // (1, 12)
    auto full = m->forward(seq)[0].to(torch::kCPU);                      // (12, V)
    model::KVCache cache(m->config().num_hidden_layers, /*reserve=*/4);   // grows on the device
    model::ForwardArgs prefill;
    prefill.cache = &cache;
    std::vector<torch::Tensor> steps = {m->forward(seq.narrow(1, 0, 5), prefill)[0]};  // (5, V)
    for (int64_t t = 5; t < 12; ++t) {
      model::ForwardArgs a;
      a.cache = &cache;
      steps.push_back(m->forward(seq.narrow(1, t, 1), a)[0]);  // (1, V)
    }
    const double diff = model::test::max_abs_diff(torch::cat(steps).to(torch::kCPU), full);
    qInfo("decode vs full forward on %s: %g", device_.str().c_str(), diff);
    QVERIFY2(diff <= 1e-4, qPrintable(QString("max abs diff %1").arg(diff)));
  }

  void loraGradientsMatchCpu() {
    for (const char* loss_type : {"dapo", "grpo", "bnpo", "dr_grpo"}) {
      auto cpu = tiny_lora_model(torch::kCPU, torch::kFloat32, nullptr);
      auto dev = tiny_lora_model(device_, torch::kFloat32, &cpu);
      auto samples = make_samples(cpu);
      algo::GrpoTrainer cpu_trainer(cpu, train_config(loss_type));
      algo::GrpoTrainer dev_trainer(dev, train_config(loss_type));
      const auto cpu_metrics = cpu_trainer.forward_backward(samples, true);
      const auto dev_metrics = dev_trainer.forward_backward(samples, true);
      QVERIFY2(std::abs(cpu_metrics.at("loss") - dev_metrics.at("loss")) <= 1e-4 * std::max(1.0, std::abs(cpu_metrics.at("loss"))),
               qPrintable(QString("%1: loss %2 on cpu, %3 on device").arg(loss_type).arg(cpu_metrics.at("loss")).arg(dev_metrics.at("loss"))));
      auto want = cpu->named_lora_parameters();
      int checked = 0;
      for (const auto& kv : dev->named_lora_parameters()) {
        const auto& g = kv.value().grad();
        QVERIFY2(g.defined(), qPrintable(QString("%1: no gradient for %2").arg(loss_type, kv.key().c_str())));
        QCOMPARE(g.device().type(), device_.type());
        const double d = relative_diff(g, want[kv.key()].grad());
        QVERIFY2(d <= 1e-4, qPrintable(QString("%1: %2 relative diff %3").arg(loss_type, kv.key().c_str()).arg(d)));
        ++checked;
      }
      QVERIFY(checked > 0);
      for (const auto& kv : dev->named_base_parameters()) QVERIFY(!kv.value().grad().defined());
    }
  }

  // Recomputing a checkpointed layer in backward replays the dropout masks of its forward, from
  // the generator of the device the activations live on (the CPU's, or the GPU's own).
  void gradientCheckpointingReplaysDropout() {
    auto make = [&] {
      auto m = tiny_lora_model(device_, torch::kFloat32, nullptr);
      model::LoraConfig lc;
      lc.r = 2;
      lc.lora_alpha = 4;
      lc.lora_dropout = 0.3;
      m->add_lora(lc);  // fresh factors (B = 0): give B values so dropout reaches the loss
      {
        torch::NoGradGuard ng;
        torch::manual_seed(5);
        for (auto& p : m->lora_parameters()) p.copy_(torch::randn(p.sizes()).mul_(0.3).to(p.device()));
      }
      return m;
    };
    std::vector<std::map<std::string, torch::Tensor>> grads;
    std::vector<double> losses;
    for (bool checkpointing : {false, true}) {
      auto m = make();
      auto samples = make_samples(m);
      auto cfg = train_config("dapo");
      cfg.gradient_checkpointing = checkpointing;
      algo::GrpoTrainer trainer(m, cfg);
      m->train();
      torch::manual_seed(11);  // seeds the CPU and every CUDA generator
      losses.push_back(trainer.forward_backward(samples, true).at("loss"));
      std::map<std::string, torch::Tensor> g;
      for (const auto& kv : m->named_lora_parameters()) g[kv.key()] = kv.value().grad().to(torch::kCPU).clone();
      grads.push_back(g);
    }
    QVERIFY2(std::abs(losses[0] - losses[1]) <= 1e-5 * std::max(1.0, std::abs(losses[0])),
             qPrintable(QString("loss %1 without checkpointing, %2 with").arg(losses[0]).arg(losses[1])));
    for (const auto& [name, g] : grads[0]) {
      const double d = relative_diff(grads[1].at(name), g);
      QVERIFY2(d <= 1e-4, qPrintable(QString("%1: relative diff %2 with checkpointing").arg(name.c_str()).arg(d)));
    }
  }

  void stepsInComputeDtypeLowerTheLoss() {
    const auto dtype = model::default_compute_dtype(device_);
    auto m = tiny_lora_model(device_, dtype, nullptr);
    auto samples = make_samples(m);
    auto cfg = train_config("dapo");
    cfg.learning_rate = 1e-2;
    algo::GrpoTrainer trainer(m, cfg);
    const double before = trainer.forward_backward(samples, false).at("loss");
    double last = before;
    for (int i = 0; i < 5; ++i) {
      const auto metrics = trainer.step(samples);
      for (const auto& [name, value] : metrics)
        QVERIFY2(std::isfinite(value), qPrintable(QString("step %1: %2 = %3").arg(i).arg(name.c_str()).arg(value)));
      last = trainer.forward_backward(samples, false).at("loss");
    }
    qInfo("%s on %s: loss %g -> %g after 5 steps", c10::toString(dtype), device_.str().c_str(), before, last);
    QVERIFY2(last < before, qPrintable(QString("loss %1 -> %2").arg(before).arg(last)));
  }
};

QTEST_GUILESS_MAIN(TestDevice)
#include "test_device.moc"
