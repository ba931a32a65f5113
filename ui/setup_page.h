// SetupPage: everything a run needs before Start: the model folder (validated at once with the
// `grpo inspect model` summary, or its error in place), the dataset (built-in arithmetic or a
// JSONL/CSV file, with a preview of its first rows), reward functions with weights, the
// hyperparameters under TRL's names (groups, tooltips and ranges from the key table,
// core/grpo/config_schema.h; a bad value is marked beside its field), presets (the YAML files of
// resources/presets/, titled by their first line "# title: ..."), and loading/saving config files.
#pragma once

#include <map>
#include <string>

#include <QList>
#include <QString>
#include <QWidget>
#include <nlohmann/json.hpp>

#include "core/api/config.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QTableWidget;
class QTimer;

namespace grpo::ui {

class SetupPage : public QWidget {
  Q_OBJECT
public:
  explicit SetupPage(QWidget* parent = nullptr);

  // A preset of resources/presets/ by file name ("demo", "cpu", "gpu", ...): one that names a model
  // replaces the setup (the demo: model, task, hyperparameters); one without goes over the form.
  void loadPreset(const QString& name);
  void setConfigJson(const nlohmann::json& j);  // fills every field from a config object
  nlohmann::json configJson() const;            // the base config with every field applied
  // Applies and validates the whole form; on failure marks the fields in place and returns false
  // with the first error in *error.
  bool buildConfig(::grpo::grpo::TrainConfig& out, QString* error);
  bool loadConfigFile(const QString& path, QString* error);
  bool saveConfigFile(const QString& path, QString* error) const;

  void setModelFolder(const QString& dir);  // validates at once
  bool modelValid() const { return modelValid_; }
  QString modelStatus() const;
  QString runDirectory() const;
  void setRunDirectory(const QString& dir);
  QLineEdit* field(const std::string& key) const;
  QString fieldError(const std::string& key) const;  // "" when the field's value is valid
  QTableWidget* datasetPreview() const { return preview_; }
  QTableWidget* rewardsTable() const { return rewards_; }

  static QString describeKey(const std::string& key);  // the tooltip text of a key

Q_SIGNALS:
  void configChanged();

protected:
  void dragEnterEvent(QDragEnterEvent* e) override;
  void dropEvent(QDropEvent* e) override;

private:
  void validateModel();
  void validateField(const std::string& key);
  void refreshPreview();
  void updateDatasetFields();  // enables the fields of the chosen data source
  void setRewards(const nlohmann::json& funcs, const nlohmann::json& weights);
  nlohmann::json fieldValue(const std::string& key) const;

  nlohmann::json base_ = nlohmann::json::object();
  QLineEdit *model_, *trainFile_, *runDir_;
  QLineEdit *datasetConfig_, *datasetSplit_, *datasetColumns_;  // Hub datasets: config, split, renames
  QLabel *modelStatus_, *datasetStatus_, *formStatus_;
  QComboBox *task_, *preset_;
  QTableWidget *preview_, *rewards_;
  std::map<std::string, QLineEdit*> fields_;
  std::map<std::string, QLabel*> errors_;
  QTimer* modelTimer_;
  bool modelValid_ = false;
  bool filling_ = false;
};

// $GRPO_RESOURCES, the installed share dir, or the source tree's resources/ (as `grpo train`).
QString resources_dir();
// The presets resources/presets/ holds (*.yaml, *.yml, *.json): the demo first, then by name.
struct Preset {
  QString name;   // the file name without extension: what loadPreset takes
  QString title;  // its first line "# title: ...", else the name
  QString path;
};
QList<Preset> available_presets();
// A preset's keys, a model folder shipped in resources/ resolved; throws grpo::Error if none.
nlohmann::json preset_config_json(const QString& name);
// The demo preset (resources/presets/demo.yaml) with its model path resolved.
nlohmann::json demo_config_json();

}  // namespace grpo::ui
