// The run config: TRL key names, JSON and YAML files, errors that name the file, key, value,
// allowed range and nearest known key; a rejected change leaves the config untouched.
#include <QtTest>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/grpo/config.h"
#include "tests/common/error_of.h"

using grpo::grpo::TrainConfig;
using json = nlohmann::json;

namespace {
// The message of the grpo::Error that f throws, or "" if it throws none.
QString error_of(const std::function<void()>& f) {
  std::string m = grpo::testing::error_of(f);
  return m == "(no error)" ? QString() : QString::fromStdString(m);
}
}  // namespace

class TestConfig : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void unknownKeyNamesNearest() {
    TrainConfig c;
    QString msg = error_of([&] { c.apply(json{{"learnig_rate", 1e-5}}, "run.yaml"); });
    QVERIFY2(msg.contains("run.yaml") && msg.contains("unknown key \"learnig_rate\"") &&
                 msg.contains("did you mean \"learning_rate\"?"), qPrintable(msg));
  }
  void badValuesNameKeyValueAndRange() {
    TrainConfig c;
    QString msg = error_of([&] { c.apply(json{{"temperature", -1}}, "cfg.json"); });
    QVERIFY2(msg.contains("cfg.json") && msg.contains("\"temperature\"") && msg.contains("-1") &&
                 msg.contains("(0, 100]"), qPrintable(msg));
    msg = error_of([&] { c.apply(json{{"num_generations", 2.5}}, "cfg.json"); });
    QVERIFY2(msg.contains("an integer"), qPrintable(msg));
    QVERIFY2(msg.contains("[2, 4096]"), qPrintable(msg));
    msg = error_of([&] { c.apply(json{{"loss_type", "dapoo"}}, "cfg.json"); });
    QVERIFY2(msg.contains("one of \"grpo\", \"bnpo\", \"dr_grpo\", \"dapo\"") && msg.contains("did you mean \"dapo\"?"),
             qPrintable(msg));
    msg = error_of([&] { c.apply(json{{"use_rslora", "yes"}}, "cfg.json"); });
    QVERIFY2(msg.contains("true or false"), qPrintable(msg));
  }
  // Issue 18: a retune of top_k to 1e300 reached a double -> int64 cast (UB); integer keys now
  // hold only exactly representable integers, and top_k has a range.
  void hugeIntegersAreRefusedBeforeTheCast() {
    TrainConfig c;
    QString msg = error_of([&] { c.apply(json{{"top_k", 1e300}}, "retune"); });
    QVERIFY2(msg.contains("top_k"), qPrintable(msg));
    msg = error_of([&] { c.apply(json{{"token_budget", 1e300}}, "retune"); });  // bounded since issue 28
    QVERIFY2(msg.contains("token_budget") && msg.contains("16777216"), qPrintable(msg));
    msg = error_of([&] { c.apply(json{{"max_steps", 1e300}}, "retune"); });  // no upper bound: the 2^53 rule
    QVERIFY2(msg.contains("max_steps") && msg.contains("2^53"), qPrintable(msg));
    msg = error_of([&] { c.apply(json{{"seed", 9.3e18}}, "cfg.json"); });
    QVERIFY2(msg.contains("2^53"), qPrintable(msg));
    c.apply(json{{"top_k", 50}, {"seed", 9007199254740992.0}}, "cfg.json");
    QCOMPARE(c.top_k, int64_t(50));
    QCOMPARE(c.seed, int64_t(9007199254740992));
  }
  void rejectedChangeLeavesConfigUntouched() {
    TrainConfig c;
    const double lr = c.learning_rate;
    QVERIFY(!error_of([&] { c.apply(json{{"learning_rate", 3e-4}, {"top_p", 2.0}}, "retune"); }).isEmpty());
    QCOMPARE(c.learning_rate, lr);
    c.apply(json{{"learning_rate", 3e-4}, {"epsilon_high", 0.28}}, "retune");
    QCOMPARE(c.learning_rate, 3e-4);
    QCOMPARE(c.epsilon_high_value(), 0.28);
    c.apply(json{{"epsilon_high", nullptr}}, "retune");
    QCOMPARE(c.epsilon_high_value(), c.epsilon);
  }
  void yamlFileLoadsWithTypes() {
    QTemporaryDir dir;
    std::string path = dir.path().toStdString() + "/run.yaml";
    grpo::write_file_atomic(path,
                            "model_name_or_path: /models/qwen\n"
                            "task: arith\n"
                            "learning_rate: 1e-5\n"
                            "num_generations: 4\n"
                            "use_rslora: true\n"
                            "target_modules: [q_proj, v_proj]\n"
                            "reward_funcs:\n  - name: accuracy\n  - {name: format, pattern: \"\\\\d+\"}\n"
                            "reward_weights: [1.0, 0.5]\n");
    auto c = grpo::grpo::load_train_config(path);
    QCOMPARE(c.learning_rate, 1e-5);
    QCOMPARE(c.num_generations, int64_t(4));
    QVERIFY(c.use_rslora);
    QCOMPARE(c.target_modules, json({"q_proj", "v_proj"}));
    QCOMPARE(c.reward_funcs.size(), size_t(2));
    QCOMPARE(c.reward_funcs[1]["pattern"].get<std::string>(), std::string("\\d+"));
    // The resolved config round-trips through to_json.
    TrainConfig d;
    d.apply(c.to_json(), "resolved");
    QCOMPARE(d.to_json(), c.to_json());
  }
  // yaml-cpp recurses per flow level: a deep YAML file is refused by name before it is loaded
  // (it used to overflow the stack); comments and ordinary flow values are not counted against it.
  void deepYamlIsRefusedBeforeLoading() {
    QTemporaryDir dir;
    const std::string path = dir.path().toStdString() + "/deep.yaml";
    grpo::write_file_atomic(path, "task: arith\ntarget_modules: " + std::string(100000, '[') + "\n");
    const QString e = error_of([&] { grpo::grpo::load_train_config(path); });
    QVERIFY2(e.contains(QString::fromStdString(path)) && e.contains("YAML nested deeper than 64 levels"), qPrintable(e));
    QVERIFY(error_of([] { grpo::grpo::parse_set_options({"target_modules=" + std::string(1000, '[')}); })
                .contains("--set target_modules"));
    const std::string ok = dir.path().toStdString() + "/ok.yaml";
    grpo::write_file_atomic(ok, "model_name_or_path: /models/qwen\ntask: arith  # " + std::string(200, '[') + "\ntarget_modules: [q_proj, v_proj]\nreward_funcs: [{name: accuracy}]\n");
    QCOMPARE(error_of([&] { grpo::grpo::load_train_config(ok); }), QString());
  }

  void crossFieldValidation() {
    QTemporaryDir dir;
    std::string path = dir.path().toStdString() + "/run.json";
    grpo::write_file_atomic(path, R"({"model_name_or_path": "m", "task": "arith", "target_modules": ["q_proj", "qproj"]})");
    QString msg = error_of([&] { grpo::grpo::load_train_config(path); });
    QVERIFY2(msg.contains("run.json") && msg.contains("\"qproj\"") && msg.contains("did you mean \"q_proj\"?"), qPrintable(msg));
    grpo::write_file_atomic(path, R"({"model_name_or_path": "m"})");
    msg = error_of([&] { grpo::grpo::load_train_config(path); });
    QVERIFY2(msg.contains("train_file"), qPrintable(msg));
    grpo::write_file_atomic(path, "{\"model_name_or_path\": ");
    msg = error_of([&] { grpo::grpo::load_train_config(path); });
    QVERIFY2(msg.contains("run.json") && msg.contains("invalid JSON"), qPrintable(msg));
  }
  // Issue 18: stop strings are matched at every step; a run asks no more of them than a worker
  // takes (32, each at most 1024 bytes), so it is refused before it starts.
  void stopStringsAreBounded() {
    grpo::grpo::TrainConfig c;
    c.model_name_or_path = "m";
    c.task = "arith";
    c.stop.assign(32, "x");
    c.stop[0] = std::string(1024, 'y');
    c.validate("run.yaml");
    c.stop.push_back("z");
    QString msg = error_of([&] { c.validate("run.yaml"); });
    QVERIFY2(msg.contains("run.yaml") && msg.contains("\"stop\"") && msg.contains("33 stop strings"), qPrintable(msg));
    c.stop.assign(1, std::string(1025, 'y'));
    msg = error_of([&] { c.validate("run.yaml"); });
    QVERIFY2(msg.contains("1025 bytes"), qPrintable(msg));
  }

  void chatTemplateKwargs() {
    // TRL's chat_template_kwargs: an object of template variables, kept through the resolved config.
    TrainConfig c;
    c.apply(json{{"model_name_or_path", "m"}, {"task", "arith"}, {"chat_template_kwargs", {{"enable_thinking", false}}}}, "run.yaml");
    c.validate("run.yaml");
    QCOMPARE(c.chat_template_kwargs.dump(), std::string("{\"enable_thinking\":false}"));
    QCOMPARE(c.to_json()["chat_template_kwargs"].dump(), std::string("{\"enable_thinking\":false}"));
    TrainConfig bad;
    bad.apply(json{{"model_name_or_path", "m"}, {"task", "arith"}, {"chat_template_kwargs", "enable_thinking"}}, "run.yaml");
    QString msg = error_of([&] { bad.validate("run.yaml"); });
    QVERIFY2(msg.contains("chat_template_kwargs") && msg.contains("expected an object"), qPrintable(msg));
    TrainConfig reserved;
    reserved.apply(json{{"model_name_or_path", "m"}, {"task", "arith"}, {"chat_template_kwargs", {{"messages", json::array()}}}}, "run.yaml");
    msg = error_of([&] { reserved.validate("run.yaml"); });
    QVERIFY2(msg.contains("\"messages\" is set from each prompt"), qPrintable(msg));
  }
  void retunableKeys() {
    QVERIFY(grpo::grpo::is_retunable("learning_rate"));
    QVERIFY(grpo::grpo::is_retunable("max_staleness"));
    QVERIFY(!grpo::grpo::is_retunable("r"));
    QVERIFY(!grpo::grpo::is_retunable("no_such_key"));
    TrainConfig c;
    c.max_staleness = 0;
    c.prompts_per_step = 2;
    c.num_generations = 8;
    QCOMPARE(c.resolved_max_inflight_tasks(), int64_t(16));  // the floor of 1 keeps staleness 0 alive
  }
};

QTEST_GUILESS_MAIN(TestConfig)
#include "test_config.moc"
