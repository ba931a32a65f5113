// `grpo sft` and `grpo init-model` on tiny random models: full SFT memorises a handful of
// prompt/completion pairs (plain, chat messages + completion, whole conversations) so that the
// loss falls by a large factor and greedy completions match; LoRA SFT moves only the adapter;
// init-model is seeded and checks the vocabulary; config and data errors name the key or row.
#include "tests/common/test_paths.h"
#include <QtTest>

#include <filesystem>
#include <fstream>

#include <torch/torch.h>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/model/peft_io.h"
#include "core/model/weights.h"
#include "core/rollout/sampler.h"
#include "core/run/policy.h"
#include "core/run/sft.h"

namespace fs = std::filesystem;
using grpo::run::SftConfig;

namespace {

const std::string kTokenizerDir = std::string(GRPO_RESOURCES) + "/models/tiny-arith";

std::string write_text(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

// A tiny random Qwen2 checkpoint with the demo tokenizer. LoRA needs a larger init than HF's
// 0.02: with a tied head of std 0.02 the logits of any hidden state stay within about +-1.
std::string make_tiny_model(const std::string& dir, uint64_t seed = 7, double init_range = 0.02) {
  const std::string cfg = write_text(dir + "/tiny_config.json", R"({"initializer_range": )" + std::to_string(init_range) + R"(,
    "model_type": "qwen2", "vocab_size": 544, "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
    "tie_word_embeddings": true, "bos_token_id": 532, "eos_token_id": 534})");
  grpo::run::init_model(cfg, kTokenizerDir, dir + "/init", seed);
  return dir + "/init";
}

const char* kPairs = R"({"prompt": "What is the colour of the sky?", "completion": "blue"}
{"prompt": "What is 12 + 30?", "completion": "42"}
{"messages": [{"role": "user", "content": "Name a number."}], "completion": "seven"}
{"messages": [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Is it?"}, {"role": "assistant", "content": "yes it is"}]}
{"prompt": [{"role": "user", "content": "Say the answer."}], "completion": [{"role": "assistant", "content": "the answer"}]}
{"prompt": "Compute 7 * 8.", "completion": "56"}
)";
const std::vector<std::string> kCompletions = {"blue", "42", "seven", "yes it is", "the answer", "56"};

SftConfig memorise_config(const std::string& model, const std::string& data, const std::string& out) {
  SftConfig c;
  c.model_name_or_path = model;
  c.train_file = data;
  c.output_dir = out;
  c.max_steps = 60;
  c.per_device_train_batch_size = 6;
  c.token_budget = 64;  // several packed rows per step: gradient accumulation
  c.lr_scheduler_type = "constant";
  c.logging_steps = 1000;
  return c;
}

// Greedy completions of the pairs' prompts under `p`.
std::vector<std::string> greedy(grpo::run::Policy& p, const std::string& data) {
  torch::NoGradGuard ng;
  p.model->eval();
  std::vector<std::vector<int64_t>> prompts;
  for (const auto& ex : grpo::rollout::load_dataset(data)) {
    auto e = ex;
    if (e.messages && e.messages->back().value("role", "") == "assistant") e.messages->erase(e.messages->size() - 1);
    prompts.push_back(p.encode_prompt(e, 0));
  }
  grpo::rollout::Sampler sampler(p.model, p.tokenizer.get());
  grpo::rollout::SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = 12;
  sp.stop_token_ids = p.stop_token_ids;
  std::vector<std::string> out;
  for (const auto& group : sampler.generate(prompts, 1, sp)) out.push_back(p.decode(group[0].token_ids));
  return out;
}

}  // namespace

class TestSft : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void fullSftMemorisesPairs();
  void loraSftLeavesBaseUnchanged();
  void initModelIsSeededAndChecksVocab();
  void configErrorsNameTheKey();
  void dataErrorsNameTheRow();
};

void TestSft::fullSftMemorisesPairs() {
  QTemporaryDir tmp;
  const std::string dir = tmp.path().toStdString();
  const std::string model = make_tiny_model(dir);
  const std::string data = write_text(dir + "/pairs.jsonl", kPairs);
  SftConfig c = memorise_config(model, data, dir + "/out");
  c.use_lora = false;
  c.learning_rate = 3e-3;
  int logs = 0;
  auto res = grpo::run::run_sft(c, [&](const grpo::run::SftLog&) { ++logs; });
  QCOMPARE(res.format, std::string("checkpoint"));
  QCOMPARE(res.steps, int64_t(60));
  QCOMPARE(res.train_examples, int64_t(6));
  QVERIFY(logs >= 1);
  qInfo("full SFT loss %.4f -> %.4f", res.losses.front(), res.losses.back());
  QVERIFY(res.losses.back() < res.losses.front() / 50);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    QVERIFY2(grpo::file_exists(dir + "/out/" + f), f);

  grpo::grpo::TrainConfig tc;
  tc.model_name_or_path = dir + "/out";
  auto p = grpo::run::load_policy(tc, /*with_lora=*/false);
  QVERIFY(p.chat());
  auto got = greedy(p, data);
  for (size_t i = 0; i < kCompletions.size(); ++i) QCOMPARE(got[i], kCompletions[i]);
}

