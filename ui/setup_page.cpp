#include "ui/setup_page.h"

#include <QComboBox>
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

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/hub/hf_cache.h"
#include "core/model/inspect.h"
#include "core/rollout/arith_task.h"
#include "core/rollout/dataset.h"
#include "core/rollout/dataset_source.h"
#include "core/rollout/reward.h"

namespace grpo::ui {
namespace {

using json = nlohmann::json;

// The form's hyperparameters (TRL names), grouped, each with what it does.
struct KeyDoc {
  const char* key;
  const char* doc;
};
const std::vector<std::pair<const char*, std::vector<KeyDoc>>>& key_groups() {
  static const std::vector<std::pair<const char*, std::vector<KeyDoc>>> groups = {
      {"Optimisation",
       {{"learning_rate", "Initial learning rate of AdamW (LoRA weights only)."},
        {"lr_scheduler_type", "Learning-rate schedule after warmup."},
        {"warmup_ratio", "Fraction of max_steps spent warming the learning rate up from 0."},
        {"max_steps", "Optimizer steps of the run."},
        {"prompts_per_step", "Prompt groups (of num_generations completions) per optimizer step."},
        {"max_grad_norm", "Gradient clipping norm."},
        {"seed", "Seed of sampling, data order and LoRA initialisation."}}},
      {"Generation",
       {{"num_generations", "Completions sampled per prompt (the GRPO group size G)."},
        {"max_prompt_length", "Prompts longer than this (tokens) are truncated from the left."},
        {"max_completion_length", "Most tokens generated per completion."},
        {"temperature", "Sampling temperature; higher explores more."},
        {"top_p", "Nucleus sampling: keep the smallest token set with this much probability."},
        {"chat_template_kwargs", "Extra variables for the model's chat template, as a JSON object, e.g. "
                                 "{\"enable_thinking\": false} for Qwen 3 (TRL's chat_template_kwargs)."}}},
      {"GRPO loss",
       {{"loss_type", "How token losses are normalised: grpo (per sequence), bnpo (per batch), dr_grpo "
                      "(constant), dapo (per token over the global batch)."},
        {"scale_rewards", "Advantage scaling: divide by the group std, the batch std, or not at all."},
        {"epsilon", "Lower clipping range of the importance ratio (1 - epsilon)."},
        {"epsilon_high", "Upper clipping range (1 + epsilon_high); DAPO's clip-higher uses 0.28."},
        {"beta", "KL coefficient against the base model; 0 skips the reference model."},
        {"token_budget", "Tokens per packed training row (padding-free); 0 pads micro-batches instead."},
        {"gradient_checkpointing", "Recompute activations in backward: less memory, more time."}}},
      {"LoRA",
       {{"r", "LoRA rank."},
        {"lora_alpha", "LoRA scaling numerator (scale = lora_alpha / r, or / sqrt(r) with rsLoRA)."},
        {"lora_dropout", "Dropout on the LoRA input."},
        {"target_modules", "Projections that get adapters: \"all-linear\" or a list such as [\"q_proj\", \"v_proj\"]."},
        {"use_rslora", "Rank-stabilised LoRA scaling (lora_alpha / sqrt(r))."}}},
      {"Async engine",
       {{"max_staleness", "Drop rollouts sampled more than this many policy versions ago."},
        {"weight_sync_steps", "Publish a new adapter version to the generators every this many steps."},
        {"max_inflight_tasks", "Most completions being generated at once (-1: derived from max_staleness)."},
        {"queue_maxsize", "Rollout queue bound in completions (back-pressure on generation)."},
        {"local_generators", "In-process generator threads (0: remote workers only)."}}},
      {"Evaluation and saving",
       {{"eval_steps", "Greedy eval accuracy every this many steps (0: never)."},
        {"eval_size", "Held-out examples used for eval."},
        {"save_steps", "Checkpoint every this many steps (0: only at the end)."},
        {"task_difficulty", "Built-in arithmetic: 1 = one digit +-, ... 5 = up to four digits, three terms."}}},
  };
  return groups;
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

QString resources_dir() {
  const QByteArray env = qgetenv("GRPO_RESOURCES");
  if (!env.isEmpty()) return QString::fromLocal8Bit(env);
#ifdef GRPO_INSTALLED_RESOURCES
  if (QFileInfo(GRPO_INSTALLED_RESOURCES).isDir()) return GRPO_INSTALLED_RESOURCES;
#endif
#ifdef GRPO_SOURCE_RESOURCES
  return GRPO_SOURCE_RESOURCES;
#else
  return "resources";
#endif
}

json demo_config_json() {
  const std::string res = resources_dir().toStdString();
  json j = ::grpo::grpo::load_config_file(path_join(res, "presets/demo.yaml"));
  j["model_name_or_path"] = path_join(res, j.value("model_name_or_path", std::string()));
  return j;
}

QString SetupPage::describeKey(const std::string& key) {
  QString doc;
  for (const auto& [group, keys] : key_groups())
    for (const auto& k : keys)
      if (key == k.key) doc = k.doc;
  const std::string range = ::grpo::grpo::config_key_range(key);
  QString tip = "<b>" + QString::fromStdString(key) + "</b>";
  if (!doc.isEmpty()) tip += "<br>" + doc.toHtmlEscaped();
  if (!range.empty()) tip += "<br>Allowed: " + QString::fromStdString(range).toHtmlEscaped();
  if (::grpo::grpo::is_retunable(key)) tip += "<br><i>Can be retuned on a live run.</i>";
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
  preset_->addItem(tr("Demo (tiny-arith, arithmetic)"), "demo");
  preset_->addItem(tr("CPU (small model)"), "cpu");
  preset_->addItem(tr("Small GPU (1-3B model)"), "gpu");
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

  // Hyperparameters.
  for (const auto& [group, keys] : key_groups()) {
    auto* box = new QGroupBox(tr(group));
    auto* form = new QFormLayout(box);
    for (const auto& k : keys) {
      auto* edit = new QLineEdit;
      edit->setObjectName(QString("field:") + k.key);
      const QString tip = describeKey(k.key);
      edit->setToolTip(tip);
      auto* err = new QLabel;
      err->setObjectName(QString("fieldError:") + k.key);
      err->setStyleSheet(kError);
      err->setWordWrap(true);
      err->hide();
      auto* cell = new QWidget;
      auto* cl = new QVBoxLayout(cell);
      cl->setContentsMargins(0, 0, 0, 0);
      cl->setSpacing(1);
      cl->addWidget(edit);
      cl->addWidget(err);
      auto* label = new QLabel(k.key);
      label->setToolTip(tip);
      form->addRow(label, cell);
      fields_[k.key] = edit;
      errors_[k.key] = err;
      const std::string key = k.key;
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
  if (name == "demo") {
    try {
      j = demo_config_json();
    } catch (const std::exception& e) {
      formStatus_->setText(QString::fromStdString(e.what()));
      return;
    }
  } else {
    j = configJson();
    if (name == "cpu")
      j.update({{"num_generations", 8}, {"prompts_per_step", 8}, {"max_completion_length", 128}, {"token_budget", 1024},
                {"r", 8}, {"lora_alpha", 16}, {"learning_rate", 1e-4}, {"local_generators", 1}, {"max_staleness", 2},
                {"gradient_checkpointing", false}, {"weight_sync_steps", 1}, {"beta", 0.0}});
    else
      j.update({{"num_generations", 8}, {"prompts_per_step", 16}, {"max_completion_length", 512}, {"token_budget", 4096},
                {"r", 16}, {"lora_alpha", 32}, {"learning_rate", 2e-5}, {"local_generators", 1}, {"max_staleness", 4},
                {"gradient_checkpointing", true}, {"weight_sync_steps", 1}, {"beta", 0.0}});
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
      if (key == "epsilon_high") j[key] = nullptr;
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
  if (v.is_null() && key != "epsilon_high") {
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
