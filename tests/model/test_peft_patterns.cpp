// PEFT adapters with per-module plans: rank_pattern / alpha_pattern (first match in file order),
// a regex target_modules, layers_to_transform / layers_pattern, use_rslora; each compared with
// the logits real PEFT 0.13.2 computed for the golden r4 adapter (reference_logits.json), plus the
// errors for bad patterns and for the features still refused, and the save_adapter round trip.
// The class is declared first: moc loses track of the file in the raw-string test tables below.
#include <QtTest>

#include <filesystem>
#include <string>
#include <vector>

#include "core/common/error.h"
#include "core/io/safetensors.h"
#include "core/model/causal_lm.h"
#include "core/model/peft_io.h"
#include "core/model/weights.h"
#include "model_test_util.h"

class TestPeftPatterns : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void moduleNamesAreHuggingFaces();
  void rankAndAlphaPatterns();
  void regexTargetModules();
  void listMatchingAsPeft();
  void layersToTransformAll_data();
  void layersToTransformAll();
  void layerSubset_data();
  void layerSubset();
  void rslora();
  void badConfigsAreNamed_data();
  void badConfigsAreNamed();
  void hugePatternsAreRefused();
  void refusedFeatures_data();
  void refusedFeatures();
  void saveRoundTrip_data();
  void saveRoundTrip();
};

using namespace grpo;
using namespace grpo::model;
using namespace grpo::model::test;
using ojson = nlohmann::ordered_json;

namespace {

const std::string kBase = "qwen2-tied-bf16";
const std::string kAdapter = "qwen2-tied-bf16-lora-r4";
constexpr double kTol = 1e-4;  // as the golden adapter's own test (test_model_lora)

torch::Tensor logits_of(CausalLM& m, const torch::Tensor& ids) {
  torch::NoGradGuard g;
  return m->forward(ids);
}

// The golden adapter_config.json (file order) with `edits` applied in order.
ojson golden_config(const std::vector<std::pair<std::string, ojson>>& edits) {
  auto j = ojson::parse(read_file(golden_model(kAdapter) + "/adapter_config.json"));
  for (const auto& [k, v] : edits) j[k] = v;
  return j;
}

// Writes an adapter folder: `config` and the golden tensors whose names pass `keep`.
std::string write_adapter(const std::string& dir, const ojson& config,
                          const std::function<bool(const std::string&)>& keep = {}) {
  std::filesystem::create_directories(dir);
  write_file_atomic(dir + "/adapter_config.json", config.dump(2));
  auto f = io::SafetensorsFile::open(golden_model(kAdapter) + "/adapter_model.safetensors");
  std::vector<io::TensorView> views;
  for (const auto& t : f.tensors())
    if (!keep || keep(t.name)) views.push_back({t.name, t.dtype, t.shape, f.data(t), t.nbytes()});
  io::write_safetensors(dir + "/adapter_model.safetensors", views, {{"format", "pt"}});
  return dir;
}

// Loads `dir` onto a fresh base and returns max|logits - PEFT's reference logits|.
double diff_to_golden(const std::string& dir, CausalLM* out = nullptr) {
  auto m = from_pretrained(golden_model(kBase));
  m->eval();
  auto ref = load_reference(golden_model(kAdapter));
  load_adapter(*m, dir);
  const double d = max_abs_diff(logits_of(m, ref.input_ids)[0], ref.logits);
  qInfo("max|diff| to PEFT's logits: %.3g", d);
  if (out) *out = m;
  return d;
}

std::string load_error(const std::string& dir) {
  auto m = from_pretrained(golden_model(kBase));
  try {
    load_adapter(*m, dir);
  } catch (const Error& e) {
    if (m->has_lora()) return "model kept a half-loaded adapter";
    return e.what();
  }
  return "no error";
}

#define EXPECT_ERROR(dir, ...)                                                          \
  do {                                                                                  \
    const std::string what_ = load_error(dir);                                          \
    for (const std::string& n_ : std::vector<std::string>{__VA_ARGS__})                 \
      QVERIFY2(what_.find(n_) != std::string::npos, (n_ + " not in: " + what_).c_str()); \
  } while (0)

}  // namespace

