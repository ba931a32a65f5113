// The config schema at the CLI, run as a user runs it (the built `grpo` binary): `--help-config`
// of train and sft, `--set KEY=VALUE`, and the exit statuses a scheduler reads: 2 for usage errors
// (bad flags, bad config values), 130 / 143 after a graceful stop on SIGINT / SIGTERM. Also the
// SftConfig key table (core/run/sft_config.h), built on the same machinery as TrainConfig's.
#include "tests/common/test_paths.h"
#include <QDir>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <csignal>
#include <map>
#include <set>

#include "core/common/error.h"
#include "core/grpo/config.h"
#include "core/run/sft_config.h"
#include "tests/common/run_cli.h"
#include "tests/common/child_process.h"

using json = nlohmann::json;

namespace {


bool contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

}  // namespace

class TestConfigCli : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void helpConfigListsTheTable() {
    auto r = run_cli({"train", "--help-config"});  // no config file needed
    QVERIFY2(r.code == 0, r.out.c_str());
    for (const char* s : {"\ngeneration:\n", "\nGRPO loss:\n", "\nLoRA:\n", "\nasync engine:\n", "  learning_rate (number",
                          "[retunable]", "Initial learning rate"})
      QVERIFY2(contains(r.out, s), (std::string(s) + " missing from:\n" + r.out).c_str());
    for (const auto& k : grpo::grpo::train_config_schema()) QVERIFY2(contains(r.out, "  " + k.name + " ("), k.name.c_str());

