// The app's forms read the config key table: the setup page lists whatever presets
// resources/presets/ holds (titled by their "# title:" line) and applies them; its hyperparameter
// fields sit under the table's groups with the table's docs and ranges as tooltips; the retune
// dialog edits exactly the retunable keys, each with its range and doc. Offscreen widgets.
#include "tests/common/test_paths.h"
#include <QApplication>
#include <QAbstractItemModel>
#include <QComboBox>
#include <QCompleter>
#include <QDir>
#include <QFile>
#include <QGroupBox>
#include <QLabel>
#include <QLineEdit>
#include <QTemporaryDir>
#include <QtTest>

#include "core/grpo/config.h"
#include "ui/retune_dialog.h"
#include "ui/setup_page.h"

using grpo::ui::RetuneDialog;
using grpo::ui::SetupPage;
using json = nlohmann::json;

namespace {

QString text_of(const json& v) {
  return v.is_string() ? QString::fromStdString(v.get<std::string>()) : QString::fromStdString(v.dump());
}

}  // namespace

class TestSetupPresets : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void initTestCase() { qputenv("GRPO_RESOURCES", GRPO_RESOURCES); }

  void presetsComeFromTheFolder() {
    SetupPage page;
    auto* combo = page.findChild<QComboBox*>("preset");
    QVERIFY(combo);
    const auto presets = grpo::ui::available_presets();
    QCOMPARE(combo->count(), int(presets.size()));
    QCOMPARE(combo->itemData(0).toString(), QString("demo"));  // first: the one the app opens with
    QCOMPARE(combo->itemText(0), QString("Demo (tiny-arith, arithmetic)"));
    QVERIFY(combo->findData("cpu") > 0 && combo->itemText(combo->findData("cpu")) == "CPU (small model)");
    QVERIFY(combo->findData("gpu") > 0 && combo->itemText(combo->findData("gpu")) == "Small GPU (1-3B model)");

    // A hyperparameter preset goes over the form: the model and task stay the demo's.
    page.loadPreset("demo");
    const QString model = page.findChild<QLineEdit*>("modelFolder")->text();
    page.loadPreset("cpu");
    QCOMPARE(combo->currentData().toString(), QString("cpu"));
    const json cpu = grpo::grpo::load_config_file(std::string(GRPO_RESOURCES) + "/presets/cpu.yaml");
    for (const auto& [key, value] : cpu.items()) {
      QVERIFY2(page.field(key), key.c_str());
      QCOMPARE(json::parse(page.field(key)->text().toStdString(), nullptr, false).dump(), value.dump());
    }
    QCOMPARE(page.findChild<QLineEdit*>("modelFolder")->text(), model);
    grpo::grpo::TrainConfig cfg;
    QString err;
    QVERIFY2(page.buildConfig(cfg, &err), qPrintable(err));
    QCOMPARE(cfg.token_budget, int64_t(1024));
    QCOMPARE(cfg.task, std::string("arith"));
  }

  void aNewPresetFileIsListed() {
    QTemporaryDir res;
    QVERIFY(QDir(res.path()).mkpath("presets"));
    QFile f(res.filePath("presets/mine.yaml"));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("# title: My preset\nlearning_rate: 0.003\ntemperature: 0.6\n");
    f.close();
    QFile bad(res.filePath("presets/broken.yaml"));
    QVERIFY(bad.open(QIODevice::WriteOnly));
    bad.write("# title: Broken\nlearnig_rate: 0.003\n");
    bad.close();
    qputenv("GRPO_RESOURCES", res.path().toLocal8Bit());
    SetupPage page;
    auto* combo = page.findChild<QComboBox*>("preset");
    QCOMPARE(combo->itemText(combo->findData("mine")), QString("My preset"));
    page.loadPreset("mine");
    QCOMPARE(page.field("learning_rate")->text(), QString("0.003"));
    QCOMPARE(page.field("temperature")->text(), QString("0.6"));
    page.loadPreset("broken");  // refused in place, naming the file and the nearest key
    const QString status = page.findChild<QLabel*>("formStatus")->text();
    QVERIFY2(status.contains("broken") && status.contains("learning_rate"), qPrintable(status));
    QCOMPARE(page.field("learning_rate")->text(), QString("0.003"));
    qputenv("GRPO_RESOURCES", GRPO_RESOURCES);
  }

  void fieldsFollowTheTable() {
    SetupPage page;
    int fields = 0;
    for (const auto& k : grpo::grpo::train_config_schema()) {
      QLineEdit* edit = page.field(k.name);
      // A field exactly for the rows marked on_form; the others (model, data, rewards, run
      // directory, workers) have their own widgets or are set in a config file.
      QCOMPARE(edit != nullptr, k.on_form);
      if (!edit) continue;
      ++fields;
      // A closed set of values is offered as the user types, from the row's choices.
      QCOMPARE(edit->completer() != nullptr, !k.range.choices.empty());
      if (edit->completer()) {
        QStringList offered;
        for (int i = 0; i < edit->completer()->model()->rowCount(); ++i)
          offered << edit->completer()->model()->index(i, 0).data().toString();
        QStringList choices;
        for (const auto& c : k.range.choices) choices << QString::fromStdString(c);
        QCOMPARE(offered, choices);
      }
      QVERIFY2(edit->toolTip().contains(QString::fromStdString(k.doc).toHtmlEscaped()), k.name.c_str());
      if (!k.range_text().empty()) {
        QVERIFY2(edit->toolTip().contains(QString::fromStdString(k.range_text()).toHtmlEscaped()), k.name.c_str());
        QCOMPARE(edit->placeholderText(), QString::fromStdString(k.range_text()));
      }
      auto* box = page.findChild<QGroupBox*>(QString::fromStdString("group:" + k.group));
      QVERIFY2(box && box->isAncestorOf(edit), k.name.c_str());
    }
    QCOMPARE(fields, 37);  // the form as the team chose it (config.cpp, kForm)
    QVERIFY(page.field("loss_type")->completer() && page.field("epsilon_high"));
    QVERIFY(page.field("temperature")->toolTip().contains("Can be retuned"));
    QVERIFY(!page.field("r")->toolTip().contains("Can be retuned"));
  }

  void retuneDialogEditsTheRetunableKeys() {
    json current = {{"learning_rate", 0.001}, {"temperature", 1.0}, {"r", 8}};
    RetuneDialog dlg(current, [](const json&) { return QString(); });
    int n = 0;
    for (const auto& k : grpo::grpo::train_config_schema()) {
      QLineEdit* edit = dlg.field(k.name);
      QCOMPARE(edit != nullptr, k.retunable);
      if (!edit) continue;
      ++n;
      QCOMPARE(edit->placeholderText(), QString::fromStdString(k.range_text()));
      QVERIFY2(edit->toolTip().contains(QString::fromStdString(k.doc).toHtmlEscaped()), k.name.c_str());
      if (current.contains(k.name)) QCOMPARE(edit->text(), text_of(current[k.name]));
    }
    QVERIFY(n >= 10);
  }
};

QTEST_MAIN(TestSetupPresets)
#include "test_setup_presets.moc"