void TestPeftPatterns::moduleNamesAreHuggingFaces() {
  auto m = from_pretrained(golden_model(kBase));
  std::vector<std::string> names;
  for (const auto& [n, lin] : m->linear_layers()) names.push_back(n);
  QCOMPARE(names.front(), std::string("model.layers.0.self_attn.q_proj"));
  QVERIFY(std::find(names.begin(), names.end(), "model.layers.1.mlp.down_proj") != names.end());
  QCOMPARE(names.size(), size_t(14));  // tied: no lm_head
}

// (a) r 16 / alpha 32 by default, every projection r 4 / alpha 8 through the patterns; the
// first key in file order wins (sorted, ".+" would come first and give r 99).
void TestPeftPatterns::rankAndAlphaPatterns() {
  QTemporaryDir tmp;
  auto cfg = golden_config({{"r", 16},
                            {"lora_alpha", 32},
                            {"rank_pattern", ojson::parse(R"({"\\w+_proj": 4, ".+": 99})")},
                            {"alpha_pattern", ojson::parse(R"({"self_attn\\.[qkvo]_proj": 8, "mlp\\..*": 8, ".+": 1})")}});
  auto dir = write_adapter(tmp.path().toStdString() + "/a", cfg);
  CausalLM m{nullptr};
  QVERIFY(diff_to_golden(dir, &m) <= kTol);
  auto& q = m->model->decoder_layers[1]->self_attn->q_proj;
  QCOMPARE(q->lora_A->weight.sizes().vec(), (std::vector<int64_t>{4, 64}));
  QCOMPARE(q->lora_scaling(), 2.0);
  const auto& c = m->lora_config();
  QCOMPARE(c.rank_pattern.front().first, std::string("\\w+_proj"));
  auto t = c.target_for("model.layers.0.mlp.up_proj");
  QVERIFY(t && t->r == 4 && t->lora_alpha == 8 && t->scaling == 2);
  // Through nlohmann::json (key-sorted) the other pattern would win: the reader keeps file order.
  auto sorted = lora_config_from_json(nlohmann::json::parse(cfg.dump()), "sorted");
  QCOMPARE(sorted.target_for("model.layers.0.mlp.up_proj")->r, int64_t(99));
}

// (b) target_modules as a regex string (re.fullmatch on the module names).
void TestPeftPatterns::regexTargetModules() {
  QTemporaryDir tmp;
  auto dir = write_adapter(
      tmp.path().toStdString() + "/b",
      golden_config({{"target_modules", R"(model\.layers\.\d+\.(self_attn\.(q|k|v|o)|mlp\.(gate|up|down))_proj)"}}));
  QVERIFY(diff_to_golden(dir) <= kTol);
  // fullmatch: a prefix match is not enough.
  LoraConfig c;
  c.target_modules = {R"(model\.layers\.\d+\.self_attn\.q)"};
  c.target_regex = true;
  QVERIFY(!c.target_for("model.layers.0.self_attn.q_proj"));
  c.target_modules = {R"(.*\.0\.self_attn\.q_proj|.*v_proj)"};
  QVERIFY(c.target_for("model.layers.0.self_attn.q_proj"));
  QVERIFY(!c.target_for("model.layers.1.self_attn.q_proj"));
  QVERIFY(c.target_for("model.layers.1.self_attn.v_proj"));
}

