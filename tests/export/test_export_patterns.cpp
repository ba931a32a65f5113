// `grpo export` of adapters with per-module plans (rank_pattern / alpha_pattern, layers_to_transform,
// a regex target_modules), on a small run directory around the golden qwen2-tied-bf16 model and
// its PEFT r4 adapter: the PEFT export keeps the plan and each tensor's own rank, the merged
// export gives PEFT's reference logits, and init_adapter refuses a plan a run cannot carry.
#include "tests/common/test_paths.h"
#include <QtTest>

#include <filesystem>
#include <functional>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/io/safetensors.h"
#include "core/model/causal_lm.h"
#include "core/model/peft_io.h"
#include "core/model/weights.h"
#include "core/run/adapter_import.h"
#include "core/run/export.h"

class TestExportPatterns : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void peftExportKeepsThePlan();
  void mergedExportGivesPeftLogits();
  void initAdapterRefusesPatterns();
  void modulesToSaveExportAndMerge();
};

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;
using namespace grpo;

namespace {

std::string golden(const std::string& name) { return std::string(GRPO_TEST_DATA) + "/golden/models/" + name; }
const std::string kAdapter = "qwen2-tied-bf16-lora-r4";

// A run directory: config.json naming the golden base, adapter/ with `edits` applied to the
// golden adapter_config.json and the golden tensors that `keep` passes.
std::string make_run(const std::string& root, const ojson& edits, const std::function<bool(const std::string&)>& keep = {}) {
  const std::string run = root + "/run";
  fs::create_directories(run + "/adapter");
  write_file_atomic(run + "/config.json", nlohmann::json({{"model_name_or_path", golden("qwen2-tied-bf16")}}).dump(2));
  auto cfg = ojson::parse(read_file(golden(kAdapter) + "/adapter_config.json"));
  for (const auto& [k, v] : edits.items()) cfg[k] = v;
  write_file_atomic(run + "/adapter/adapter_config.json", cfg.dump(2));
  auto f = io::SafetensorsFile::open(golden(kAdapter) + "/adapter_model.safetensors");
  std::vector<io::TensorView> views;
  for (const auto& t : f.tensors())
    if (!keep || keep(t.name)) views.push_back({t.name, t.dtype, t.shape, f.data(t), t.nbytes()});
  io::write_safetensors(run + "/adapter/adapter_model.safetensors", views, {{"format", "pt"}});
  return run;
}

run::ExportOptions options(const std::string& run, const std::string& out, bool merged) {
  run::ExportOptions o;
  o.run_dir = run;
  o.out_dir = out;
  o.merged = merged;
  return o;
}

// Reference input ids and PEFT's logits of the golden adapter.
std::pair<torch::Tensor, torch::Tensor> reference() {
  auto j = nlohmann::json::parse(read_file(golden(kAdapter) + "/reference_logits.json"));
  auto ids = torch::tensor(j["input_ids"].get<std::vector<int64_t>>(), torch::kInt64).unsqueeze(0);
  std::vector<float> flat;
  for (const auto& row : j["logits"])
    for (const auto& v : row) flat.push_back(v.get<float>());
  return {ids, torch::tensor(flat).view({int64_t(j["logits"].size()), -1})};
}

const ojson kPatterns = ojson::parse(R"({"r": 16, "lora_alpha": 32, "rank_pattern": {"\\w+_proj": 4, ".+": 99},
                                          "alpha_pattern": {"mlp\\..*": 8, ".+": 8}})");

}  // namespace

void TestExportPatterns::peftExportKeepsThePlan() {
  QTemporaryDir tmp;
  // Layer 1 only, through layers_to_transform: the export has layer-1 tensors of rank 4.
  auto run = make_run(tmp.path().toStdString(), ojson::parse(R"({"layers_to_transform": [1], "layers_pattern": "layers"})"),
                      [](const std::string& n) { return n.find(".layers.1.") != std::string::npos; });
  const std::string out = tmp.path().toStdString() + "/out";
  run::export_run(options(run, out, false));
  const auto in = model::read_adapter_config(run + "/adapter"), exported = model::read_adapter_config(out);
  QVERIFY(in == exported);
  auto j = nlohmann::json::parse(read_file(out + "/adapter_config.json"));
  QCOMPARE(j["layers_to_transform"], nlohmann::json({1}));
  QCOMPARE(j["layers_pattern"], nlohmann::json("layers"));
  auto f = io::SafetensorsFile::open(out + "/adapter_model.safetensors");
  QCOMPARE(f.tensors().size(), size_t(14));

  // rank_pattern: each tensor is checked against its module's own rank (4, not r 16).
  QTemporaryDir tmp2;
  run = make_run(tmp2.path().toStdString(), kPatterns);
  run::export_run(options(run, tmp2.path().toStdString() + "/out", false));
  QVERIFY(model::read_adapter_config(tmp2.path().toStdString() + "/out") == model::read_adapter_config(run + "/adapter"));

  // A tensor for a module the plan does not adapt, and a module the plan adapts without tensors.
  QTemporaryDir tmp3;
  run = make_run(tmp3.path().toStdString(), ojson::parse(R"({"layers_to_transform": [1]})"));
  try {
    run::export_run(options(run, tmp3.path().toStdString() + "/out", false));
    QFAIL("no error");
  } catch (const Error& e) {
    QVERIFY2(std::string(e.what()).find("does not adapt model.layers.0.") != std::string::npos, e.what());
  }
  QTemporaryDir tmp4;
  run = make_run(tmp4.path().toStdString(), ojson::parse(R"({"target_modules": "model\\.layers\\.\\d+\\..*_proj"})"),
                 [](const std::string& n) { return n.find(".layers.0.mlp.up_proj.") == std::string::npos; });
  try {
    run::export_run(options(run, tmp4.path().toStdString() + "/out", false));
    QFAIL("no error");
  } catch (const Error& e) {
    QVERIFY2(std::string(e.what()).find("adapts model.layers.0.mlp.up_proj but the file has no tensors") != std::string::npos,
             e.what());
  }
}