void TestSft::loraSftLeavesBaseUnchanged() {
  QTemporaryDir tmp;
  const std::string dir = tmp.path().toStdString();
  const std::string model = make_tiny_model(dir, 7, 0.2);
  const std::string data = write_text(dir + "/pairs.jsonl", kPairs);
  SftConfig c = memorise_config(model, data, dir + "/adapter");
  c.learning_rate = 1e-2;
  c.r = 16;
  c.lora_alpha = 32;
  c.max_steps = 100;

  grpo::grpo::TrainConfig tc;
  tc.model_name_or_path = model;
  tc.r = c.r;
  tc.lora_alpha = c.lora_alpha;
  auto p = grpo::run::load_policy(tc, /*with_lora=*/true);
  std::vector<torch::Tensor> before;
  for (const auto& item : p.model->named_base_parameters()) before.push_back(item.value().clone());
  std::vector<torch::Tensor> lora_before;
  for (const auto& t : p.model->lora_parameters()) lora_before.push_back(t.clone());
  auto res = grpo::run::train_sft(p, c);
  qInfo("LoRA SFT loss %.4f -> %.4f", res.losses.front(), res.losses.back());
  QVERIFY(res.losses.back() < res.losses.front() / 10);
  size_t i = 0;
  for (const auto& item : p.model->named_base_parameters()) QVERIFY2(torch::equal(item.value(), before[i++]), item.key().c_str());
  bool moved = false;
  i = 0;
  for (const auto& t : p.model->lora_parameters()) moved = moved || !torch::equal(t, lora_before[i++]);
  QVERIFY(moved);
  auto got = greedy(p, data);
  int right = 0;
  for (size_t k = 0; k < kCompletions.size(); ++k) right += got[k] == kCompletions[k];
  QVERIFY2(right >= 5, std::to_string(right).c_str());

  // run_sft with LoRA writes a PEFT adapter that reloads onto the untouched base checkpoint.
  c.max_steps = 3;
  auto saved = grpo::run::run_sft(c);
  QCOMPARE(saved.format, std::string("adapter"));
  QVERIFY(grpo::file_exists(dir + "/adapter/adapter_config.json"));
  QVERIFY(grpo::file_exists(dir + "/adapter/adapter_model.safetensors"));
  auto base = grpo::model::from_pretrained(model);
  grpo::model::load_adapter(*base, dir + "/adapter");
  QCOMPARE(base->lora_config().r, int64_t(16));
}

void TestSft::initModelIsSeededAndChecksVocab() {
  QTemporaryDir tmp;
  const std::string dir = tmp.path().toStdString();
  fs::create_directories(dir + "/a");
  fs::create_directories(dir + "/b");
  make_tiny_model(dir + "/a", 5);
  make_tiny_model(dir + "/b", 5);
  QCOMPARE(grpo::read_file(dir + "/a/init/model.safetensors"), grpo::read_file(dir + "/b/init/model.safetensors"));
  fs::create_directories(dir + "/c");
  make_tiny_model(dir + "/c", 6);
  QVERIFY(grpo::read_file(dir + "/a/init/model.safetensors") != grpo::read_file(dir + "/c/init/model.safetensors"));
  auto m = grpo::model::from_pretrained(dir + "/a/init");
  QCOMPARE(m->config().model_type, std::string("qwen2"));
  QVERIFY(std::abs(m->model->embed_tokens->weight.std().item<double>() - 0.02) < 0.002);

  const std::string small = write_text(dir + "/small.json", R"({"model_type": "qwen2", "vocab_size": 100,
    "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
    "num_key_value_heads": 2, "max_position_embeddings": 64})");
  try {
    grpo::run::init_model(small, kTokenizerDir, dir + "/bad");
    QFAIL("expected an error");
  } catch (const grpo::Error& e) {
    QVERIFY2(std::string(e.what()).find("vocab_size") != std::string::npos, e.what());
  }
}

void TestSft::configErrorsNameTheKey() {
  SftConfig c;
  auto expect = [&](const nlohmann::json& j, const std::string& needle) {
    try {
      SftConfig d;
      d.apply(j, "sft.yaml");
      d.validate("sft.yaml");
      QFAIL(("expected an error for " + j.dump()).c_str());
    } catch (const grpo::Error& e) {
      QVERIFY2(std::string(e.what()).find(needle) != std::string::npos, e.what());
    }
  };
  expect({{"learnin_rate", 1e-3}}, "did you mean \"learning_rate\"");
  expect({{"learning_rate", -1}}, "learning_rate");
  expect({{"lr_scheduler_type", "step"}}, "cosine");
  expect({{"r", "eight"}}, "key \"r\"");
  expect({{"model_name_or_path", "m"}, {"output_dir", "o"}}, "train_file");
  expect({{"model_name_or_path", "m"}, {"output_dir", "o"}, {"task", "arith"}, {"train_file", "x.jsonl"}}, "not both");
  expect({{"model_name_or_path", "m"}, {"output_dir", "o"}, {"task", "arith"}, {"use_lora", false}, {"save_format", "adapter"}},
         "use_lora");
  c.apply({{"model_name_or_path", "m"}, {"output_dir", "o"}, {"task", "arith"}, {"learning_rate", 2e-3}}, "x");
  c.validate("x");
  QCOMPARE(c.to_json()["learning_rate"].get<double>(), 2e-3);
  QCOMPARE(c.resolved_save_format(), std::string("adapter"));
}

void TestSft::dataErrorsNameTheRow() {
  QTemporaryDir tmp;
  const std::string dir = tmp.path().toStdString();
  const std::string model = make_tiny_model(dir);
  const std::string data = write_text(dir + "/bad.jsonl", "{\"prompt\": \"a\", \"completion\": \"b\"}\n{\"prompt\": \"c\"}\n");
  try {
    grpo::run::run_sft(memorise_config(model, data, dir + "/out"));
    QFAIL("expected an error");
  } catch (const grpo::Error& e) {
    QVERIFY2(std::string(e.what()).find("bad.jsonl: row 2") != std::string::npos, e.what());
    QVERIFY2(std::string(e.what()).find("completion") != std::string::npos, e.what());
  }
}

QTEST_GUILESS_MAIN(TestSft)
#include "test_sft.moc"
