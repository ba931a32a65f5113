// Tests for core/io hf_config: the golden config.json files parse to the right values and write back
// as save_pretrained wrote them; Qwen3 and Llama-3 rope configs; errors for missing fields, wrong
// types and unsupported models; checkpoint directories, single-file and sharded.
#include "tests/common/test_paths.h"
#include <QtTest>

#include <functional>

#include "tests/common/error_of.h"
#include "core/common/error.h"
#include "core/common/files.h"
#include "core/io/hf_config.h"

using namespace grpo::io;
using nlohmann::json;

namespace {

const std::string kModels = std::string(GRPO_TEST_DATA) + "/golden/models/";

json golden_config(const char* model) { return json::parse(grpo::read_file(kModels + model + "/config.json")); }

using grpo::testing::error_of;

bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

// A small Qwen3 config as transformers >= 4.56 writes it ("dtype", eos list).
json qwen3_config() {
  return json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "attention_bias": false,
    "bos_token_id": 151643, "eos_token_id": [151645, 151643], "head_dim": 32, "hidden_act": "silu",
    "hidden_size": 64, "intermediate_size": 128, "max_position_embeddings": 40960,
    "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "tie_word_embeddings": true,
    "dtype": "bfloat16", "use_sliding_window": false, "sliding_window": null, "vocab_size": 300})");
}

// A Llama 3.1-style config with llama3 rope scaling and no torch_dtype.
json llama3_config() {
  return json::parse(R"({
    "model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 1, "vocab_size": 300, "rope_theta": 500000.0,
    "max_position_embeddings": 131072, "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009],
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"}})");
}

void write_json(const std::string& path, const json& j) { grpo::write_file_atomic(path, j.dump(2)); }

}  // namespace

#define CHECK_ERROR CHECK_ERROR_CONTAINS

class TestHfConfig : public QObject {
  Q_OBJECT
private Q_SLOTS:
  // ---- golden configs ----
  void goldenLlamaConfig() {
    auto c = ModelConfig::load(kModels + "llama-untied-f32/config.json");
    QCOMPARE(c.model_type, std::string("llama"));
    QCOMPARE(c.name_or_path, std::string("ceo-tiny/llama-untied-f32"));
    QCOMPARE(c.vocab_size, int64_t(300));
    QCOMPARE(c.hidden_size, int64_t(64));
    QCOMPARE(c.intermediate_size, int64_t(128));
    QCOMPARE(c.num_hidden_layers, int64_t(2));
    QCOMPARE(c.num_attention_heads, int64_t(4));
    QCOMPARE(c.num_key_value_heads, int64_t(2));
    QCOMPARE(c.head_dim, int64_t(16));
    QCOMPARE(c.q_dim(), int64_t(64));
    QCOMPARE(c.kv_dim(), int64_t(32));
    QCOMPARE(c.max_position_embeddings, int64_t(256));
    QCOMPARE(c.rms_norm_eps, 1e-5);
    QCOMPARE(c.rope_theta, 10000.0);
    QVERIFY(!c.rope_scaling);
    QVERIFY(!c.tie_word_embeddings && !c.attention_bias && !c.mlp_bias && !c.qk_norm);
    QCOMPARE(c.bos_token_id, std::optional<int64_t>(1));
    QCOMPARE(c.eos_token_ids, std::vector<int64_t>{2});
    QCOMPARE(c.torch_dtype, std::string("float32"));
  }

  void goldenQwen2Config() {
    auto c = ModelConfig::load(kModels + "qwen2-tied-bf16/config.json");
    QCOMPARE(c.model_type, std::string("qwen2"));
    QCOMPARE(c.head_dim, int64_t(16));  // hidden_size / num_attention_heads
    QCOMPARE(c.max_position_embeddings, int64_t(512));
    QCOMPARE(c.rms_norm_eps, 1e-6);
    QCOMPARE(c.rope_theta, 1e6);
    QVERIFY(c.tie_word_embeddings);
    QVERIFY(c.attention_bias);  // Qwen2: q/k/v bias always
    QVERIFY(!c.mlp_bias && !c.qk_norm);
    QCOMPARE(c.torch_dtype, std::string("bfloat16"));
  }

