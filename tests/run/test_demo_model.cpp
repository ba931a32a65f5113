// The embedded demo model resources/models/tiny-arith: the exact Hugging Face layout (Qwen2
// config, safetensors, tokenizer with a ChatML template, generation config) within 10 MB; it
// loads with from_pretrained and our Tokenizer; the tokenizer gives the ids of the Hugging Face
// tokenizers library (reference ids in data/, made by tests/bench/reference_ids.mjs) and
// round-trips the demo's prompts; greedy accuracy on 100 held-out problems of the task
// `grpo train --demo` uses is within [0.2, 0.6] (room left for RL).
#include "tests/common/test_paths.h"
#include <QtTest>

#include <filesystem>
#include <fstream>

#include <torch/torch.h>

#include "core/common/files.h"
#include "core/common/strings.h"
#include "core/grpo/config.h"
#include "core/model/weights.h"
#include "core/run/sync_trainer.h"
#include "core/text/tokenizer.h"

namespace fs = std::filesystem;

namespace {

const std::string kResources = GRPO_RESOURCES;
const std::string kModel = kResources + "/models/tiny-arith";

grpo::grpo::TrainConfig demo_config(const std::string& output_dir) {
  auto j = grpo::grpo::load_config_file(kResources + "/presets/demo.yaml");
  j["model_name_or_path"] = grpo::path_join(kResources, j.value("model_name_or_path", std::string()));
  grpo::grpo::TrainConfig c;
  c.apply(j, "demo.yaml");
  c.output_dir = output_dir;
  c.validate("demo.yaml");
  return c;
}

}  // namespace

class TestDemoModel : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void layoutAndSize();
  void loads();
  void tokenizerMatchesHuggingFace();
  void tokenizerRoundTripsDemoPrompts();
  void greedyAccuracyLeavesRoomForRl();
  void dataSeedKeepsTheEvalSet();
};

void TestDemoModel::layoutAndSize() {
  uintmax_t total = 0;
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    QVERIFY2(fs::is_regular_file(kModel + "/" + f), f);
  for (const auto& e : fs::directory_iterator(kModel)) total += fs::file_size(e.path());
  qInfo("tiny-arith: %.2f MB", static_cast<double>(total) / 1e6);
  QVERIFY(total <= 10'000'000);
  auto cfg = nlohmann::json::parse(grpo::read_file(kModel + "/config.json"));
  QCOMPARE(cfg["model_type"].get<std::string>(), std::string("qwen2"));
  QCOMPARE(cfg["architectures"][0].get<std::string>(), std::string("Qwen2ForCausalLM"));
  auto tc = nlohmann::json::parse(grpo::read_file(kModel + "/tokenizer_config.json"));
  QVERIFY(tc["chat_template"].get<std::string>().find("<|im_start|>") != std::string::npos);
  QCOMPARE(tc["eos_token"].get<std::string>(), std::string("<|im_end|>"));
}

void TestDemoModel::loads() {
  auto m = grpo::model::from_pretrained(kModel);
  auto tok = grpo::text::Tokenizer::load(kModel);
  QVERIFY(static_cast<int64_t>(tok.vocab_size()) <= m->config().vocab_size);
  QVERIFY(tok.token_to_id("<|im_end|>").has_value());
  QCOMPARE(int64_t(*tok.token_to_id("<|im_end|>")), m->config().eos_token_ids.at(0));
  qInfo("tiny-arith: %lld parameters, %lld layers, hidden %lld", static_cast<long long>(m->num_base_parameters()),
        static_cast<long long>(m->config().num_hidden_layers), static_cast<long long>(m->config().hidden_size));
  torch::NoGradGuard ng;
  auto logits = m->forward(torch::tensor({{1, 2, 3}}, torch::kInt64));
  QCOMPARE(logits.size(2), m->config().vocab_size);
  QVERIFY(torch::isfinite(logits).all().item<bool>());
}

