// Export of a real run made by the `grpo` CLI (demo model and task, 3 steps), checked against
// docs/formats.md, "PEFT adapter folder" and "safetensors", and against the model itself through
// `grpo inspect logits`:
// - PEFT export: adapter_config.json fields and values as PeftModel.save_pretrained writes them,
//   safetensors key names (no adapter-name segment), shapes from the base config, dtypes,
//   {"format":"pt"} metadata, vLLM's acceptance rules; logits with the exported adapter equal the
//   in-run adapter's; bf16/f16 exports are the f32 values rounded;
// - merged export: sharded safetensors + model.safetensors.index.json (every tensor once, in the
//   shard the index names, total_size = the tensor bytes), config/tokenizer files, and logits
//   equal to base + adapter;
// - model card front matter and numbers from metrics.jsonl; errors list what exists;
// - TensorBoard event file of the run parses back to the metrics.jsonl values;
// - init_adapter seeds a policy with an exported adapter.
#include "tests/common/test_paths.h"
#include <QtTest>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <torch/torch.h>

#include "core/common/files.h"
#include "core/grpo/config.h"
#include "core/io/hf_config.h"
#include "core/io/safetensors.h"
#include "core/model/peft_io.h"
#include "core/model/weights.h"
#include "core/records/model_card.h"
#include "core/records/tensorboard.h"
#include "core/run/adapter_import.h"
#include "core/run/export.h"
#include "core/run/policy.h"
#include "tests/common/cli_logits.h"
#include "tests/common/run_cli.h"
#include "../common/error_of.h"

namespace fs = std::filesystem;
using grpo::testing::error_of;
using json = nlohmann::json;

namespace {

const std::string kModel = std::string(GRPO_RESOURCES) + "/models/tiny-arith";
const std::string kIds = "532,12,5,9,7,3,20,1";


using grpo::testing::last_json_line;
using grpo::testing::max_abs_diff;

// `grpo inspect logits --last` for the fixed ids.
std::vector<float> logits(const std::string& model, const std::string& adapter = {}) {
  return grpo::testing::cli_logits(model, kIds, adapter);
}

json read_json(const std::string& p) { return json::parse(grpo::read_file(p)); }

std::vector<json> read_jsonl(const std::string& p) {
  std::istringstream in(grpo::read_file(p));
  std::vector<json> out;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

// ExportOptions by field name (aggregate init would leave later fields to -Wextra's warnings).
grpo::run::ExportOptions options(const std::string& run, std::optional<int64_t> version, std::optional<int64_t> step,
                                 const std::string& out, bool merged = false) {
  grpo::run::ExportOptions o;
  o.run_dir = run;
  o.version = version;
  o.checkpoint_step = step;
  o.out_dir = out;
  o.merged = merged;
  return o;
}

torch::Tensor tensor_of(const grpo::io::SafetensorsFile& f, const std::string& name) {
  return grpo::model::read_tensor(f, f.at(name)).clone();
}

}  // namespace

class TestExport : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  std::string run_;

private Q_SLOTS:
  void initTestCase() {
    // The demo preset, made small: 4 prompts x 8 per step, a version per step, a checkpoint at
    // step 2 and the final one at 3, greedy eval on 16 held-out questions at steps 2 and 3.
    run_ = tmp_.path().toStdString() + "/run";
    json cfg = grpo::grpo::load_config_file(std::string(GRPO_RESOURCES) + "/presets/demo.yaml");
    cfg["model_name_or_path"] = kModel;
    cfg["prompts_per_step"] = 4;
    cfg["max_steps"] = 3;
    cfg["weight_sync_steps"] = 1;
    cfg["save_steps"] = 2;
    cfg["eval_steps"] = 2;
    cfg["eval_size"] = 16;
    cfg["warmup_ratio"] = 0.0;
    cfg["learning_rate"] = 0.01;  // three steps must move the adapter measurably
    const std::string cfg_path = tmp_.path().toStdString() + "/run.json";
    grpo::write_file_atomic(cfg_path, cfg.dump(2));
    const auto r = run_cli({"train", QString::fromStdString(cfg_path), "--output", QString::fromStdString(run_)});
    QVERIFY2(r.code == 0, r.out.c_str());
    QVERIFY(fs::is_directory(run_ + "/adapters/policy-v3"));
    QVERIFY(fs::is_directory(run_ + "/checkpoints/step-3"));
  }