  void toJsonMatchesSavePretrained() {
    for (const char* model : {"llama-untied-f32", "qwen2-tied-bf16"}) {
      json golden = golden_config(model);
      auto parsed = ModelConfig::from_json(golden, model);
      QCOMPARE(parsed.to_json(), golden);  // a parsed config writes its own file back
      parsed.source = json();               // built in code: generated as save_pretrained would
      json ours = parsed.to_json();
      golden.erase("transformers_version");
      ours.erase("transformers_version");
      QVERIFY2(ours == golden, (std::string(model) + "\nours:   " + ours.dump() + "\ngolden: " + golden.dump()).c_str());
    }
  }

  void roundTripsThroughJsonAndFile() {
    QTemporaryDir dir;
    const std::string path = grpo::path_join(dir.path().toStdString(), "config.json");
    for (const json& j : {golden_config("llama-untied-f32"), golden_config("qwen2-tied-bf16"), qwen3_config(),
                          llama3_config()}) {
      auto c = ModelConfig::from_json(j, "config.json");
      auto again = ModelConfig::from_json(c.to_json(), "again");
      QCOMPARE(again.to_json(), c.to_json());
      QCOMPARE(again.head_dim, c.head_dim);
      QCOMPARE(again.attention_bias, c.attention_bias);
      QCOMPARE(again.qk_norm, c.qk_norm);
      QCOMPARE(again.eos_token_ids, c.eos_token_ids);
      QCOMPARE(again.rope_scaling.has_value(), c.rope_scaling.has_value());
      c.save(path);
      QCOMPARE(ModelConfig::load(path).to_json(), c.to_json());
      QVERIFY(grpo::read_file(path).back() == '\n');
    }
  }

  // ---- other models ----
  void qwen3Config() {
    auto c = ModelConfig::from_json(qwen3_config(), "config.json");
    QVERIFY(c.qk_norm);
    QVERIFY(!c.attention_bias);
    QCOMPARE(c.head_dim, int64_t(32));  // explicit, differs from hidden / heads
    QCOMPARE(c.q_dim(), int64_t(128));
    QCOMPARE(c.torch_dtype, std::string("bfloat16"));  // read from "dtype"
    QCOMPARE(c.eos_token_ids, (std::vector<int64_t>{151645, 151643}));
    QCOMPARE(c.rope_theta, 1e6);  // an integer in JSON is fine for a float field
    QCOMPARE(c.to_json()["architectures"][0], json("Qwen3ForCausalLM"));
    json j = qwen3_config();
    j.erase("head_dim");
    QCOMPARE(ModelConfig::from_json(j, "c").head_dim, int64_t(128));  // Qwen3Config's default
    j["attention_bias"] = true;
    QVERIFY(ModelConfig::from_json(j, "c").attention_bias);
  }

  void llama3RopeScaling() {
    auto c = ModelConfig::from_json(llama3_config(), "config.json");
    QVERIFY(c.rope_scaling.has_value());
    QCOMPARE(c.rope_scaling->rope_type, std::string("llama3"));
    QCOMPARE(c.rope_scaling->factor, 8.0);
    QCOMPARE(c.rope_scaling->low_freq_factor, 1.0);
    QCOMPARE(c.rope_scaling->high_freq_factor, 4.0);
    QCOMPARE(c.rope_scaling->original_max_position_embeddings, int64_t(8192));
    QCOMPARE(c.torch_dtype, std::string("float32"));  // missing -> float32
    QCOMPARE(c.eos_token_ids.size(), size_t(3));
    json j = llama3_config();  // older files say "type"
    j["rope_scaling"].erase("rope_type");
    j["rope_scaling"]["type"] = "llama3";
    QCOMPARE(ModelConfig::from_json(j, "c").rope_scaling->factor, 8.0);
    j["rope_scaling"] = {{"rope_type", "default"}};
    QVERIFY(!ModelConfig::from_json(j, "c").rope_scaling);
    j = llama3_config();  // transformers v5 folds rope_theta into rope_parameters
    j.erase("rope_theta");
    j["rope_parameters"] = j["rope_scaling"];
    j["rope_parameters"]["rope_theta"] = 500000.0;
    j.erase("rope_scaling");
    auto v5 = ModelConfig::from_json(j, "c");
    QCOMPARE(v5.rope_theta, 500000.0);
    QCOMPARE(v5.rope_scaling->original_max_position_embeddings, int64_t(8192));
  }

