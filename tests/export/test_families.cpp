// docs/train-your-own-model.md end to end on a tiny model of each architecture beyond Llama/Qwen:
// a Hugging Face folder (config.json as a user's Hub download has it, model.safetensors, the demo's
// tokenizer), then with the `grpo` CLI as a user runs it: inspect model, train (2 steps of the demo
// prompts, rewarded on length), export as a PEFT adapter and merged. Checks: the adapter moved the logits, the merged
// model's logits equal base + adapter, and the adapter lists the family's own PEFT module names
// (Phi-3's fused qkv_proj / gate_up_proj). The logits themselves are checked against transformers
// in tests/model/test_model.cpp (golden references); this test is about the whole path.
#include "tests/common/test_paths.h"
#include <QtTest>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/common/files.h"
#include "core/grpo/config.h"
#include "core/io/hf_config.h"
#include "core/model/causal_lm.h"
#include "core/model/weights.h"
#include "tests/common/cli_logits.h"
#include "tests/common/run_cli.h"

using json = nlohmann::json;

namespace {

const std::string kDemo = std::string(GRPO_RESOURCES) + "/models/tiny-arith";
const std::string kIds = "532,12,5,9,7,3,20,1";

using grpo::testing::max_abs_diff;

std::vector<float> cli_logits(const std::string& model, const std::string& adapter = {}) {
  return grpo::testing::cli_logits(model, kIds, adapter);
}

// config.json of a tiny model of `family`, with the keys its transformers config class writes for
// the features under test, sized for the demo tokenizer (vocab 544).
json family_json(const std::string& family) {
  const json demo = json::parse(grpo::read_file(kDemo + "/config.json"));
  json j = {{"model_type", family}, {"vocab_size", demo["vocab_size"]}, {"hidden_size", 64},
            {"intermediate_size", 128}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
            {"num_key_value_heads", 2}, {"max_position_embeddings", 512}, {"torch_dtype", "float32"},
            {"bos_token_id", demo["bos_token_id"]}, {"eos_token_id", demo["eos_token_id"]},
            {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0}, {"transformers_version", "4.51.3"}};
  if (family == "mistral") {
    j["architectures"] = {"MistralForCausalLM"};
    j["sliding_window"] = 8;
    j["head_dim"] = 16;
    j["tie_word_embeddings"] = false;
  } else if (family == "gemma") {
    j["architectures"] = {"GemmaForCausalLM"};
    j["head_dim"] = 32;
    j["hidden_act"] = "gelu_pytorch_tanh";
    j["hidden_activation"] = "gelu_pytorch_tanh";
    j["tie_word_embeddings"] = true;
  } else if (family == "gemma2") {
    j["architectures"] = {"Gemma2ForCausalLM"};
    j["head_dim"] = 32;
    j["hidden_activation"] = "gelu_pytorch_tanh";
    j["sliding_window"] = 8;
    j["query_pre_attn_scalar"] = 32;
    j["attn_logit_softcapping"] = 50.0;
    j["final_logit_softcapping"] = 30.0;
    j["tie_word_embeddings"] = true;
  } else if (family == "gemma3_text") {
    j["architectures"] = {"Gemma3ForCausalLM"};
    j["num_hidden_layers"] = 4;
    j["head_dim"] = 32;
    j["hidden_activation"] = "gelu_pytorch_tanh";
    j["sliding_window"] = 8;
    j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention"};
    j["query_pre_attn_scalar"] = 32;
    j["rope_theta"] = 1e6;
    j["rope_local_base_freq"] = 1e4;
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
    j["tie_word_embeddings"] = true;
  } else if (family == "phi3") {
    j["architectures"] = {"Phi3ForCausalLM"};
    j["original_max_position_embeddings"] = 64;
    std::vector<double> short_f(8), long_f(8);
    for (int i = 0; i < 8; ++i) short_f[size_t(i)] = 1.0 + 0.1 * i, long_f[size_t(i)] = 1.5 + 0.3 * i;
    j["rope_scaling"] = {{"type", "longrope"}, {"short_factor", short_f}, {"long_factor", long_f}};
    j["tie_word_embeddings"] = false;
  }
  return j;
}

}  // namespace

class TestFamilies : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;