  void peft_export_matches_peft_layout() {
    const std::string out = tmp_.path().toStdString() + "/peft";
    const auto res = grpo::run::export_run(options(run_, 3, std::nullopt, out));
    QCOMPARE(res.out_dir, out);
    QCOMPARE(res.files, (std::vector<std::string>{"adapter_config.json", "adapter_model.safetensors", "README.md"}));

    // adapter_config.json: the PEFT field set, sorted keys, indent 2 (json.dumps(indent=2, sort_keys=True)).
    const std::string text = grpo::read_file(out + "/adapter_config.json");
    const json c = json::parse(text);
    QCOMPARE(text, c.dump(2) + "\n");
    const json want = {
        {"alpha_pattern", json::object()}, {"auto_mapping", nullptr}, {"base_model_name_or_path", kModel},
        {"bias", "none"}, {"fan_in_fan_out", false}, {"inference_mode", true}, {"init_lora_weights", true},
        {"layer_replication", nullptr}, {"layers_pattern", nullptr}, {"layers_to_transform", nullptr},
        {"loftq_config", json::object()}, {"lora_alpha", 32}, {"lora_dropout", 0.0}, {"megatron_config", nullptr},
        {"megatron_core", "megatron.core"}, {"modules_to_save", nullptr}, {"peft_type", "LORA"}, {"r", 16},
        {"rank_pattern", json::object()}, {"revision", nullptr},
        {"target_modules", {"down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"}},
        {"task_type", "CAUSAL_LM"}, {"use_dora", false}, {"use_rslora", false}};
    QCOMPARE(c, want);

    // Tensors: PEFT names without the adapter name, [r, in] / [out, r], F32, {"format": "pt"}.
    const auto base = grpo::io::ModelConfig::load(kModel + "/config.json");
    auto f = grpo::io::SafetensorsFile::open(out + "/adapter_model.safetensors");
    QCOMPARE(f.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
    const int64_t r = 16, h = base.hidden_size, q = base.q_dim(), kv = base.kv_dim(), im = base.intermediate_size;
    const std::map<std::string, std::pair<int64_t, int64_t>> in_out = {
        {"self_attn.q_proj", {h, q}}, {"self_attn.k_proj", {h, kv}}, {"self_attn.v_proj", {h, kv}},
        {"self_attn.o_proj", {q, h}}, {"mlp.gate_proj", {h, im}}, {"mlp.up_proj", {h, im}}, {"mlp.down_proj", {im, h}}};
    std::set<std::string> expected;
    for (int64_t layer = 0; layer < base.num_hidden_layers; ++layer)
      for (const auto& [m, io] : in_out) {
        const std::string stem = "base_model.model.model.layers." + std::to_string(layer) + "." + m;
        expected.insert(stem + ".lora_A.weight");
        expected.insert(stem + ".lora_B.weight");
        QCOMPARE(f.at(stem + ".lora_A.weight").shape, (std::vector<int64_t>{r, io.first}));
        QCOMPARE(f.at(stem + ".lora_B.weight").shape, (std::vector<int64_t>{io.second, r}));
      }
    const auto names = f.names();
    QCOMPARE(std::set<std::string>(names.begin(), names.end()), expected);
    for (const auto& t : f.tensors()) QCOMPARE(t.dtype, grpo::io::DType::F32);

    // The f32 export holds exactly the run's version-3 tensors.
    auto src = grpo::io::SafetensorsFile::open(run_ + "/adapters/policy-v3/adapter_model.safetensors");
    for (const auto& n : names) QVERIFY2(torch::equal(tensor_of(f, n), tensor_of(src, n)), n.c_str());
    // Training moved B away from its zero init.
    QVERIFY(tensor_of(f, "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight").abs().max().item<float>() > 0);

    QVERIFY(grpo::run::vllm_adapter_problems(out).empty());

    // Logits: exported adapter == in-run adapter, and both differ from the base model.
    const auto with_run = logits(kModel, run_ + "/adapters/policy-v3");
    const auto with_export = logits(kModel, out);
    QCOMPARE(max_abs_diff(with_run, with_export), 0.0);
    QVERIFY(max_abs_diff(with_run, logits(kModel)) > 1e-5);
  }

  void half_precision_exports_round_the_f32_values() {
    const auto f32 = grpo::io::SafetensorsFile::open(run_ + "/adapters/policy-v3/adapter_model.safetensors");
    for (const auto& [name, dtype, st] : std::vector<std::tuple<std::string, torch::Dtype, grpo::io::DType>>{
             {"bf16", torch::kBFloat16, grpo::io::DType::BF16}, {"f16", torch::kFloat16, grpo::io::DType::F16}}) {
      const std::string out = tmp_.path().toStdString() + "/peft-" + name;
      grpo::run::ExportOptions o = options(run_, 3, std::nullopt, out);
      o.dtype = name;
      grpo::run::export_run(o);
      auto f = grpo::io::SafetensorsFile::open(out + "/adapter_model.safetensors");
      for (const auto& t : f.tensors()) {
        QCOMPARE(t.dtype, st);
        QVERIFY2(torch::equal(tensor_of(f, t.name), tensor_of(f32, t.name).to(dtype)), t.name.c_str());
      }
      QVERIFY(grpo::run::vllm_adapter_problems(out).empty());
      QVERIFY(grpo::read_file(out + "/README.md").find(name == "bf16" ? "| tensor dtype | BF16 |" : "| tensor dtype | F16 |") !=
              std::string::npos);
      // Loads through the same path a user's adapter takes; rounding moves logits only slightly.
      const double d = max_abs_diff(logits(kModel, out), logits(kModel, run_ + "/adapters/policy-v3"));
      QVERIFY2(d < 0.05, qPrintable(QString::number(d)));
    }
  }

  void merged_export_is_base_plus_adapter_and_sharded() {
    const std::string out = tmp_.path().toStdString() + "/merged";
    const auto total_params = grpo::model::from_pretrained(kModel)->num_base_parameters();
    grpo::run::ExportOptions o = options(run_, 3, std::nullopt, out, true);
    o.max_shard_bytes = 400 * 1000;  // the 3.4 MB model in several shards
    const auto res = grpo::run::export_run(o);

    const json index = read_json(out + "/model.safetensors.index.json");
    std::set<std::string> shard_files;
    for (const auto& fname : res.files)
      if (std::regex_match(fname, std::regex(R"(model-\d{5}-of-\d{5}\.safetensors)"))) shard_files.insert(fname);
    QVERIFY2(shard_files.size() >= 3, qPrintable(QString::number(shard_files.size())));
    const std::string n = std::to_string(shard_files.size());
    uint64_t total = 0;
    int64_t params = 0;
    std::set<std::string> seen;
    size_t i = 0;
    for (const auto& fname : shard_files) {
      ++i;
      char want[64];
      std::snprintf(want, sizeof want, "model-%05zu-of-%05zu.safetensors", i, shard_files.size());
      QCOMPARE(fname, std::string(want));
      auto f = grpo::io::SafetensorsFile::open(out + "/" + fname);
      QCOMPARE(f.metadata().at("format"), std::string("pt"));
      uint64_t bytes = 0;
      for (const auto& t : f.tensors()) {
        QCOMPARE(index["weight_map"][t.name].get<std::string>(), fname);  // the index says where it is
        QVERIFY2(seen.insert(t.name).second, t.name.c_str());             // and it is only there
        bytes += t.nbytes();
        params += t.numel();
      }
      QVERIFY(bytes <= 400 * 1000 || f.tensors().size() == 1);  // over the limit only alone
      total += bytes;
    }
    QCOMPARE(index["weight_map"].size(), seen.size());
    QCOMPARE(index["metadata"]["total_size"].get<uint64_t>(), total);
    QCOMPARE(params, total_params);
    QVERIFY(!seen.count("lm_head.weight"));  // tied: as save_pretrained writes it

    // config.json is the base's with the dtype; tokenizer and generation config copied byte for byte.
    json cfg = read_json(out + "/config.json");
    QCOMPARE(cfg["torch_dtype"], json("float32"));
    json base_cfg = read_json(kModel + "/config.json");
    base_cfg["torch_dtype"] = "float32";
    QCOMPARE(cfg, base_cfg);
    for (const char* name : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"})
      QCOMPARE(grpo::read_file(out + "/" + name), grpo::read_file(kModel + "/" + name));

    // The merged model's logits equal the base with the adapter applied.
    const double d = max_abs_diff(logits(out), logits(kModel, run_ + "/adapters/policy-v3"));
    QVERIFY2(d < 1e-4, qPrintable(QString::number(d)));

    const std::string readme = grpo::read_file(out + "/README.md");
    QVERIFY(readme.find("library_name: transformers\n") != std::string::npos);
    QVERIFY(readme.find("base_model_relation: finetune\n") != std::string::npos);  // a merged LoRA is a fine-tune

    // Without a small limit: one model.safetensors, no index.
    const std::string one = tmp_.path().toStdString() + "/merged-one";
    grpo::run::ExportOptions o1 = options(run_, 3, std::nullopt, one, true);
    o1.dtype = "bf16";
    grpo::run::export_run(o1);
    QVERIFY(grpo::file_exists(one + "/model.safetensors"));
    QVERIFY(!grpo::file_exists(one + "/model.safetensors.index.json"));
    QCOMPARE(read_json(one + "/config.json")["torch_dtype"], json("bfloat16"));
    const auto one_file = grpo::io::SafetensorsFile::open(one + "/model.safetensors");
    for (const auto& t : one_file.tensors()) QCOMPARE(t.dtype, grpo::io::DType::BF16);
  }

  void model_card_has_front_matter_and_run_numbers() {
    const std::string out = tmp_.path().toStdString() + "/card";
    grpo::run::ExportOptions o = options(run_, std::nullopt, std::nullopt, out);
    o.base_model_name = "Qwen/Qwen2.5-0.5B";
    grpo::run::export_run(o);  // newest version: 3
    QCOMPARE(read_json(out + "/adapter_config.json")["base_model_name_or_path"], json("Qwen/Qwen2.5-0.5B"));
    const std::string card = grpo::read_file(out + "/README.md");
    QVERIFY(card.rfind("---\nbase_model: \"Qwen/Qwen2.5-0.5B\"\nlibrary_name: peft\n", 0) == 0);
    QVERIFY(card.find("\ntags:\n- grpo\n") != std::string::npos);
    QVERIFY(card.find("\n---\n\n# ") != std::string::npos);
    QVERIFY(card.find("| steps | 3 |") != std::string::npos);
    QVERIFY(card.find("`accuracy`") != std::string::npos);
    QVERIFY(card.find("arithmetic") != std::string::npos);

    const auto metrics = read_jsonl(run_ + "/metrics.jsonl");
    QCOMPARE(metrics.size(), size_t(3));
    char want[64];
    std::snprintf(want, sizeof want, "| reward, final step | %.4f |", metrics.back()["reward"].get<double>());
    QVERIFY2(card.find(want) != std::string::npos, want);
    std::snprintf(want, sizeof want, "| eval accuracy (greedy), final | %.4f |", metrics.back()["eval/accuracy"].get<double>());
    QVERIFY2(card.find(want) != std::string::npos, want);
    // What the Hub reads besides: the relation to the base, and the final eval accuracy as a
    // model-index result (valid YAML for its parser: the task, the dataset, the metric).
    QVERIFY(card.find("\npipeline_tag: text-generation\nbase_model_relation: adapter\n") != std::string::npos);
    std::snprintf(want, sizeof want, "    metrics:\n    - type: accuracy\n      value: %.4f\n",
                  metrics.back()["eval/accuracy"].get<double>());
    QVERIFY2(card.find("model-index:\n- name: \"Qwen2.5-0.5B-grpo-lora\"\n  results:\n  - task:\n      type: text-generation\n") !=
                 std::string::npos && card.find(want) != std::string::npos, card.substr(0, 900).c_str());
    QVERIFY(card.find("\ndatasets:") == std::string::npos);  // the arithmetic task is not a Hub dataset
    double sum = 0;
    for (const auto& m : metrics) sum += m["reward"].get<double>();
    std::snprintf(want, sizeof want, "| reward, mean of the last 3 steps | %.4f |", sum / 3);
    QVERIFY2(card.find(want) != std::string::npos, want);
    // The exact run config, verbatim.
    const auto begin = card.find("```json\n") + 8;
    QCOMPARE(json::parse(card.substr(begin, card.find("\n```", begin) - begin)), read_json(run_ + "/config.json"));
  }

  void checkpoints_export_and_errors_list_what_exists() {
    const std::string out = tmp_.path().toStdString() + "/ckpt";
    grpo::run::ExportOptions o = options(run_, std::nullopt, 2, out);
    grpo::run::export_run(o);
    auto f = grpo::io::SafetensorsFile::open(out + "/adapter_model.safetensors");
    auto src = grpo::io::SafetensorsFile::open(run_ + "/checkpoints/step-2/adapter_model.safetensors");
    for (const auto& n : f.names()) QVERIFY(torch::equal(tensor_of(f, n), tensor_of(src, n)));
    QVERIFY(grpo::read_file(out + "/README.md").find("| steps | 2 |") != std::string::npos);

    CHECK_ERROR_CONTAINS(error_of([&] { grpo::run::export_run(options(run_, 99, std::nullopt, out + "-x")); }),
                         "version 99", "published versions: 1, 2, 3", "checkpoints: step-2, step-3");
    CHECK_ERROR_CONTAINS(error_of([&] { grpo::run::export_run(options(run_, std::nullopt, 7, out + "-x")); }),
                         "checkpoint step 7", "checkpoints: step-2, step-3");
    CHECK_ERROR_CONTAINS(error_of([&] { grpo::run::export_run(options(run_, 3, std::nullopt, out)); }), out,
                         "not an empty directory");
    CHECK_ERROR_CONTAINS(error_of([&] { grpo::run::export_run(options(tmp_.path().toStdString(), 3, std::nullopt, out + "-y")); }),
                         "no config.json");
    grpo::run::ExportOptions bad = options(run_, 3, std::nullopt, out + "-z");
    bad.dtype = "f8";
    CHECK_ERROR_CONTAINS(error_of([&] { grpo::run::export_run(bad); }), "--dtype", "f32, bf16 or f16");
    QVERIFY(!fs::exists(out + "-x") && !fs::exists(out + "-z"));  // failed exports leave nothing

    // A tampered adapter is refused (SHA256SUMS).
    const std::string v2 = run_ + "/adapters/policy-v2";
    const std::string cfg_text = grpo::read_file(v2 + "/adapter_config.json");
    grpo::write_file_atomic(v2 + "/adapter_config.json", cfg_text + " ");
    CHECK_ERROR_CONTAINS(error_of([&] { grpo::run::export_run(options(run_, 2, std::nullopt, out + "-t")); }),
                         "SHA256SUMS", "adapter_config.json");
    grpo::write_file_atomic(v2 + "/adapter_config.json", cfg_text);
  }

  void vllm_rules_catch_what_vllm_rejects() {
    const std::string out = tmp_.path().toStdString() + "/peft";  // from peft_export_matches_peft_layout
    const std::string bad = tmp_.path().toStdString() + "/vllm-bad";
    fs::create_directories(bad);
    fs::copy_file(out + "/adapter_model.safetensors", bad + "/adapter_model.safetensors");
    json c = read_json(out + "/adapter_config.json");
    c["use_dora"] = true;
    c["bias"] = "all";
    c["modules_to_save"] = {"lm_head"};
    c["r"] = 1024;
    grpo::write_file_atomic(bad + "/adapter_config.json", c.dump(2));
    const auto problems = grpo::run::vllm_adapter_problems(bad);
    QCOMPARE(problems.size(), size_t(4));
    QCOMPARE(grpo::run::vllm_max_lora_rank(4), int64_t(8));
    QCOMPARE(grpo::run::vllm_max_lora_rank(16), int64_t(16));
    QCOMPARE(grpo::run::vllm_max_lora_rank(300), int64_t(320));
    QCOMPARE(grpo::run::vllm_max_lora_rank(513), int64_t(0));
  }

  void cli_export_and_csv() {
    const std::string out = tmp_.path().toStdString() + "/cli";
    auto r = run_cli({"export", "--run", QString::fromStdString(run_), "--version", "3", "--out",
                      QString::fromStdString(out), "--merged", "--max-shard-size", "1MB"});
    QVERIFY2(r.code == 0, r.out.c_str());
    const json res = json::parse(last_json_line(r.out));
    QCOMPARE(res["out_dir"], json(out));
    QVERIFY(grpo::file_exists(out + "/model.safetensors.index.json"));

    r = run_cli({"export", "--run", QString::fromStdString(run_), "--version", "42", "--out", QString::fromStdString(out + "2")});
    QCOMPARE(r.code, 1);
    QVERIFY2(r.out.find("published versions: 1, 2, 3") != std::string::npos, r.out.c_str());

    r = run_cli({"runs", "csv", QString::fromStdString(run_)});
    QVERIFY2(r.code == 0, r.out.c_str());
    std::istringstream in(r.out);
    std::string header;
    std::getline(in, header);
    QVERIFY(header.rfind("step,time,policy_version,", 0) == 0);
    QVERIFY(header.find(",reward,") != std::string::npos);
    int rows = 0;
    for (std::string line; std::getline(in, line);) rows += !line.empty();
    QCOMPARE(rows, 3);

    const std::string csv_path = tmp_.path().toStdString() + "/m.csv";
    r = run_cli({"export", "--run", QString::fromStdString(run_), "--csv", QString::fromStdString(csv_path)});
    QVERIFY2(r.code == 0, r.out.c_str());
    QCOMPARE(grpo::read_file(csv_path).substr(0, header.size()), header);
  }

  void run_writes_tensorboard_events() {
    const auto files = grpo::run::event_files(run_);
    QCOMPARE(files.size(), size_t(1));
    const auto records = grpo::run::read_tfrecords(files[0]);  // every length and CRC checked
    const auto metrics = read_jsonl(run_ + "/metrics.jsonl");
    QCOMPARE(records.size(), metrics.size() + 1);
    QCOMPARE(grpo::run::decode_event(records[0], "0").file_version, std::string("brain.Event:2"));
    for (size_t i = 0; i < metrics.size(); ++i) {
      const auto e = grpo::run::decode_event(records[i + 1], std::to_string(i + 1));
      QCOMPARE(e.step, metrics[i]["step"].get<int64_t>());
      QCOMPARE(e.wall_time, metrics[i]["time"].get<double>());
      std::map<std::string, float> got(e.values.begin(), e.values.end());
      size_t numbers = 0;
      for (const auto& [k, v] : metrics[i].items()) {
        if (k == "step" || k == "time" || !v.is_number()) continue;
        ++numbers;
        QVERIFY2(got.count(k), k.c_str());
        QCOMPARE(got[k], static_cast<float>(v.get<double>()));
      }
      QCOMPARE(got.size(), numbers);
      QVERIFY(got.count("reward") && got.count("loss"));
    }
  }

  void init_adapter_seeds_a_policy() {
    const std::string exported = tmp_.path().toStdString() + "/peft";
    grpo::grpo::TrainConfig cfg;
    cfg.apply({{"model_name_or_path", kModel}, {"task", "arith"}, {"r", 4}, {"lora_alpha", 8},
               {"target_modules", {"q_proj"}}, {"init_adapter", exported}},
              "test");
    cfg.validate("test");
    auto policy = grpo::run::load_policy(cfg);
    grpo::run::seed_from_init_adapter(policy, cfg);
    QCOMPARE(cfg.r, int64_t(16));  // the adapter's settings win
    QCOMPARE(cfg.lora_alpha, 32.0);
    QCOMPARE(cfg.target_modules.size(), size_t(7));
    auto f = grpo::io::SafetensorsFile::open(exported + "/adapter_model.safetensors");
    const auto params = policy.model->named_lora_parameters();
    QCOMPARE(params.size(), f.tensors().size());
    for (const auto& item : params)
      QVERIFY2(torch::equal(item.value().detach().cpu(), tensor_of(f, "base_model.model." + item.key())),
               item.key().c_str());
    QVERIFY(params.begin()->value().requires_grad());

    // Through `grpo train`: the engine starts from the adapter (its r wins over the config's r 4)
    // and trains on from there.
    json run_cfg = grpo::grpo::load_config_file(std::string(GRPO_RESOURCES) + "/presets/demo.yaml");
    run_cfg["model_name_or_path"] = kModel;
    run_cfg["prompts_per_step"] = 4;
    run_cfg["max_steps"] = 1;
    run_cfg["eval_steps"] = 0;
    run_cfg["r"] = 4;
    run_cfg["lr_scheduler_type"] = "constant";  // no warmup: the one step has the full learning rate
    run_cfg["warmup_ratio"] = 0.0;
    run_cfg["init_adapter"] = exported;
    const std::string cfg_path = tmp_.path().toStdString() + "/seeded.json";
    const std::string seeded = tmp_.path().toStdString() + "/seeded";
    grpo::write_file_atomic(cfg_path, run_cfg.dump(2));
    const auto r = run_cli({"train", QString::fromStdString(cfg_path), "--output", QString::fromStdString(seeded)});
    QVERIFY2(r.code == 0, r.out.c_str());
    const json resolved = read_json(seeded + "/config.json");
    QCOMPARE(resolved["r"], json(16));
    QCOMPARE(resolved["init_adapter"], json(exported));
    auto trained = grpo::io::SafetensorsFile::open(seeded + "/adapters/policy-v1/adapter_model.safetensors");
    const std::string b0 = "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight";
    const auto start = tensor_of(f, b0), after = tensor_of(trained, b0);
    const double moved = (after - start).abs().max().item<double>();
    // A fresh adapter's B is zero; this one starts at the exported B, and one AdamW step of lr 1.5e-3
    // moves each weight by at most about the learning rate (not at all when every group's rewards
    // tie, which a policy trained at lr 0.01 can make likely).
    QVERIFY2(moved < 0.01, qPrintable(QString::number(moved)));
    QVERIFY(after.abs().max().item<double>() > 0.01);

    cfg.init_adapter = tmp_.path().toStdString() + "/nope";
    CHECK_ERROR_CONTAINS(error_of([&] { grpo::run::seed_from_init_adapter(policy, cfg); }), "init_adapter", "nope",
                         "not a directory");
  }
};

QTEST_GUILESS_MAIN(TestExport)
#include "test_export.moc"