  // Each family's defaults and derived flags, as its transformers config class sets them.
  void newFamiliesParse() {
    json base = golden_config("llama-untied-f32");
    base.erase("head_dim");
    json j = base;
    j["model_type"] = "mistral";
    j["sliding_window"] = 4096;
    auto mistral = ModelConfig::from_json(j, "c");
    QCOMPARE(*mistral.sliding_window, int64_t(4096));
    QCOMPARE(mistral.sliding_layers, std::vector<bool>(2, true));
    j["sliding_window"] = nullptr;  // Mistral 7B v0.2+: full attention
    QVERIFY(!ModelConfig::from_json(j, "c").sliding_window);

    j = base;
    j["model_type"] = "gemma2";
    j.erase("tie_word_embeddings");
    j.erase("hidden_act");
    j["num_hidden_layers"] = 4;
    auto g2 = ModelConfig::from_json(j, "c");
    QVERIFY(g2.tie_word_embeddings && g2.gemma_norm && g2.scale_embeddings && g2.sandwich_norm && !g2.qk_norm);
    QCOMPARE(g2.head_dim, int64_t(256));  // Gemma2Config's default, not hidden / heads
    QCOMPARE(g2.hidden_act, std::string("gelu_pytorch_tanh"));
    QCOMPARE(*g2.query_pre_attn_scalar, 256.0);
    QCOMPARE(*g2.attn_logit_softcapping, 50.0);
    QCOMPARE(*g2.final_logit_softcapping, 30.0);
    QCOMPARE(*g2.sliding_window, int64_t(4096));
    QCOMPARE(g2.sliding_layers, (std::vector<bool>{true, false, true, false}));  // even layers slide
    j["attn_logit_softcapping"] = nullptr;
    QVERIFY(!ModelConfig::from_json(j, "c").attn_logit_softcapping);
    j["layer_types"] = {"full_attention", "sliding_attention", "full_attention", "full_attention"};
    QCOMPARE(ModelConfig::from_json(j, "c").sliding_layers, (std::vector<bool>{false, true, false, false}));
    j["layer_types"] = {"full_attention"};
    CHECK_ERROR(error_of([&] { ModelConfig::from_json(j, "config.json"); }), "config.json", "layer_types",
                "a list of 4 layer types");
    j["layer_types"] = {"full_attention", "chunked_attention", "full_attention", "full_attention"};
    CHECK_ERROR(error_of([&] { ModelConfig::from_json(j, "config.json"); }), "unsupported layer type \"chunked_attention\"");

    j = base;
    j["model_type"] = "gemma3_text";
    j["num_hidden_layers"] = 6;
    auto g3 = ModelConfig::from_json(j, "c");
    QVERIFY(g3.qk_norm && g3.sandwich_norm && !g3.attn_logit_softcapping && !g3.final_logit_softcapping);
    QCOMPARE(*g3.rope_local_base_freq, 10000.0);
    QCOMPARE(g3.sliding_layers, (std::vector<bool>{true, true, true, true, true, false}));  // pattern 6
    j["sliding_window_pattern"] = 2;
    QCOMPARE(ModelConfig::from_json(j, "c").sliding_layers, (std::vector<bool>{true, false, true, false, true, false}));

    j = base;
    j["model_type"] = "phi3";
    j["original_max_position_embeddings"] = 4096;
    j["max_position_embeddings"] = 131072;
    std::vector<double> half(8, 1.0);
    j["rope_scaling"] = {{"type", "longrope"}, {"short_factor", half}, {"long_factor", half}};
    auto phi = ModelConfig::from_json(j, "c");
    QVERIFY(phi.fused_qkv && phi.fused_gate_up && !phi.tie_word_embeddings);
    QCOMPARE(phi.rope_scaling->rope_type, std::string("longrope"));
    QCOMPARE(phi.rope_scaling->original_max_position_embeddings, int64_t(4096));  // read outside rope_scaling
    j["rope_scaling"]["long_factor"] = std::vector<double>(7, 1.0);
    CHECK_ERROR(error_of([&] { ModelConfig::from_json(j, "config.json"); }), "config.json: rope_scaling",
                "head_dim / 2 = 8 entries, got 8 and 7");
    j["rope_scaling"]["long_factor"] = {1.0, 1.0, "x"};
    CHECK_ERROR(error_of([&] { ModelConfig::from_json(j, "config.json"); }), "long_factor", "a list of positive numbers");
    j["rope_scaling"] = nullptr;
    j["partial_rotary_factor"] = 0.75;  // Phi-4-mini: rope on 12 of 16 dims
    QCOMPARE(ModelConfig::from_json(j, "c").rotary_dim(), int64_t(12));
    j["partial_rotary_factor"] = 1.5;
    CHECK_ERROR(error_of([&] { ModelConfig::from_json(j, "config.json"); }), "partial_rotary_factor", "(0, 1]");

    // Sizes from outside are bounded before anything is allocated from them.
    j = base;
    j["model_type"] = "mistral";
    j["num_hidden_layers"] = int64_t(1) << 40;
    CHECK_ERROR(error_of([&] { ModelConfig::from_json(j, "config.json"); }), "num_hidden_layers", "more than the 100000");
    j = base;
    j["rope_theta"] = 0.0;
    CHECK_ERROR(error_of([&] { ModelConfig::from_json(j, "config.json"); }), "rope_theta", "finite number above 1");

    j = base;
    j["model_type"] = "gemma";
    j["hidden_activation"] = "relu";
    CHECK_ERROR(error_of([&] { ModelConfig::from_json(j, "config.json"); }), "hidden_activation",
                "supported: silu, gelu, gelu_pytorch_tanh");
  }