// (c) layers_to_transform covering every layer, with layers_pattern "layers" (and a list of
// patterns, and none).
// check_target_module_exists for lists, case by case (no model needed).
void TestPeftPatterns::listMatchingAsPeft() {
  LoraConfig c;
  c.target_modules = {"model.layers.0.self_attn.q_proj", "self_attn.v_proj", "mlp.up_proj"};
  c.layers_to_transform = {1};
  c.layers_pattern = {"h", "layers"};
  // A module named outright is adapted whatever layers_to_transform says (PEFT returns early).
  QVERIFY(c.target_for("model.layers.0.self_attn.q_proj"));
  QVERIFY(!c.target_for("model.layers.1.self_attn.q_proj"));  // endswith(".model.layers.0...") fails
  QVERIFY(!c.target_for("model.layers.0.self_attn.v_proj"));  // suffix match, then the layer filter
  QVERIFY(c.target_for("model.layers.1.self_attn.v_proj"));
  QVERIFY(c.target_for("model.layers.1.mlp.up_proj"));
  QVERIFY(!c.target_for("model.layers.1.mlp.down_proj"));
  // A suffix matches at a dot only.
  LoraConfig d;
  d.target_modules = {"proj"};
  QVERIFY_THROWS_EXCEPTION(Error, d.validate("t"));  // and is no projection of ours anyway
  d.target_modules = {"up_proj"};
  QVERIFY(!d.target_for("model.layers.0.mlp.gate_up_proj"));
  // layers_pattern names the module list; another name gives no index, so nothing is adapted.
  d.layers_to_transform = {0};
  d.layers_pattern = {"blocks"};
  QVERIFY(!d.target_for("model.layers.0.mlp.up_proj"));
  d.layers_pattern.clear();  // any "<name>.<index>." segment
  QVERIFY(d.target_for("model.layers.0.mlp.up_proj"));
  // rank_pattern: a key must match at a dot boundary to the end; the first in order wins.
  LoraConfig e;
  e.r = 8;
  e.rank_pattern = {{"proj", 2}, {"q_proj", 3}, {"self_attn\\..*", 5}};
  QCOMPARE(e.target_for("model.layers.0.self_attn.q_proj")->r, int64_t(3));
  QCOMPARE(e.target_for("model.layers.0.self_attn.k_proj")->r, int64_t(5));
  QCOMPARE(e.target_for("model.layers.0.mlp.up_proj")->r, int64_t(8));
  QCOMPARE(e.max_rank(), int64_t(8));
  e.rank_pattern.push_back({"up_proj", 64});
  QCOMPARE(e.max_rank(), int64_t(64));
}

void TestPeftPatterns::layersToTransformAll_data() {
  QTest::addColumn<QString>("pattern");
  QTest::newRow("string") << R"("layers")";
  QTest::newRow("list") << R"(["h", "layers"])";
  QTest::newRow("null") << "null";
}
void TestPeftPatterns::layersToTransformAll() {
  QFETCH(QString, pattern);
  QTemporaryDir tmp;
  auto dir = write_adapter(tmp.path().toStdString() + "/c",
                           golden_config({{"layers_to_transform", ojson::array({0, 1})},
                                          {"layers_pattern", ojson::parse(pattern.toStdString())}}));
  QVERIFY(diff_to_golden(dir) <= kTol);
}