private Q_SLOTS:
  void walkthroughRunsEndToEnd_data() {
    QTest::addColumn<QString>("family");
    for (const char* f : {"mistral", "gemma", "gemma2", "gemma3_text", "phi3"}) QTest::newRow(f) << QString(f);
  }
  void walkthroughRunsEndToEnd() {
    QFETCH(QString, family);
    const std::string fam = family.toStdString();
    const std::string root = tmp_.path().toStdString() + "/" + fam;
    const std::string model_dir = root + "/model";

    // 1. The model: a Hugging Face folder, random weights (norms off their neutral value).
    torch::manual_seed(11);
    const auto cfg = grpo::io::ModelConfig::from_json(family_json(fam), model_dir + "/config.json");
    grpo::model::CausalLM m{grpo::model::CausalLMOptions(cfg)};
    m->init_weights(0.08);
    {
      torch::NoGradGuard g;
      for (auto& item : m->named_base_parameters())
        if (item.key().find("norm") != std::string::npos) item.value().add_(torch::randn_like(item.value()) * 0.1);
    }
    grpo::model::save_pretrained(*m, model_dir);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
      grpo::write_file_atomic(model_dir + "/" + f, grpo::read_file(kDemo + "/" + f));
    QCOMPARE(json::parse(grpo::read_file(model_dir + "/config.json"))["model_type"], json(fam));

    auto r = run_cli({"inspect", "model", QString::fromStdString(model_dir)});
    QVERIFY2(r.code == 0, r.out.c_str());
    QVERIFY2(r.out.find(family_json(fam)["architectures"][0].get<std::string>()) != std::string::npos, r.out.c_str());

    // 2-3. Data, rewards, config: the demo task, two steps, a version each step.
    json train = grpo::grpo::load_config_file(std::string(GRPO_RESOURCES) + "/presets/demo.yaml");
    train["model_name_or_path"] = model_dir;
    train["prompts_per_step"] = 4;
    train["num_generations"] = 4;
    train["max_steps"] = 2;
    train["weight_sync_steps"] = 1;
    train["save_steps"] = 2;
    train["eval_steps"] = 0;
    train["eval_size"] = 0;
    train["warmup_ratio"] = 0.0;
    train["learning_rate"] = 0.02;
    // A random model never answers the sums: a reward on the completion's length in characters
    // varies within each group, so the advantages and the LoRA update are not zero.
    train["reward_funcs"] = json::array({{{"name", "length"}, {"target", 3}, {"penalty", 0.1}, {"unit", "chars"}}});
    const std::string cfg_path = root + "/train.json", run = root + "/run";
    grpo::write_file_atomic(cfg_path, train.dump(2));
    r = run_cli({"train", QString::fromStdString(cfg_path), "--output", QString::fromStdString(run)});
    QVERIFY2(r.code == 0, r.out.c_str());

    // 4. Export: a PEFT adapter and the merged model.
    const std::string peft = root + "/adapter", merged = root + "/merged";
    r = run_cli({"export", "--run", QString::fromStdString(run), "--out", QString::fromStdString(peft)});
    QVERIFY2(r.code == 0, r.out.c_str());
    r = run_cli({"export", "--run", QString::fromStdString(run), "--out", QString::fromStdString(merged), "--merged"});
    QVERIFY2(r.code == 0, r.out.c_str());

    const json adapter_cfg = json::parse(grpo::read_file(peft + "/adapter_config.json"));
    const auto targets = adapter_cfg["target_modules"].get<std::vector<std::string>>();
    if (fam == "phi3") {
      QCOMPARE(targets, (std::vector<std::string>{"down_proj", "gate_up_proj", "o_proj", "qkv_proj"}));
    } else {
      QCOMPARE(targets, (std::vector<std::string>{"down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"}));
    }
    // The merged config is the model's own config.json, every family key kept.
    json merged_cfg = json::parse(grpo::read_file(merged + "/config.json"));
    QCOMPARE(merged_cfg, json::parse(grpo::read_file(model_dir + "/config.json")));

    const auto base = cli_logits(model_dir), with_adapter = cli_logits(model_dir, peft), merged_logits = cli_logits(merged);
    const double moved = max_abs_diff(base, with_adapter), d = max_abs_diff(merged_logits, with_adapter);
    qInfo("%s: adapter moved the last logits by %g; merged vs base + adapter %g", fam.c_str(), moved, d);
    QVERIFY2(moved > 1e-3, qPrintable(QString::number(moved)));
    QVERIFY2(d < 1e-4, qPrintable(QString::number(d)));
  }
};

QTEST_GUILESS_MAIN(TestFamilies)
#include "test_families.moc"