void TestExportPatterns::mergedExportGivesPeftLogits() {
  QTemporaryDir tmp;
  auto run = make_run(tmp.path().toStdString(), kPatterns);
  const std::string out = tmp.path().toStdString() + "/merged";
  run::export_run(options(run, out, true));
  auto m = model::from_pretrained(out, torch::kFloat32, torch::kCPU);
  m->eval();
  auto [ids, ref] = reference();
  torch::NoGradGuard g;
  const double d = (m->forward(ids)[0].to(torch::kFloat64) - ref.to(torch::kFloat64)).abs().max().item<double>();
  qInfo("merged export of the rank/alpha-pattern adapter: max|diff| to PEFT's logits %.3g", d);
  QVERIFY(d <= 1e-4);
}

void TestExportPatterns::initAdapterRefusesPatterns() {
  QTemporaryDir tmp;
  auto run = make_run(tmp.path().toStdString(), kPatterns);
  run::Policy p;
  p.model = model::from_pretrained(golden("qwen2-tied-bf16"), torch::kFloat32, torch::kCPU);
  ::grpo::grpo::TrainConfig cfg;
  cfg.init_adapter = run + "/adapter";
  try {
    run::seed_from_init_adapter(p, cfg);
    QFAIL("no error");
  } catch (const Error& e) {
    QVERIFY2(std::string(e.what()).find("cannot be carried by a run's config yet") != std::string::npos, e.what());
  }
  QVERIFY(!p.model->has_lora());
}

// The golden adapter plus a trained lm_head (modules_to_save) on the tied golden base: the PEFT
// export keeps the whole module, and the merged model comes out untied with that head, giving
// the same logits as base + adapter.
void TestExportPatterns::modulesToSaveExportAndMerge() {
  QTemporaryDir tmp;
  const std::string root = tmp.path().toStdString();
  auto run = make_run(root, ojson::parse(R"({"modules_to_save": ["lm_head"]})"));
  auto base = model::from_pretrained(golden("qwen2-tied-bf16"), torch::kFloat32, torch::kCPU);
  torch::manual_seed(5);
  auto head = (base->model->embed_tokens->weight.detach() + torch::randn({300, 64}) * 0.3).contiguous();
  {  // append the whole module to the adapter's tensors, under PEFT's name
    auto f = io::SafetensorsFile::open(run + "/adapter/adapter_model.safetensors");
    std::vector<torch::Tensor> keep;
    std::vector<io::TensorView> views;
    for (const auto& t : f.tensors()) views.push_back({t.name, t.dtype, t.shape, f.data(t), t.nbytes()});
    views.push_back({"base_model.model.lm_head.weight", io::DType::F32, {300, 64}, head.data_ptr(), uint64_t(head.nbytes())});
    io::write_safetensors(root + "/tensors.safetensors", views, {{"format", "pt"}});
  }
  fs::rename(root + "/tensors.safetensors", run + "/adapter/adapter_model.safetensors");

  auto with_adapter = model::from_pretrained(golden("qwen2-tied-bf16"), torch::kFloat32, torch::kCPU);
  model::load_adapter(*with_adapter, run + "/adapter");
  with_adapter->eval();
  auto [ids, ref] = reference();
  torch::NoGradGuard g;
  const auto want = with_adapter->forward(ids)[0];
  QVERIFY((want - ref).abs().max().item<double>() > 0.1);  // the saved head changes PEFT's LoRA-only logits

  const std::string peft = root + "/peft";
  run::export_run(options(run, peft, false));
  auto f = io::SafetensorsFile::open(peft + "/adapter_model.safetensors");
  QVERIFY(f.find("base_model.model.lm_head.weight") != nullptr);
  QCOMPARE(nlohmann::json::parse(read_file(peft + "/adapter_config.json"))["modules_to_save"], nlohmann::json({"lm_head"}));

  const std::string merged = root + "/merged";
  run::export_run(options(run, merged, true));
  QCOMPARE(nlohmann::json::parse(read_file(merged + "/config.json"))["tie_word_embeddings"], nlohmann::json(false));
  auto m = model::from_pretrained(merged, torch::kFloat32, torch::kCPU);
  m->eval();
  QVERIFY(!m->tied());
  const double d = (m->forward(ids)[0] - want).abs().max().item<double>();
  qInfo("merged export with modules_to_save lm_head: max|diff| to base + adapter %.3g", d);
  QVERIFY(d <= 1e-4);
}

QTEST_GUILESS_MAIN(TestExportPatterns)
#include "test_export_patterns.moc"