  // ---- errors ----
  void unsupportedRopeTypeListsSupported() {
    json j = llama3_config();
    j["rope_scaling"] = {{"rope_type", "mrope"}, {"factor", 4.0}};
    CHECK_ERROR(error_of([&] { ModelConfig::from_json(j, "config.json"); }), "config.json: rope_scaling",
                "unsupported rope type \"mrope\"", "default, linear, dynamic, yarn, longrope (su), llama3");
    j["rope_scaling"] = {{"rope_type", "linear"}};
    CHECK_ERROR(error_of([&] { ModelConfig::from_json(j, "config.json"); }), "missing required field \"factor\"");
    j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 0.5}};
    CHECK_ERROR(error_of([&] { ModelConfig::from_json(j, "config.json"); }), "yarn: field \"factor\" must be a number >= 1");
    j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
    CHECK_ERROR(error_of([&] { ModelConfig::from_json(j, "config.json"); }), "missing required field \"low_freq_factor\"");
  }

  void unsupportedModelTypeListsSupported() {
    json j = golden_config("llama-untied-f32");
    j["model_type"] = "mixtral";
    CHECK_ERROR(error_of([&] { ModelConfig::from_json(j, "config.json"); }),
                "config.json: unsupported model_type \"mixtral\"",
                "supported: llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3_text, phi3");
    j["model_type"] = "gemma3";  // the multimodal checkpoint: point at the text-only one
    CHECK_ERROR(error_of([&] { ModelConfig::from_json(j, "config.json"); }), "Gemma3ForConditionalGeneration",
                "model_type \"gemma3_text\"");
    j["model_type"] = "qwen";
    CHECK_ERROR(error_of([&] { ModelConfig::from_json(j, "config.json"); }), "did you mean qwen2");
  }

  void missingFieldNamesFieldAndFile() {
    QTemporaryDir dir;
    const std::string path = grpo::path_join(dir.path().toStdString(), "config.json");
    for (const char* field : {"model_type", "hidden_size", "vocab_size", "num_attention_heads"}) {
      json j = golden_config("qwen2-tied-bf16");
      j.erase(field);
      write_json(path, j);
      CHECK_ERROR(error_of([&] { ModelConfig::load(path); }), path + ": missing required field \"" + field + "\"");
    }
  }

  void wrongTypeNamesFieldAndExpectedType() {
    json j = golden_config("llama-untied-f32");
    j["hidden_size"] = "64";
    CHECK_ERROR(error_of([&] { ModelConfig::from_json(j, "config.json"); }),
                "config.json: field \"hidden_size\": expected an integer, got string \"64\"");
    j = golden_config("llama-untied-f32");
    j["tie_word_embeddings"] = 1;
    CHECK_ERROR(error_of([&] { ModelConfig::from_json(j, "config.json"); }),
                "field \"tie_word_embeddings\": expected true or false");
    j = golden_config("llama-untied-f32");
    j["eos_token_id"] = {2, "x"};
    CHECK_ERROR(error_of([&] { ModelConfig::from_json(j, "config.json"); }),
                "field \"eos_token_id\": expected an integer or a list of integers");
    j = golden_config("llama-untied-f32");
    j["rope_theta"] = "1e4";
    CHECK_ERROR(error_of([&] { ModelConfig::from_json(j, "config.json"); }), "field \"rope_theta\": expected a number");
    j = golden_config("llama-untied-f32");
    j["num_key_value_heads"] = 3;
    CHECK_ERROR(error_of([&] { ModelConfig::from_json(j, "config.json"); }), "not a multiple of num_key_value_heads 3");
    j = golden_config("llama-untied-f32");
    j["torch_dtype"] = "int8";
    CHECK_ERROR(error_of([&] { ModelConfig::from_json(j, "config.json"); }), "\"torch_dtype\": unsupported value \"int8\"");
    CHECK_ERROR(error_of([&] { ModelConfig::load(kModels + "no-such-model/config.json"); }), "cannot open");
  }

  // ---- checkpoint directories ----
  void goldenCheckpointsOpen() {
    auto q = Checkpoint::open(kModels + "qwen2-tied-bf16");
    QCOMPARE(q.config().model_type, std::string("qwen2"));
    QCOMPARE(q.tensor_names().size(), size_t(26));
    QVERIFY(!q.find("lm_head.weight"));
    auto e = q.at("model.embed_tokens.weight");
    QCOMPARE(e.info->dtype, DType::BF16);
    QCOMPARE(e.file->path(), kModels + "qwen2-tied-bf16/model.safetensors");
    auto l = Checkpoint::open(kModels + "llama-untied-f32");
    QCOMPARE(l.at("lm_head.weight").info->shape, (std::vector<int64_t>{300, 64}));
    CHECK_ERROR(error_of([&] { l.at("lm_head.weigh"); }), "tensor \"lm_head.weigh\": not in this checkpoint",
                "did you mean \"lm_head.weight\"");
  }

  void shardedCheckpointFindsTensorsInBothShards() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString();
    write_json(grpo::path_join(dir, "config.json"), golden_config("llama-untied-f32"));
    float a[4] = {1, 2, 3, 4}, b[2] = {5, 6};
    write_safetensors(grpo::path_join(dir, "model-00001-of-00002.safetensors"),
                      {{"model.embed_tokens.weight", DType::F32, {2, 2}, a, sizeof a}}, {{"format", "pt"}});
    write_safetensors(grpo::path_join(dir, "model-00002-of-00002.safetensors"),
                      {{"lm_head.weight", DType::F32, {2}, b, sizeof b}, {"unlisted", DType::F32, {2}, b, sizeof b}},
                      {{"format", "pt"}});
    json index = {{"metadata", {{"total_size", 24}}},
                  {"weight_map", {{"model.embed_tokens.weight", "model-00001-of-00002.safetensors"},
                                  {"lm_head.weight", "model-00002-of-00002.safetensors"}}}};
    const std::string index_path = grpo::path_join(dir, "model.safetensors.index.json");
    write_json(index_path, index);

    auto c = Checkpoint::open(dir);
    QCOMPARE(c.tensor_names(), (std::vector<std::string>{"lm_head.weight", "model.embed_tokens.weight"}));
    auto e1 = c.at("model.embed_tokens.weight"), e2 = c.at("lm_head.weight");
    QVERIFY(e1.file != e2.file);
    QVERIFY(contains(e1.file->path(), "model-00001-of-00002"));
    QCOMPARE(reinterpret_cast<const float*>(e1.file->data(*e1.info))[3], 4.0f);
    QCOMPARE(reinterpret_cast<const float*>(e2.file->data(*e2.info))[1], 6.0f);
    QVERIFY(!c.find("unlisted"));  // the index decides what the checkpoint holds

    index["weight_map"]["model.norm.weight"] = "model-00001-of-00002.safetensors";
    write_json(index_path, index);
    CHECK_ERROR(error_of([&] { Checkpoint::open(dir); }), "model.safetensors.index.json",
                "tensor \"model.norm.weight\" is listed in shard \"model-00001-of-00002.safetensors\"",
                "model-00001-of-00002.safetensors lacks it");

    index["weight_map"].erase("model.norm.weight");
    index["weight_map"]["model.norm.weight"] = "model-00003-of-00003.safetensors";
    write_json(index_path, index);
    CHECK_ERROR(error_of([&] { Checkpoint::open(dir); }), "model.safetensors.index.json",
                "shard \"model-00003-of-00003.safetensors\" (holding tensor \"model.norm.weight\") is missing");
  }

  void directoryWithoutWeightsOrConfig() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString();
    CHECK_ERROR(error_of([&] { Checkpoint::open(dir); }), dir, "no config.json");
    write_json(grpo::path_join(dir, "config.json"), golden_config("llama-untied-f32"));
    CHECK_ERROR(error_of([&] { Checkpoint::open(dir); }), dir, "no model.safetensors or model.safetensors.index.json");
    CHECK_ERROR(error_of([&] { Checkpoint::open(dir + "/nope"); }), "not a directory");
  }
};

QTEST_GUILESS_MAIN(TestHfConfig)
#include "test_hf_config.moc"
