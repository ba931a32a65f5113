// The config key table (core/grpo/config_schema.h): one row per key of TrainConfig::to_json()
// with the struct's defaults, a group and a doc, a range for every retunable key; the thin
// wrappers (is_retunable, config_key_range) and TRL aliases read it; `--set KEY=VALUE` parsing;
// the `--help-config` listing; and every preset in resources/presets/ validates against it.
#include "tests/common/test_paths.h"
#include <QtTest>

#include <set>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/grpo/config.h"
#include "core/grpo/advantages.h"
#include "core/grpo/config_schema.h"
#include "core/grpo/config_schema_json.h"
#include "core/grpo/loss.h"
#include "core/grpo/optimizer.h"
#include "core/grpo/trl_keys.h"
#include "tests/common/error_of.h"

using grpo::grpo::ConfigKeyInfo;
using grpo::grpo::TrainConfig;
using json = nlohmann::json;

namespace {

std::string error_of(const std::function<void()>& f) { return grpo::testing::error_of(f); }

bool contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

}  // namespace

class TestConfigSchema : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void everyKeyHasExactlyOneRow() {
    const auto& schema = grpo::grpo::train_config_schema();
    const json defaults = TrainConfig{}.to_json();
    std::set<std::string> names;
    for (const auto& k : schema) QVERIFY2(names.insert(k.name).second, k.name.c_str());  // no key twice
    QCOMPARE(names.size(), defaults.size());
    for (const auto& [key, value] : defaults.items()) QVERIFY2(names.count(key) == 1, key.c_str());
    QCOMPARE(grpo::grpo::config_keys().size(), schema.size());
  }

  void rowsCarryDefaultsGroupsDocsAndRanges() {
    const json defaults = TrainConfig{}.to_json();
    const std::set<std::string> groups = {"model and data", "generation", "optimisation", "GRPO loss", "LoRA",
                                          "async engine", "workers", "slurm workers", "rewards", "logging and saving", "the Hub"};
    int retunable = 0;
    for (const ConfigKeyInfo& k : grpo::grpo::train_config_schema()) {
      QVERIFY2(k.default_value == defaults[k.name], k.name.c_str());
      QVERIFY2(groups.count(k.group), (k.name + ": group " + k.group).c_str());
      QVERIFY2(!k.doc.empty() && k.doc.find('\n') == std::string::npos, k.name.c_str());
      QVERIFY2(!k.type.empty(), k.name.c_str());
      if (k.retunable) {
        ++retunable;
        QVERIFY2(!k.range_text().empty(), (k.name + " is retunable without a range").c_str());
      }
      // The wrappers are the table.
      QCOMPARE(grpo::grpo::is_retunable(k.name), k.retunable);
      QCOMPARE(grpo::grpo::config_key_range(k.name), k.range_text());
    }
    QVERIFY(retunable >= 10);
    // Spot checks against TrainConfig's initialisers and the ranges errors quote.
    const auto* lr = grpo::grpo::find_config_key(grpo::grpo::train_config_schema(), "learning_rate");
    QVERIFY(lr && lr->retunable && lr->group == "optimisation");
    QCOMPARE(lr->default_value.get<double>(), 1e-5);
    QCOMPARE(lr->range_text(), std::string("(0, 1]"));
    QCOMPARE(grpo::grpo::config_key_range("loss_type"),
             std::string("one of \"grpo\", \"bnpo\", \"dr_grpo\", \"dapo\", \"cispo\", \"sapo\", \"luspo\", \"vespo\""));
    QCOMPARE(grpo::grpo::config_key_range("importance_sampling_level"),
             std::string("one of \"token\", \"sequence\", \"sequence_token\""));
    QCOMPARE(grpo::grpo::config_key_range("model_name_or_path"), std::string());
    QCOMPARE(grpo::grpo::config_key_range("no_such_key"), std::string());
    QVERIFY(!grpo::grpo::is_retunable("r"));
  }

  // A Slurm time limit written as a bare number is minutes, as sbatch reads it; anything else
  // that is not text is refused naming the key.
  void slurmTimeLimitTakesMinutes() {
    TrainConfig cfg;
    cfg.apply(json{{"slurm_time_limit", 60}}, "run.yaml");
    QCOMPARE(cfg.slurm_time_limit, std::string("60"));
    cfg.apply(json{{"slurm_time_limit", "1-00:00:00"}}, "run.yaml");
    QCOMPARE(cfg.slurm_time_limit, std::string("1-00:00:00"));
    bool named = false;
    try {
      cfg.apply(json{{"slurm_time_limit", 1.5}}, "run.yaml");
    } catch (const grpo::Error& e) {
      named = std::string(e.what()).find("slurm_time_limit") != std::string::npos;
    }
    QVERIFY(named);
  }

  void defaultsApplyCleanly() {
    TrainConfig c;
    c.apply(TrainConfig{}.to_json(), "defaults");  // every default lies in its own range
    QCOMPARE(c.to_json(), TrainConfig{}.to_json());
  }

  // TRL/PEFT spellings are aliases in the table; the TRL import reads them from there.
  void aliasesAreTrlSpellings() {
    const auto* r = grpo::grpo::find_config_key(grpo::grpo::train_config_schema(), "lora_r", true);
    QVERIFY(r && r->name == "r");
    TrainConfig c;
    c.apply({{"lora_r", 4}, {"request_timeout", 30}, {"lora_target_modules", {"q_proj"}}}, "trl.yaml");
    QCOMPARE(c.r, int64_t(4));
    QCOMPARE(c.worker_timeout_s, 30.0);
    QCOMPARE(c.target_modules, json({"q_proj"}));
    const auto trl = grpo::grpo::trl_known_keys();
    for (const char* k : {"lora_r", "lora_target_modules", "request_timeout"})
      QVERIFY2(std::find(trl.begin(), trl.end(), k) != trl.end(), k);
    const std::string e = error_of([&] { c.apply({{"lora_r", 4}, {"r", 8}}, "trl.yaml"); });
    QVERIFY2(contains(e, "set the same thing"), e.c_str());
  }

  void setOptions() {
    const json j = grpo::grpo::parse_set_options(
        {"learning_rate=1e-5", "use_rslora=true", "target_modules=[q_proj, v_proj]", "loss_type=dapo",
         "epsilon_high=", "chat_template_kwargs={\"enable_thinking\": false}", "temperature=0.5", "temperature=0.7"});
    QCOMPARE(j["learning_rate"], json(1e-5));
    QCOMPARE(j["use_rslora"], json(true));
    QCOMPARE(j["target_modules"], json({"q_proj", "v_proj"}));
    QCOMPARE(j["loss_type"], json("dapo"));
    QVERIFY(j["epsilon_high"].is_null());
    QCOMPARE(j["chat_template_kwargs"], json({{"enable_thinking", false}}));
    QCOMPARE(j["temperature"], json(0.7));  // repeated: the last one wins
    TrainConfig c;
    c.apply(j, "--set");
    QCOMPARE(c.learning_rate, 1e-5);
    QCOMPARE(c.temperature, 0.7);
    QCOMPARE(c.epsilon_high_value(), c.epsilon);

    std::string e = error_of([] { grpo::grpo::parse_set_options({"learning_rate"}); });
    QVERIFY2(contains(e, "--set learning_rate") && contains(e, "KEY=VALUE"), e.c_str());
    e = error_of([&] { c.apply(grpo::grpo::parse_set_options({"learnig_rate=0.1"}), "--set"); });
    QVERIFY2(contains(e, "--set") && contains(e, "unknown key \"learnig_rate\"") && contains(e, "did you mean \"learning_rate\"?"),
             e.c_str());
    e = error_of([&] { c.apply(grpo::grpo::parse_set_options({"temperature=-1"}), "--set"); });
    QVERIFY2(contains(e, "--set") && contains(e, "\"temperature\"") && contains(e, "-1") && contains(e, "(0, 100]"), e.c_str());
    e = error_of([&] { c.apply(grpo::grpo::parse_set_options({"num_generations=lots"}), "--set"); });
    QVERIFY2(contains(e, "\"num_generations\"") && contains(e, "\"lots\"") && contains(e, "[2, 4096]"), e.c_str());
    QCOMPARE(c.temperature, 0.7);  // a refused --set changes nothing
  }

  void helpListsGroupsKeysAndMarks() {
    const std::string help = grpo::grpo::format_config_help(grpo::grpo::train_config_schema(), "title line");
    QVERIFY(help.rfind("title line\n", 0) == 0);
    for (const char* g : {"\nmodel and data:\n", "\ngeneration:\n", "\nGRPO loss:\n", "\nLoRA:\n", "\nasync engine:\n",
                          "\nlogging and saving:\n"})
      QVERIFY2(contains(help, g), g);
    QVERIFY2(contains(help, "  learning_rate (number, (0, 1]; default 1e-05) [retunable]\n"), help.c_str());
    QVERIFY(contains(help, "  r (integer, [1, 1024]; default 8) (also read as: lora_r)\n"));
    for (const auto& k : grpo::grpo::train_config_schema()) QVERIFY2(contains(help, "  " + k.name + " ("), k.name.c_str());
  }

  // A closed set of values is listed once (core/grpo/choices.h): the key's row allows exactly the
  // names the code that acts on the value parses, and every allowed name reaches that code.
  void choicesAreListedOnce() {
    const auto& schema = grpo::grpo::train_config_schema();
    auto choices_of = [&](const char* key) { return grpo::grpo::find_config_key(schema, key)->range.choices; };
    const std::vector<std::string> losses = choices_of("loss_type");
    QCOMPARE(losses, (std::vector<std::string>{"grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo"}));  // TRL's eight
    for (const auto& name : losses) QCOMPARE(std::string(grpo::grpo::to_string(grpo::grpo::parse_loss_type(name, "t"))), name);
    QVERIFY(error_of([] { grpo::grpo::parse_loss_type("ppo", "cfg.yaml"); }).find("cfg.yaml: loss_type 'ppo' is not one of grpo, bnpo, dr_grpo, dapo, cispo, sapo, luspo, vespo") != std::string::npos);
    for (const auto& name : choices_of("scale_rewards"))
      QCOMPARE(std::string(grpo::grpo::to_string(grpo::grpo::parse_scale_rewards(name, "t"))), name);
    // TRL's boolean spellings are read, never offered or written.
    QVERIFY(grpo::grpo::parse_scale_rewards("true", "t") == grpo::grpo::ScaleRewards::Group);
    QVERIFY(grpo::grpo::parse_scale_rewards("false", "t") == grpo::grpo::ScaleRewards::None);
    QCOMPARE(choices_of("scale_rewards"), (std::vector<std::string>{"group", "batch", "none"}));
    for (const auto& name : choices_of("lr_scheduler_type")) {
      const double mid = grpo::grpo::scheduled_lr(1.0, name, 50, 100, 0.0);
      QVERIFY2(mid > 0 && mid <= 1.0, name.c_str());
    }
    QVERIFY(error_of([] { grpo::grpo::scheduled_lr(1.0, "step", 1, 10, 0.0); }).find("one of constant, linear, cosine") != std::string::npos);
    // The same sets reach the browser: the served schema carries the choices, the form flag and
    // whether null is a value.
    const json served = grpo::grpo::config_schema_json(schema);
    bool saw_loss = false, saw_eps_high = false;
    for (const auto& k : served) {
      if (k["name"] == "loss_type") saw_loss = k["range"]["choices"] == json(losses) && k["form"] == true;
      if (k["name"] == "epsilon_high") saw_eps_high = k["nullable"] == true;
      QVERIFY(k.contains("form") && k.contains("nullable"));
    }
    QVERIFY(saw_loss && saw_eps_high);
  }

  // Every preset the app lists validates against the table: a whole setup (the demo) as it is,
  // a hyperparameter preset over the demo.
  void presetsValidate() {
    const std::string dir = std::string(GRPO_RESOURCES) + "/presets";
    const std::string demo_path = dir + "/demo.yaml";
    json demo = grpo::grpo::load_config_file(demo_path);
    demo["model_name_or_path"] = std::string(GRPO_RESOURCES) + "/" + demo["model_name_or_path"].get<std::string>();
    int n = 0;
    for (const auto& name : QDir(QString::fromStdString(dir)).entryList({"*.yaml", "*.yml", "*.json"}, QDir::Files)) {
      const std::string path = dir + "/" + name.toStdString();
      const std::string text = grpo::read_file(path);
      QVERIFY2(text.rfind("# title: ", 0) == 0, (path + ": the first line is not \"# title: ...\"").c_str());
      TrainConfig c;
      c.apply(demo, demo_path);
      json j = grpo::grpo::load_config_file(path);
      if (j.contains("model_name_or_path")) j.erase("model_name_or_path");  // resolved like the demo's
      c.apply(j, path);
      c.validate(path);
      ++n;
    }
    QVERIFY(n >= 3);  // demo, cpu, gpu
    TrainConfig cpu;
    cpu.apply(grpo::grpo::load_config_file(dir + "/cpu.yaml"), "cpu.yaml");
    QCOMPARE(cpu.token_budget, int64_t(1024));
    QCOMPARE(cpu.learning_rate, 1e-4);
  }
};

QTEST_GUILESS_MAIN(TestConfigSchema)
#include "test_config_schema.moc"