    r = run_cli({"sft", "--help-config"});
    QVERIFY2(r.code == 0, r.out.c_str());
    QVERIFY2(contains(r.out, "  use_lora (boolean; default true)") && contains(r.out, "\noptimisation:\n"), r.out.c_str());
  }

  void setAppliesAfterTheConfig() {
    auto r = run_cli({"train", "--demo", "--set", "learning_rate=0.01", "--set", "learning_rate=0.02", "--set",
                      "target_modules=[q_proj, v_proj]", "--steps", "7", "--set", "max_steps=9", "--print-config"});
    QVERIFY2(r.code == 0, r.out.c_str());
    const json j = json::parse(r.out.substr(r.out.find('{')));
    QCOMPARE(j["learning_rate"], json(0.02));  // repeated: the last wins
    QCOMPARE(j["target_modules"], json({"q_proj", "v_proj"}));
    QCOMPARE(j["max_steps"], json(9));        // after the options
    QCOMPARE(j["task"], json("arith"));       // the rest from the demo's file
  }

  void usageErrorsExit2() {
    auto r = run_cli({"train", "--no-such-flag"});
    QVERIFY2(r.code == 2, r.out.c_str());
    r = run_cli({"--no-such-flag"});
    QVERIFY2(r.code == 2, r.out.c_str());
    r = run_cli({});  // no command
    QVERIFY2(r.code == 2, r.out.c_str());
    r = run_cli({"train", "--demo", "--set", "learnig_rate=0.1"});
    QVERIFY2(r.code == 2 && contains(r.out, "--set") && contains(r.out, "did you mean \"learning_rate\"?"), r.out.c_str());
    r = run_cli({"train", "--demo", "--set", "temperature=-1"});
    QVERIFY2(r.code == 2 && contains(r.out, "\"temperature\"") && contains(r.out, "(0, 100]"), r.out.c_str());
    r = run_cli({"train", "--demo", "--set", "temperature"});
    QVERIFY2(r.code == 2 && contains(r.out, "KEY=VALUE"), r.out.c_str());
    r = run_cli({"train", "--demo", "--resume", "somewhere"});  // two sources
    QVERIFY2(r.code == 2, r.out.c_str());
    QTemporaryDir tmp;
    const QString bad = tmp.filePath("bad.yaml");
    QFile f(bad);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("model_name_or_path: m\ntask: arith\nnum_generations: 1\n");
    f.close();
    r = run_cli({"train", bad});
    QVERIFY2(r.code == 2 && contains(r.out, "bad.yaml") && contains(r.out, "\"num_generations\"") &&
                 contains(r.out, "[2, 4096]"), r.out.c_str());
    r = run_cli({"sft", "--task", "arith", "--model", "m", "--output", tmp.filePath("o"), "--set", "r=eight"});
    QVERIFY2(r.code == 2 && contains(r.out, "key \"r\""), r.out.c_str());
    r = run_cli({"--help"});
    QVERIFY2(r.code == 0 && contains(r.out, "Exit status") && contains(r.out, "130"), r.out.c_str());
  }

  // A graceful stop on a signal: final checkpoint and adapter, then 130 (SIGINT) or 143 (SIGTERM).
  void signalsStopGracefullyWithTheirStatus_data() {
    QTest::addColumn<int>("sig");
    QTest::addColumn<int>("status");
    QTest::newRow("SIGINT") << int(SIGINT) << 130;
    QTest::newRow("SIGTERM") << int(SIGTERM) << 143;
  }
  void signalsStopGracefullyWithTheirStatus() {
    QFETCH(int, sig);
    QFETCH(int, status);
    QTemporaryDir tmp;
    grpo::testing::ChildProcess child;
    child.p.setProcessChannelMode(QProcess::MergedChannels);
    child.p.start(GRPO_CLI, {"train", "--demo", "--output", tmp.filePath("run"), "--set", "prompts_per_step=4",
                             "--set", "eval_steps=0", "--set", "save_steps=0"});
    QVERIFY(child.p.waitForStarted(10000));
    QByteArray out;
    QElapsedTimer t;
    t.start();
    while (!out.contains("step 1/") && t.elapsed() < 120000 && child.p.state() == QProcess::Running) {
      child.p.waitForReadyRead(200);
      out += child.p.readAll();
    }
    QVERIFY2(out.contains("step 1/"), out.constData());
    QCOMPARE(::kill(static_cast<pid_t>(child.p.processId()), sig), 0);
    QVERIFY2(child.p.waitForFinished(120000), "no graceful stop within 120 s");
    out += child.p.readAll();
    QVERIFY2(child.p.exitStatus() == QProcess::NormalExit, out.constData());
    QVERIFY2(child.p.exitCode() == status, (std::to_string(child.p.exitCode()) + "\n" + out.toStdString()).c_str());
    QVERIFY2(out.contains("stopped; final adapter: "), out.constData());
  }

  // SftConfig's table: the same machinery, one row per key, its own defaults.
  void sftTable() {
    const auto& schema = grpo::run::sft_config_schema();
    const json defaults = grpo::run::SftConfig{}.to_json();
    std::set<std::string> names;
    for (const auto& k : schema) {
      QVERIFY2(names.insert(k.name).second, k.name.c_str());
      QVERIFY2(k.default_value == defaults[k.name], k.name.c_str());
      QVERIFY2(!k.doc.empty() && !k.group.empty(), k.name.c_str());
    }
    QCOMPARE(names.size(), defaults.size());
    grpo::run::SftConfig c;
    c.apply(grpo::grpo::parse_set_options({"learning_rate=2e-3", "use_lora=false"}), "--set");
    QCOMPARE(c.learning_rate, 2e-3);
    QVERIFY(!c.use_lora);
    try {
      c.apply({{"lora_dropout", 1.5}}, "sft.yaml");
      QFAIL("expected an error");
    } catch (const grpo::Error& e) {
      const std::string m = e.what();
      QVERIFY2(contains(m, "sft.yaml") && contains(m, "\"lora_dropout\"") && contains(m, "[0, 1)"), m.c_str());
    }
  }

  // A run folder whose config.json was edited by hand (or written by another tool) with mistyped
  // keys: `grpo status` still reports the run (the mistyped keys show as unknown), and
  // `grpo export` refuses with the file, the key and what was expected. Both printed nlohmann's
  // "[json.exception.type_error.302] type must be string, but is number" before.
  void mistypedRecordedConfigIsNamedNotThrown() {
    QTemporaryDir tmp;
    const QString run = tmp.filePath("run");
    QVERIFY(QDir().mkpath(run));
    QFile f(run + "/config.json");
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(R"({"model_name_or_path": 5, "max_steps": "ten", "num_generations": 1.5})");
    f.close();
    auto st = run_cli({"status", run}, 60000);
    const QString so = QString::fromStdString(st.out);
    QVERIFY2(st.code == 0, qPrintable(so));
    QVERIFY2(so.contains("created") && !so.contains("json.exception"), qPrintable(so));
    auto ex = run_cli({"export", "--run", run, "--out", tmp.filePath("peft")}, 60000);
    const QString eo = QString::fromStdString(ex.out);
    QCOMPARE(ex.code, 1);
    QVERIFY2(eo.contains("config.json") && eo.contains("model_name_or_path") && eo.contains("string") &&
                 !eo.contains("json.exception"),
             qPrintable(eo));
  }

  // A key that GRPO and SFT share has one range (core/grpo/shared_ranges.h): before, SFT took a
  // learning_rate of 5 that `grpo train` refused. The keys that mean something else in SFT are
  // named here (max_steps <= 0 and max_grad_norm <= 0 mean something in SFT, token_budget 0 in
  // GRPO); any other difference fails.
  void sharedKeysHaveOneRange() {
    const std::set<std::string> own_meaning = {"max_steps", "max_grad_norm", "token_budget"};
    std::map<std::string, const grpo::grpo::ConfigKeyInfo*> grpo_keys;
    for (const auto& k : grpo::grpo::train_config_schema()) grpo_keys[k.name] = &k;
    int shared = 0;
    std::string differ;
    for (const auto& k : grpo::run::sft_config_schema()) {
      const auto it = grpo_keys.find(k.name);
      if (it == grpo_keys.end() || own_meaning.count(k.name)) continue;
      ++shared;
      if (k.range_text() != it->second->range_text())
        differ += k.name + ": SFT " + k.range_text() + ", GRPO " + it->second->range_text() + "; ";
    }
    QVERIFY2(differ.empty(), differ.c_str());
    QVERIFY2(shared >= 15, std::to_string(shared).c_str());  // the LoRA, optimiser and run keys
    grpo::run::SftConfig c;
    const std::string refused = [&] {
      try {
        c.apply({{"learning_rate", 5}}, "sft.yaml");
      } catch (const grpo::Error& e) {
        return std::string(e.what());
      }
      return std::string("(accepted)");
    }();
    QVERIFY2(contains(refused, "learning_rate") && contains(refused, "(0, 1]"), refused.c_str());
  }
};

QTEST_GUILESS_MAIN(TestConfigCli)
#include "test_config_cli.moc"