void TestDemoModel::tokenizerMatchesHuggingFace() {
  auto tok = grpo::text::Tokenizer::load(kModel);
  std::ifstream texts(std::string(GRPO_RUN_TEST_DATA) + "/tiny_arith_texts.txt");
  std::ifstream refs(std::string(GRPO_RUN_TEST_DATA) + "/tiny_arith_reference_ids.jsonl");
  std::string text, ref;
  int n = 0;
  while (std::getline(texts, text) && std::getline(refs, ref)) {
    auto j = nlohmann::json::parse(ref);
    auto ids = tok.encode(text);
    QCOMPARE(std::vector<int32_t>(ids.begin(), ids.end()), j["ids"].get<std::vector<int32_t>>());
    auto with = tok.encode(text, true);
    QCOMPARE(with, j["ids_with_special"].get<std::vector<int32_t>>());
    QCOMPARE(tok.decode(with, false), j["decoded"].get<std::string>());
    QCOMPARE(tok.decode(with, true), j["decoded_skip"].get<std::string>());
    ++n;
  }
  QVERIFY(n >= 20);
}

void TestDemoModel::tokenizerRoundTripsDemoPrompts() {
  QTemporaryDir tmp;
  auto cfg = demo_config(tmp.path().toStdString());
  auto data = grpo::run::load_examples(cfg);
  auto tok = grpo::text::Tokenizer::load(kModel);
  const auto digit_ids = tok.encode("0123456789");
  QCOMPARE(digit_ids.size(), size_t(10));  // one token per digit, as Qwen2
  for (size_t i = 0; i < 100; ++i) {
    const auto& ex = data.eval[i];
    const std::string chat = tok.apply_chat_template(std::vector<grpo::text::ChatMessage>{{"user", ex.prompt_text}}, true);
    QCOMPARE(chat, "<|im_start|>user\n" + ex.prompt_text + "<|im_end|>\n<|im_start|>assistant\n");
    auto ids = tok.encode(chat);
    QCOMPARE(tok.decode(ids), chat);
    QCOMPARE(tok.decode(ids, true), "user\n" + ex.prompt_text + "\nassistant\n");
    auto answer = tok.encode(*ex.answer);
    QCOMPARE(tok.decode(answer), *ex.answer);
  }
}

void TestDemoModel::greedyAccuracyLeavesRoomForRl() {
  QTemporaryDir tmp;
  grpo::run::SyncTrainer trainer(demo_config(tmp.path().toStdString()), tmp.path().toStdString());
  const double acc = trainer.evaluate(100);
  qInfo("tiny-arith greedy accuracy on 100 held-out problems: %.2f", acc);
  QVERIFY2(acc >= 0.2 && acc <= 0.6, std::to_string(acc).c_str());
}

// data_seed holds the problems, the eval split and the order while seed changes (what
// `grpo bench learn --seeds` varies); without it the seed moves them all.
void TestDemoModel::dataSeedKeepsTheEvalSet() {
  QTemporaryDir tmp;
  auto texts = [](const std::vector<grpo::rollout::Example>& v) {
    std::vector<std::string> out;
    for (const auto& e : v) out.push_back(e.prompt_text + "=" + e.answer.value_or(""));
    return out;
  };
  auto base = demo_config(tmp.path().toStdString());
  QCOMPARE(base.data_seed, int64_t(-1));
  QCOMPARE(base.resolved_data_seed(), base.seed);
  const auto a = grpo::run::load_examples(base);
  auto reseeded = base;
  reseeded.data_seed = base.seed;
  reseeded.seed = base.seed + 1;
  const auto b = grpo::run::load_examples(reseeded);
  QVERIFY(texts(a.eval) == texts(b.eval));
  QVERIFY(texts(a.train) == texts(b.train));
  auto moved = base;
  moved.seed = base.seed + 1;  // data_seed -1: the data follows the seed
  QVERIFY(texts(grpo::run::load_examples(moved).eval) != texts(a.eval));
}

QTEST_GUILESS_MAIN(TestDemoModel)
#include "test_demo_model.moc"
