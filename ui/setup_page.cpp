#include "ui/setup_page.h"

#include <algorithm>

#include <QComboBox>
#include <QCompleter>
#include <QDir>
#include <QDragEnterEvent>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMimeData>
#include <QPushButton>
#include <QScrollArea>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>

#include "core/api/util.h"
#include "core/api/resources.h"
#include "core/api/setup.h"

namespace grpo::ui {
namespace {

using json = nlohmann::json;

// The hyperparameter fields are generated from the key table (core/grpo/config_schema.h): the rows
// marked on_form, under their groups, in its order, with its docs, ranges and choices. The model,
// data, rewards and run directory have their own widgets above and below.
bool nullable_key(const std::string& key) {
  const auto* k = ::grpo::grpo::find_config_key(::grpo::grpo::train_config_schema(), key);
  return k && k->nullable;
}

// A text key whose default is "" (hub_model_id): an empty field is that default, not a gap.
bool empty_is_default(const std::string& key) {
  const auto* k = ::grpo::grpo::find_config_key(::grpo::grpo::train_config_schema(), key);
  return k && k->default_value == json("");
}

// "async engine" -> "Async engine"; "GRPO loss" stays.
QString group_title(const std::string& group) {
  QString t = QString::fromStdString(group);
  if (!t.isEmpty()) t[0] = t[0].toUpper();
  return t;
}

// A preset file's title: its first line "# title: ...", else its name.
QString preset_title(const QString& path, const QString& name) {
  QFile f(path);
  if (f.open(QIODevice::ReadOnly)) {
    const QString first = QString::fromUtf8(f.readLine()).trimmed();
    if (first.startsWith("#")) {
      const QString rest = first.mid(1).trimmed();
      if (rest.startsWith("title:")) return rest.mid(6).trimmed();
    }
  }
  return name;
}

QString json_to_text(const json& v) {
  if (v.is_string()) return QString::fromStdString(v.get<std::string>());
  if (v.is_null()) return QString();
  return QString::fromStdString(v.dump());
}

json text_to_json(const QString& text) {
  const std::string s = text.trimmed().toStdString();
  if (s.empty()) return json();
  auto j = json::parse(s, nullptr, false);
  return j.is_discarded() ? json(s) : j;
}

const char* kError = "color: #c62828;";

}  // namespace

QString resources_dir() { return QString::fromStdString(::grpo::resources_dir()); }

QList<Preset> available_presets() {
  QList<Preset> out;
  const QDir dir(QDir(resources_dir()).filePath("presets"));
  for (const QFileInfo& fi : dir.entryInfoList({"*.yaml", "*.yml", "*.json"}, QDir::Files, QDir::Name)) {
    const QString name = fi.completeBaseName();
    Preset p{name, preset_title(fi.filePath(), name), fi.filePath()};
    if (name == "demo") out.prepend(p);  // the one the app opens with comes first
    else out.append(p);
  }
  return out;
}

json preset_config_json(const QString& name) {
  for (const Preset& p : available_presets()) {
    if (p.name != name) continue;
    json j = ::grpo::grpo::load_config_file(p.path.toStdString());
    // A relative model folder is one shipped in resources/ (the demo's models/tiny-arith).
    const std::string model = j.is_object() ? j.value("model_name_or_path", std::string()) : std::string();
    const std::string shipped = path_join(resources_dir().toStdString(), model);
    if (!model.empty() && model.front() != '/' && file_exists(shipped)) j["model_name_or_path"] = shipped;
    return j;
  }
  throw Error(QDir(resources_dir()).filePath("presets").toStdString(), "no preset \"" + name.toStdString() + "\"");
}

json demo_config_json() { return preset_config_json("demo"); }

QString SetupPage::describeKey(const std::string& key) {
  const auto* k = ::grpo::grpo::find_config_key(::grpo::grpo::train_config_schema(), key);
  QString tip = "<b>" + QString::fromStdString(key) + "</b>";
  if (!k) return tip;
  tip += "<br>" + QString::fromStdString(k->doc).toHtmlEscaped();
  const std::string range = k->range_text();
  tip += "<br>" + QString::fromStdString(k->type).toHtmlEscaped();
  if (!range.empty()) tip += "; allowed: " + QString::fromStdString(range).toHtmlEscaped();
  tip += "; default " + QString::fromStdString(k->default_value.dump()).toHtmlEscaped();
  if (k->retunable) tip += "<br><i>Can be retuned on a live run.</i>";
  return tip;
}

SetupPage::SetupPage(QWidget* parent) : QWidget(parent) {
  setAcceptDrops(true);
  auto* content = new QWidget;
  auto* col = new QVBoxLayout(content);

  // Presets and config files.
  auto* top = new QHBoxLayout;
  preset_ = new QComboBox;
  preset_->setObjectName("preset");
  for (const Preset& p : available_presets()) {  // whatever resources/presets/ holds
    preset_->addItem(p.title, p.name);
    preset_->setItemData(preset_->count() - 1, p.path, Qt::ToolTipRole);
  }
  auto* apply_preset = new QPushButton(tr("Apply preset"));
  auto* load = new QPushButton(tr("Load config..."));
  auto* save = new QPushButton(tr("Save config..."));
  top->addWidget(new QLabel(tr("Preset:")));
  top->addWidget(preset_);
  top->addWidget(apply_preset);
  top->addStretch(1);
  top->addWidget(load);
  top->addWidget(save);
  col->addLayout(top);
  connect(apply_preset, &QPushButton::clicked, this, [this] { loadPreset(preset_->currentData().toString()); });
  connect(load, &QPushButton::clicked, this, [this] {
    QString p = QFileDialog::getOpenFileName(this, tr("Load run config"), QString(), tr("Config (*.json *.yaml *.yml)"));
    QString err;
    if (!p.isEmpty() && !loadConfigFile(p, &err)) formStatus_->setText(err);
  });
  connect(save, &QPushButton::clicked, this, [this] {
    QString p = QFileDialog::getSaveFileName(this, tr("Save run config"), "run.json", tr("JSON config (*.json)"));
    QString err;
    if (!p.isEmpty() && !saveConfigFile(p, &err)) formStatus_->setText(err);
  });

  // Model.
  auto* model_box = new QGroupBox(tr("Model (Hugging Face folder: config.json, *.safetensors, tokenizer.json)"));
  auto* mlay = new QVBoxLayout(model_box);
  auto* mrow = new QHBoxLayout;
  model_ = new QLineEdit;
  model_->setObjectName("modelFolder");
  model_->setPlaceholderText(tr("Pick or drop a model folder, or type a Hub repo id (org/name) from the cache"));
  auto* browse = new QPushButton(tr("Browse..."));
  mrow->addWidget(model_, 1);
  mrow->addWidget(browse);
  mlay->addLayout(mrow);
  modelStatus_ = new QLabel;
  modelStatus_->setObjectName("modelStatus");
  modelStatus_->setWordWrap(true);
  modelStatus_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  QFont mono("monospace");
  mono.setStyleHint(QFont::Monospace);
  modelStatus_->setFont(mono);
  mlay->addWidget(modelStatus_);
  col->addWidget(model_box);
  modelTimer_ = new QTimer(this);
  modelTimer_->setSingleShot(true);
  modelTimer_->setInterval(250);
  connect(modelTimer_, &QTimer::timeout, this, &SetupPage::validateModel);
  connect(model_, &QLineEdit::textChanged, this, [this] { modelTimer_->start(); Q_EMIT configChanged(); });
  connect(browse, &QPushButton::clicked, this, [this] {
    QString d = QFileDialog::getExistingDirectory(this, tr("Model folder"), model_->text());
    if (!d.isEmpty()) setModelFolder(d);
  });

  // Dataset.
  auto* data_box = new QGroupBox(tr("Dataset"));
  auto* dlay = new QVBoxLayout(data_box);
  auto* drow = new QHBoxLayout;
  task_ = new QComboBox;
  task_->setObjectName("task");
  task_->addItem(tr("Built-in arithmetic"), "arith");
  task_->addItem(tr("Prompt file (JSONL, CSV or Parquet)"), "");
  task_->addItem(tr("Hub dataset (repo id or folder)"), "hub");
  trainFile_ = new QLineEdit;
  trainFile_->setObjectName("trainFile");
  trainFile_->setPlaceholderText(tr("train.jsonl: prompt (or messages), answer, other columns for the rewards"));
  datasetConfig_ = new QLineEdit;
  datasetConfig_->setObjectName("datasetConfig");
  datasetConfig_->setPlaceholderText(tr("config (default)"));
  datasetConfig_->setToolTip(describeKey("dataset_config"));
  datasetSplit_ = new QLineEdit("train");
  datasetSplit_->setObjectName("datasetSplit");
  datasetSplit_->setToolTip(describeKey("dataset_train_split"));
  datasetColumns_ = new QLineEdit;
  datasetColumns_->setObjectName("datasetColumns");
  datasetColumns_->setPlaceholderText(tr("renames, e.g. {\"question\": \"prompt\"}"));
  datasetColumns_->setToolTip(describeKey("dataset_columns"));
  auto* dbrowse = new QPushButton(tr("Browse..."));
  drow->addWidget(task_);
  drow->addWidget(trainFile_, 1);
  drow->addWidget(dbrowse);
  dlay->addLayout(drow);
  auto* hrow = new QHBoxLayout;
  hrow->addWidget(new QLabel(tr("Config")));
  hrow->addWidget(datasetConfig_);
  hrow->addWidget(new QLabel(tr("Split")));
  hrow->addWidget(datasetSplit_);
  hrow->addWidget(new QLabel(tr("Columns")));
  hrow->addWidget(datasetColumns_, 1);
  dlay->addLayout(hrow);
  datasetStatus_ = new QLabel;
  datasetStatus_->setObjectName("datasetStatus");
  datasetStatus_->setWordWrap(true);
  dlay->addWidget(datasetStatus_);
  preview_ = new QTableWidget(0, 3);
  preview_->setObjectName("datasetPreview");
  preview_->setHorizontalHeaderLabels({tr("#"), tr("prompt"), tr("answer")});
  preview_->horizontalHeader()->setSectionResizeMode(1, QHeaderView::Stretch);
  preview_->verticalHeader()->hide();
  preview_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  preview_->setMaximumHeight(150);
  dlay->addWidget(preview_);
  col->addWidget(data_box);
  connect(task_, &QComboBox::currentIndexChanged, this, [this] {
    updateDatasetFields();
    refreshPreview();
    Q_EMIT configChanged();
  });
  for (QLineEdit* e : {trainFile_, datasetConfig_, datasetSplit_, datasetColumns_})
    connect(e, &QLineEdit::editingFinished, this, [this] { refreshPreview(); Q_EMIT configChanged(); });
  connect(dbrowse, &QPushButton::clicked, this, [this] {
    if (task_->currentData().toString() == "hub") {
      QString d = QFileDialog::getExistingDirectory(this, tr("Dataset folder (laid out like a Hub dataset repo)"));
      if (!d.isEmpty()) trainFile_->setText(d);
    } else {
      QString p = QFileDialog::getOpenFileName(this, tr("Prompt dataset"), QString(),
                                               tr("Datasets (*.jsonl *.json *.csv *.parquet)"));
      if (p.isEmpty()) return;
      task_->setCurrentIndex(1);
      trainFile_->setText(p);
    }
    refreshPreview();
  });

  // Rewards.
  auto* rew_box = new QGroupBox(tr("Rewards (weighted sum)"));
  auto* rlay = new QVBoxLayout(rew_box);
  rewards_ = new QTableWidget(0, 2);
  rewards_->setObjectName("rewards");
  rewards_->setHorizontalHeaderLabels({tr("reward function"), tr("weight")});
  rewards_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  rewards_->verticalHeader()->hide();
  rewards_->setMaximumHeight(120);
  QStringList names;
  for (const auto& n : rollout::known_reward_names()) names << QString::fromStdString(n);
  rewards_->setToolTip(tr("Known reward functions: %1").arg(names.join(", ")));
  rlay->addWidget(rewards_);
  auto* rbuttons = new QHBoxLayout;
  auto* add_reward = new QPushButton(tr("Add"));
  auto* remove_reward = new QPushButton(tr("Remove"));
  rbuttons->addWidget(add_reward);
  rbuttons->addWidget(remove_reward);
  rbuttons->addStretch(1);
  rlay->addLayout(rbuttons);
  col->addWidget(rew_box);
  connect(add_reward, &QPushButton::clicked, this, [this] {
    const int row = rewards_->rowCount();
    rewards_->insertRow(row);
    rewards_->setItem(row, 0, new QTableWidgetItem("format"));
    rewards_->setItem(row, 1, new QTableWidgetItem("1"));
  });
  connect(remove_reward, &QPushButton::clicked, this, [this] {
    if (rewards_->currentRow() >= 0) rewards_->removeRow(rewards_->currentRow());
  });

  // Hyperparameters: the form's keys under their groups of the key table, in its order.
  std::vector<std::string> groups;
  for (const auto& k : ::grpo::grpo::train_config_schema())
    if (k.on_form && std::find(groups.begin(), groups.end(), k.group) == groups.end()) groups.push_back(k.group);
  for (const auto& group : groups) {
    auto* box = new QGroupBox(group_title(group));
    box->setObjectName(QString::fromStdString("group:" + group));
    auto* form = new QFormLayout(box);
    for (const auto& k : ::grpo::grpo::train_config_schema()) {
      if (k.group != group || !k.on_form) continue;
      const QString name = QString::fromStdString(k.name);
      auto* edit = new QLineEdit;
      edit->setObjectName("field:" + name);
      const QString tip = describeKey(k.name);
      edit->setToolTip(tip);
      const std::string range = k.range_text();
      if (!range.empty()) edit->setPlaceholderText(QString::fromStdString(range));
      if (!k.range.choices.empty()) {  // a closed set (core/grpo/choices.h): offered as the user types
        QStringList choices;
        for (const auto& c : k.range.choices) choices << QString::fromStdString(c);
        auto* completer = new QCompleter(choices, edit);
        completer->setCompletionMode(QCompleter::UnfilteredPopupCompletion);
        edit->setCompleter(completer);
      }
      auto* err = new QLabel;
      err->setObjectName("fieldError:" + name);
      err->setStyleSheet(kError);
      err->setWordWrap(true);
      err->hide();
      auto* cell = new QWidget;
      auto* cl = new QVBoxLayout(cell);
      cl->setContentsMargins(0, 0, 0, 0);
      cl->setSpacing(1);
      cl->addWidget(edit);
      cl->addWidget(err);
      auto* label = new QLabel(name);
      label->setToolTip(tip);
      form->addRow(label, cell);
      fields_[k.name] = edit;
      errors_[k.name] = err;
      const std::string key = k.name;
      connect(edit, &QLineEdit::textChanged, this, [this, key] {
        if (filling_) return;
        validateField(key);
        Q_EMIT configChanged();
      });
    }
    col->addWidget(box);
  }

  auto* out_box = new QGroupBox(tr("Run directory"));
  auto* olay = new QHBoxLayout(out_box);
  runDir_ = new QLineEdit;
  runDir_->setObjectName("runDir");
  runDir_->setPlaceholderText(tr("empty: a new folder under %1").arg(QDir::home().filePath("grpo-studio-runs")));
  olay->addWidget(runDir_);
  col->addWidget(out_box);
  formStatus_ = new QLabel;
  formStatus_->setObjectName("formStatus");
  formStatus_->setStyleSheet(kError);
  formStatus_->setWordWrap(true);
  col->addWidget(formStatus_);
  col->addStretch(1);

  auto* scroll = new QScrollArea;
  scroll->setWidget(content);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  outer->addWidget(scroll);
}

void SetupPage::loadPreset(const QString& name) {
  json j;
  try {
    j = preset_config_json(name);
    ::grpo::grpo::TrainConfig probe;
    probe.apply(j, QDir(resources_dir()).filePath("presets/" + name).toStdString());  // keys and values
  } catch (const std::exception& e) {
    formStatus_->setText(QString::fromStdString(e.what()));
    return;
  }
  // A preset with a model is a whole setup; one without (hyperparameters only) goes over the form.
  if (!j.contains("model_name_or_path")) {
    json over = configJson();
    over.update(j);
    j = over;
  }
  const int idx = preset_->findData(name);
  if (idx >= 0) preset_->setCurrentIndex(idx);
  setConfigJson(j);
}

void SetupPage::setConfigJson(const json& j) {
  ::grpo::grpo::TrainConfig defaults;
  base_ = defaults.to_json();
  for (const auto& [k, v] : j.items()) base_[k] = v;
  filling_ = true;
  model_->setText(QString::fromStdString(base_.value("model_name_or_path", std::string())));
  const std::string task = base_.value("task", std::string());
  const std::string dataset = base_.value("dataset_name", std::string());
  task_->setCurrentIndex(task == "arith" ? 0 : dataset.empty() ? 1 : 2);
  trainFile_->setText(QString::fromStdString(dataset.empty() ? base_.value("train_file", std::string()) : dataset));
  datasetConfig_->setText(QString::fromStdString(base_.value("dataset_config", std::string())));
  datasetSplit_->setText(QString::fromStdString(base_.value("dataset_train_split", std::string("train"))));
  const json cols = base_.value("dataset_columns", json::object());
  datasetColumns_->setText(cols.is_object() && !cols.empty() ? QString::fromStdString(cols.dump()) : QString());
  updateDatasetFields();
  for (auto& [key, edit] : fields_) edit->setText(base_.contains(key) ? json_to_text(base_[key]) : QString());
  const std::string out = base_.value("output_dir", std::string());
  runDir_->setText(QString::fromStdString(out));
  setRewards(base_.value("reward_funcs", json::array()), base_.value("reward_weights", json::array()));
  filling_ = false;
  for (auto& [key, edit] : fields_) validateField(key);
  formStatus_->clear();
  validateModel();
  refreshPreview();
  Q_EMIT configChanged();
}

void SetupPage::setRewards(const json& funcs, const json& weights) {
  rewards_->setRowCount(0);
  if (!funcs.is_array()) return;
  for (size_t i = 0; i < funcs.size(); ++i) {
    const json& f = funcs[i];
    const int row = rewards_->rowCount();
    rewards_->insertRow(row);
    auto* name = new QTableWidgetItem(QString::fromStdString(f.is_object() ? f.value("name", std::string()) : f.dump()));
    name->setData(Qt::UserRole, QString::fromStdString(f.dump()));  // the whole spec (options kept)
    rewards_->setItem(row, 0, name);
    const double w = weights.is_array() && i < weights.size() && weights[i].is_number() ? weights[i].get<double>() : 1.0;
    rewards_->setItem(row, 1, new QTableWidgetItem(QString::number(w)));
  }
}

json SetupPage::fieldValue(const std::string& key) const {
  auto it = fields_.find(key);
  return it == fields_.end() ? json() : text_to_json(it->second->text());
}

json SetupPage::configJson() const {
  json j = base_;
  j["model_name_or_path"] = model_->text().trimmed().toStdString();
  const std::string task = task_->currentData().toString().toStdString();
  const std::string source = trainFile_->text().trimmed().toStdString();
  j["task"] = task == "arith" ? "arith" : "";
  j["train_file"] = task.empty() ? source : std::string();
  j["dataset_name"] = task == "hub" ? source : std::string();
  j["dataset_config"] = task == "hub" ? datasetConfig_->text().trimmed().toStdString() : std::string();
  const std::string split = datasetSplit_->text().trimmed().toStdString();
  j["dataset_train_split"] = split.empty() ? "train" : split;
  const json cols = json::parse(datasetColumns_->text().trimmed().toStdString(), nullptr, false);
  // Text that is not a JSON object stays as text, so validation names it instead of dropping it.
  j["dataset_columns"] = datasetColumns_->text().trimmed().isEmpty() || task == "arith" ? json::object()
                         : cols.is_discarded() ? json(datasetColumns_->text().toStdString())
                                               : cols;
  for (const auto& [key, edit] : fields_) {
    json v = fieldValue(key);
    if (v.is_null()) {
      if (nullable_key(key)) j[key] = nullptr;  // null is its own value (epsilon_high = epsilon)
      continue;
    }
    j[key] = v;
  }
  json funcs = json::array(), weights = json::array();
  bool all_one = true;
  for (int r = 0; r < rewards_->rowCount(); ++r) {
    auto* name = rewards_->item(r, 0);
    if (!name || name->text().trimmed().isEmpty()) continue;
    json spec = json::parse(name->data(Qt::UserRole).toString().toStdString(), nullptr, false);
    if (!spec.is_object()) spec = json::object();
    spec["name"] = name->text().trimmed().toStdString();
    funcs.push_back(spec);
    auto* w = rewards_->item(r, 1);
    json wv = w ? text_to_json(w->text()) : json(1.0);
    if (!wv.is_number() || wv.get<double>() != 1.0) all_one = false;
    weights.push_back(wv);
  }
  j["reward_funcs"] = funcs;
  j["reward_weights"] = all_one ? json::array() : weights;
  j["output_dir"] = runDir_->text().trimmed().toStdString();
  return j;
}

void SetupPage::validateField(const std::string& key) {
  QLabel* err = errors_.at(key);
  QLineEdit* edit = fields_.at(key);
  QString message;
  json v = fieldValue(key);
  if (v.is_null() && !nullable_key(key) && !empty_is_default(key)) {
    message = tr("a value is needed");
  } else if (!v.is_null()) {
    ::grpo::grpo::TrainConfig probe;
    try {
      probe.apply(json{{key, v}}, "");
    } catch (const Error& e) {
      message = QString::fromStdString(e.message());
    }
  }
  err->setText(message);
  err->setVisible(!message.isEmpty());
  edit->setStyleSheet(message.isEmpty() ? QString() : QString("border: 1px solid #c62828;"));
}

QString SetupPage::fieldError(const std::string& key) const {
  auto it = errors_.find(key);
  return it == errors_.end() ? QString() : it->second->text();
}

void SetupPage::setModelFolder(const QString& dir) {
  model_->setText(dir);
  validateModel();
}

QString SetupPage::modelStatus() const { return modelStatus_->text(); }

void SetupPage::validateModel() {
  modelTimer_->stop();
  const std::string dir = model_->text().trimmed().toStdString();
  if (dir.empty()) {
    modelValid_ = false;
    modelStatus_->setStyleSheet(kError);
    modelStatus_->setText(tr("No model folder chosen."));
    return;
  }
  try {
    // A folder, or a Hub repo id (org/name) in the Hugging Face cache at the config's model_revision.
    const std::string folder =
        file_exists(dir) ? dir : hub::resolve_model_dir(dir, base_.value("model_revision", std::string("main")));
    const json info = model::inspect_model(folder);
    modelValid_ = true;
    modelStatus_->setStyleSheet(QString());
    modelStatus_->setText(QString::fromStdString(model::format_model_summary(info)).trimmed());
  } catch (const std::exception& e) {
    modelValid_ = false;
    modelStatus_->setStyleSheet(kError);
    modelStatus_->setText(QString::fromStdString(e.what()));
  }
}

void SetupPage::updateDatasetFields() {
  const QString mode = task_->currentData().toString();
  trainFile_->setEnabled(mode != "arith");
  trainFile_->setPlaceholderText(mode == "hub" ? tr("openai/gsm8k, or a folder laid out like a Hub dataset repo")
                                               : tr("train.jsonl: prompt (or messages), answer, other columns for the rewards"));
  datasetConfig_->setEnabled(mode == "hub");
  datasetSplit_->setEnabled(mode == "hub");
  datasetColumns_->setEnabled(mode != "arith");
}

void SetupPage::refreshPreview() {
  preview_->setRowCount(0);
  datasetStatus_->setStyleSheet(QString());
  std::vector<rollout::Example> rows;
  try {
    if (task_->currentData().toString() == "arith") {
      const json level = fieldValue("task_difficulty");
      const json seed = fieldValue("seed");
      auto opts = rollout::ArithOptions::difficulty(level.is_number_integer() ? level.get<int>() : 2,
                                                    seed.is_number_integer() ? seed.get<uint64_t>() : 42);
      rows = rollout::arith_examples(opts, 5);
      datasetStatus_->setText(tr("Generated arithmetic problems (an unlimited stream); the first five:"));
    } else {
      const std::string path = trainFile_->text().trimmed().toStdString();
      const bool hub = task_->currentData().toString() == "hub";
      if (path.empty()) {
        datasetStatus_->setText(hub ? tr("Name a Hub dataset repo id (in the Hugging Face cache: grpo download --repo-type "
                                         "dataset ID) or a folder laid out like one.")
                                    : tr("Choose a JSONL, CSV or Parquet file of prompts."));
        return;
      }
      rollout::DatasetRef ref;
      ref.name = path;
      const json cols = configJson()["dataset_columns"];
      rollout::validate_column_map(cols, "Columns");
      ref.columns = cols;
      if (hub) {
        ref.config = datasetConfig_->text().trimmed().toStdString();
        const std::string split = datasetSplit_->text().trimmed().toStdString();
        if (!split.empty()) ref.split = split;
      }
      // The first rows only: a Hub dataset may be large, and Parquet is read a row group at a time.
      const auto files = rollout::dataset_files(ref);
      const bool csv = QString::fromStdString(path).endsWith(".csv", Qt::CaseInsensitive);
      rollout::for_each_dataset_row(ref, [&](nlohmann::ordered_json&& row, const std::string& where) {
        rows.push_back(rollout::example_from_row(json(row), static_cast<int64_t>(rows.size()), where, csv));
        return rows.size() < 5;
      });
      datasetStatus_->setText(hub ? tr("Split \"%1\": %2 data file(s); the first rows:")
                                        .arg(QString::fromStdString(ref.split))
                                        .arg(files.size())
                                  : tr("The first rows:"));
    }
  } catch (const std::exception& e) {
    datasetStatus_->setStyleSheet(kError);
    datasetStatus_->setText(QString::fromStdString(e.what()));
    return;
  }
  for (const auto& ex : rows) {
    const int r = preview_->rowCount();
    preview_->insertRow(r);
    preview_->setItem(r, 0, new QTableWidgetItem(QString::number(ex.index)));
    preview_->setItem(r, 1, new QTableWidgetItem(QString::fromStdString(ex.prompt_text)));
    preview_->setItem(r, 2, new QTableWidgetItem(QString::fromStdString(ex.answer.value_or(""))));
  }
}

bool SetupPage::buildConfig(::grpo::grpo::TrainConfig& out, QString* error) {
  for (auto& [key, edit] : fields_) validateField(key);
  validateModel();
  QString first;
  for (auto& [key, err] : errors_)
    if (!err->text().isEmpty() && first.isEmpty()) first = QString::fromStdString(key) + ": " + err->text();
  if (first.isEmpty() && !modelValid_) first = tr("model folder: %1").arg(modelStatus_->text());
  if (first.isEmpty()) {
    try {
      ::grpo::grpo::TrainConfig c;
      json j = configJson();
      j.erase("output_dir");
      c.apply(j, "run setup");
      c.output_dir = runDirectory().toStdString();
      c.validate("run setup");
      out = c;
    } catch (const std::exception& e) {
      first = QString::fromStdString(e.what());
    }
  }
  formStatus_->setText(first);
  if (error) *error = first;
  return first.isEmpty();
}

bool SetupPage::loadConfigFile(const QString& path, QString* error) {
  try {
    json j = ::grpo::grpo::load_config_file(path.toStdString());
    ::grpo::grpo::TrainConfig probe;
    probe.apply(j, path.toStdString());  // unknown keys and bad values name the file and key
    setConfigJson(j);
    return true;
  } catch (const std::exception& e) {
    if (error) *error = QString::fromStdString(e.what());
    formStatus_->setText(QString::fromStdString(e.what()));
    return false;
  }
}

bool SetupPage::saveConfigFile(const QString& path, QString* error) const {
  try {
    write_file_atomic(path.toStdString(), configJson().dump(2) + "\n");
    return true;
  } catch (const std::exception& e) {
    if (error) *error = QString::fromStdString(e.what());
    return false;
  }
}

QString SetupPage::runDirectory() const { return runDir_->text().trimmed(); }
void SetupPage::setRunDirectory(const QString& dir) { runDir_->setText(dir); }

QLineEdit* SetupPage::field(const std::string& key) const {
  auto it = fields_.find(key);
  return it == fields_.end() ? nullptr : it->second;
}

void SetupPage::dragEnterEvent(QDragEnterEvent* e) {
  if (e->mimeData()->hasUrls()) e->acceptProposedAction();
}

void SetupPage::dropEvent(QDropEvent* e) {
  for (const auto& url : e->mimeData()->urls()) {
    const QString p = url.toLocalFile();
    if (QFileInfo(p).isDir()) {
      setModelFolder(p);
    } else if (p.endsWith(".jsonl") || p.endsWith(".csv") || p.endsWith(".json")) {
      task_->setCurrentIndex(1);
      trainFile_->setText(p);
      refreshPreview();
    }
  }
}

}  // namespace grpo::ui