// (d) layers_to_transform [1] (or the int 1): the file holds layer 1 only; the logits equal the
// full golden adapter with layer 0's lora_B zeroed, and differ from the base.
void TestPeftPatterns::layerSubset_data() {
  QTest::addColumn<QString>("layers");
  QTest::newRow("list") << "[1]";
  QTest::newRow("int") << "1";
}
void TestPeftPatterns::layerSubset() {
  QFETCH(QString, layers);
  QTemporaryDir tmp;
  auto is_layer1 = [](const std::string& n) { return n.find(".layers.1.") != std::string::npos; };
  auto cfg = golden_config({{"layers_to_transform", ojson::parse(layers.toStdString())}, {"layers_pattern", "layers"}});
  auto dir = write_adapter(tmp.path().toStdString() + "/d", cfg, is_layer1);
  auto ref = load_reference(golden_model(kAdapter));

  auto m = from_pretrained(golden_model(kBase));
  m->eval();
  load_adapter(*m, dir);
  QCOMPARE(m->lora_parameters().size(), size_t(7 * 2));
  QVERIFY(!m->model->decoder_layers[0]->self_attn->q_proj->has_lora());
  auto subset = logits_of(m, ref.input_ids);

  auto full = from_pretrained(golden_model(kBase));
  full->eval();
  load_adapter(*full, golden_model(kAdapter));
  {
    torch::NoGradGuard g;
    for (auto& item : full->named_lora_parameters())
      if (item.key().find("layers.0.") != std::string::npos && item.key().find("lora_B") != std::string::npos)
        item.value().zero_();
  }
  const double d = max_abs_diff(subset, logits_of(full, ref.input_ids));
  auto base = from_pretrained(golden_model(kBase));
  base->eval();
  const double from_base = max_abs_diff(subset, logits_of(base, ref.input_ids));
  qInfo("layer subset: max|diff| to golden-with-layer-0-zeroed %.3g, to the base %.3g", d, from_base);
  QVERIFY(d <= kTol);
  QVERIFY(from_base > 1e-2);

  // A layer-0 tensor in such a file is refused, by name.
  auto bad = write_adapter(tmp.path().toStdString() + "/d0", cfg,
                           [&](const std::string& n) { return is_layer1(n) || n.find("layers.0.self_attn.q_proj.lora_A") != std::string::npos; });
  EXPECT_ERROR(bad, "unexpected tensor base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
}

// (e) rsLoRA: alpha / sqrt(r) with alpha 4, r 4 gives PEFT's 8 / 4.
void TestPeftPatterns::rslora() {
  QTemporaryDir tmp;
  auto dir = write_adapter(tmp.path().toStdString() + "/e", golden_config({{"use_rslora", true}, {"lora_alpha", 4}}));
  QVERIFY(diff_to_golden(dir) <= kTol);
  // And per module: rank_pattern r with alpha_pattern alpha, scaled by sqrt of the module's r.
  LoraConfig c;
  c.r = 16;
  c.use_rslora = true;
  c.rank_pattern = {{"q_proj", 4}};
  c.alpha_pattern = {{"q_proj", 6}};
  QCOMPARE(c.target_for("model.layers.0.self_attn.q_proj")->scaling, 3.0);
}

// (f) bad patterns, value types and sizes, each named.
void TestPeftPatterns::badConfigsAreNamed_data() {
  QTest::addColumn<QString>("edits");  // JSON object of keys to set
  QTest::addColumn<QString>("needles");  // '|'-separated
  QTest::newRow("regex target") << R"({"target_modules": "model\\.(layers"})" << "target_modules|model\\.(layers|not a valid regex";
  QTest::newRow("regex rank") << R"({"rank_pattern": {"q_proj(": 4}})" << "rank_pattern key 'q_proj('|not a valid regex";
  QTest::newRow("regex alpha") << R"({"alpha_pattern": {"[q": 4}})" << "alpha_pattern key '[q'|not a valid regex";
  QTest::newRow("regex layers") << R"({"layers_to_transform": [0], "layers_pattern": "lay(ers"})" << "layers_pattern 'lay(ers'|not a valid regex";
  QTest::newRow("rank type") << R"({"rank_pattern": {"q_proj": "4"}})" << "rank_pattern|'q_proj' must be an integer";
  QTest::newRow("rank float") << R"({"rank_pattern": {"q_proj": 4.5}})" << "rank_pattern|integer";
  QTest::newRow("rank list") << R"({"rank_pattern": ["q_proj"]})" << "rank_pattern|expected an object";
  QTest::newRow("rank zero") << R"({"rank_pattern": {"q_proj": 0}})" << "rank_pattern|not a positive integer";
  QTest::newRow("alpha type") << R"({"alpha_pattern": {"q_proj": [8]}})" << "alpha_pattern|must be a number";
  QTest::newRow("layers type") << R"({"layers_to_transform": "0"})" << "layers_to_transform|integer";
  QTest::newRow("layers bool") << R"({"layers_to_transform": [true]})" << "layers_to_transform|integer";
  QTest::newRow("pattern type") << R"({"layers_to_transform": [0], "layers_pattern": 3})" << "layers_pattern|string";
  QTest::newRow("target type") << R"({"target_modules": [1]})" << "target_modules|module names";
  QTest::newRow("regex+layers") << R"({"target_modules": ".*_proj", "layers_to_transform": [0]})"
                                << "layers_to_transform / layers_pattern cannot be used when target_modules is a string";
  QTest::newRow("capture group") << "{\"layers_to_transform\": [0], \"layers_pattern\": \"(layers)\"}"
                                 << "capture group 1|not a layer index";
  QTest::newRow("regex non-linear") << R"({"target_modules": ".*\\.mlp|.*_proj"})" << "model.layers.0.mlp|not a linear projection";
  QTest::newRow("regex embed") << R"({"target_modules": "model\\.embed_tokens|.*_proj"})" << "model.embed_tokens|not a linear projection";
  QTest::newRow("regex lm_head") << R"({"target_modules": "lm_head|.*_proj"})" << "lm_head";
  QTest::newRow("regex nothing") << R"({"target_modules": "nothing"})" << "selects no linear module";
  QTest::newRow("layers nothing") << R"({"layers_to_transform": [5]})" << "selects no linear module";
}
void TestPeftPatterns::badConfigsAreNamed() {
  QFETCH(QString, edits);
  QFETCH(QString, needles);
  QTemporaryDir tmp;
  auto cfg = golden_config({});
  const auto edit = ojson::parse(edits.toStdString());  // items() of a temporary would dangle
  for (const auto& [k, v] : edit.items()) cfg[k] = v;
  auto dir = write_adapter(tmp.path().toStdString() + "/f", cfg);
  const std::string what = load_error(dir);
  for (const auto& n : needles.split('|'))
    QVERIFY2(what.find(n.toStdString()) != std::string::npos, (n.toStdString() + " not in: " + what).c_str());
}

void TestPeftPatterns::hugePatternsAreRefused() {
  QTemporaryDir tmp;
  ojson many = ojson::object();
  for (int i = 0; i < 5000; ++i) many["p" + std::to_string(i)] = 4;
  EXPECT_ERROR(write_adapter(tmp.path().toStdString() + "/h1", golden_config({{"rank_pattern", many}})),
               "rank_pattern: 5000 entries, more than the 4096");
  ojson list = ojson::array();
  for (int i = 0; i < 5000; ++i) list.push_back(i);
  EXPECT_ERROR(write_adapter(tmp.path().toStdString() + "/h2", golden_config({{"layers_to_transform", list}})),
               "layers_to_transform: 5000 entries");
  EXPECT_ERROR(write_adapter(tmp.path().toStdString() + "/h3",
                             golden_config({{"target_modules", std::string(5000, 'a')}})),
               "target_modules: pattern of 5000 characters, longer than the 4096");
  // Catastrophic backtracking stops at PCRE2's match limit instead of hanging.
  EXPECT_ERROR(write_adapter(tmp.path().toStdString() + "/h4",
                             golden_config({{"target_modules", "((.|.)*)*_proj\\."}})),
               "target_modules", "failed on module name");
}

// Each feature still refused, with its reason, and the list of what is refused.
void TestPeftPatterns::refusedFeatures_data() {
  QTest::addColumn<QString>("key");
  QTest::addColumn<QString>("value");
  QTest::addColumn<QString>("why");
  QTest::newRow("use_dora") << "use_dora" << "true" << "DoRA's magnitude vectors are not implemented";
  QTest::newRow("bias") << "bias" << "\"all\"" << "LoRA bias terms";
  QTest::newRow("lora_bias") << "lora_bias" << "true" << "a bias on lora_B";
  QTest::newRow("modules_to_save") << "modules_to_save" << "[\"score\"]" << "only whole copies of lm_head and embed_tokens";
  QTest::newRow("layer_replication") << "layer_replication" << "[[0, 1]]" << "layer replication";
  QTest::newRow("fan_in_fan_out") << "fan_in_fan_out" << "true" << "Conv1D";
  QTest::newRow("target_parameters") << "target_parameters" << "[\"experts.w\"]" << "bare parameters";
  QTest::newRow("trainable_token_indices") << "trainable_token_indices" << "[1, 2]" << "trainable token embeddings";
  QTest::newRow("embed target") << "target_modules" << "[\"q_proj\", \"embed_tokens\"]" << "LoRA on embeddings";
  QTest::newRow("peft_type") << "peft_type" << "\"IA3\"" << "only LoRA adapters";
}
void TestPeftPatterns::refusedFeatures() {
  QFETCH(QString, key);
  QFETCH(QString, value);
  QFETCH(QString, why);
  QTemporaryDir tmp;
  auto dir = write_adapter(tmp.path().toStdString() + "/r",
                           golden_config({{key.toStdString(), ojson::parse(value.toStdString())}}));
  EXPECT_ERROR(dir, "adapter_config.json", key.toStdString() + ": ", why.toStdString(), "is not supported",
               "refused: peft_type other than LORA", "use_dora (DoRA's magnitude vectors are not implemented)");
}

// (g) save_adapter writes the plan back (patterns in their order, layers, regex): the config
// re-read equals, and the re-loaded adapter gives the same logits.
void TestPeftPatterns::saveRoundTrip_data() {
  QTest::addColumn<QString>("edits");
  QTest::newRow("patterns") << R"({"r": 16, "lora_alpha": 32, "rank_pattern": {"\\w+_proj": 4, ".+": 99},
                                   "alpha_pattern": {"mlp\\..*": 8, ".+": 8}})";
  QTest::newRow("regex") << R"({"target_modules": "model\\.layers\\.1\\..*_proj"})";
  QTest::newRow("layers") << R"({"layers_to_transform": 1, "layers_pattern": "layers"})";
  QTest::newRow("layers list") << R"({"layers_to_transform": [1], "layers_pattern": ["layers"],
                                      "target_modules": ["self_attn.q_proj", "v_proj", "mlp.down_proj"]})";
}
void TestPeftPatterns::saveRoundTrip() {
  QFETCH(QString, edits);
  QTemporaryDir tmp;
  auto cfg = golden_config({});
  const auto edit = ojson::parse(edits.toStdString());  // items() of a temporary would dangle
  for (const auto& [k, v] : edit.items()) cfg[k] = v;
  const auto plan = lora_config_from_json(cfg, "edited");
  // Tensors: the golden ones for the modules the plan adapts.
  auto dir = write_adapter(tmp.path().toStdString() + "/in", cfg, [&](const std::string& n) {
    auto module = n.substr(std::string(kPeftKeyPrefix).size());
    module = module.substr(0, module.find(".lora_"));
    return plan.target_for(module).has_value();
  });
  auto m = from_pretrained(golden_model(kBase));
  m->eval();
  load_adapter(*m, dir);
  auto ref = load_reference(golden_model(kAdapter));
  auto before = logits_of(m, ref.input_ids);
  const std::string out = tmp.path().toStdString() + "/out";
  save_adapter(*m, out, "qwen2-tied-bf16");
  const auto reread = read_adapter_config(out);
  QVERIFY(reread == m->lora_config());
  QVERIFY(reread == plan);
  auto again = from_pretrained(golden_model(kBase));
  again->eval();
  load_adapter(*again, out);
  QVERIFY(torch::equal(logits_of(again, ref.input_ids), before));
  // The checkpoint path (weights into an attached adapter) accepts it; another plan is refused.
  load_adapter_weights(*again, out);
  LoraConfig other = plan;
  other.rank_pattern.clear();
  other.alpha_pattern.clear();
  other.layers_to_transform.clear();
  other.layers_pattern.clear();
  other.target_modules = {"all-linear"};
  other.target_regex = false;
  other.r = 4;
  again->add_lora(other);
  try {
    load_adapter_weights(*again, out);
    QFAIL("no error");
  } catch (const Error& e) {
    QVERIFY2(std::string(e.what()).find("in the attached adapter") != std::string::npos, e.what());
  }
}

QTEST_GUILESS_MAIN(TestPeftPatterns)
#include "test_peft_patterns.moc"
