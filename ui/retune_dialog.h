// Retune dialog: the settings a live run may change (the key table's retunable rows,
// core/grpo/config_schema.h), each with its current value, its range and its doc as tooltip. Apply sends only the edited keys; the engine validates
// them at once and applies them at the next step boundary. A refusal is shown in the dialog,
// beside the key it names.
#pragma once

#include <functional>
#include <map>
#include <string>

#include <QDialog>
#include <nlohmann/json.hpp>

class QLabel;
class QLineEdit;

namespace grpo::ui {

class RetuneDialog : public QDialog {
  Q_OBJECT
public:
  // `submit` returns "" when the engine accepted the changes, else its reason.
  RetuneDialog(const nlohmann::json& current, std::function<QString(const nlohmann::json&)> submit,
               QWidget* parent = nullptr);

  QLineEdit* field(const std::string& key) const;
  nlohmann::json changes() const;  // the edited keys with their new values
  QString errorText() const;
  bool apply();                    // what the Apply button does; true when accepted

private:
  std::function<QString(const nlohmann::json&)> submit_;
  std::map<std::string, QLineEdit*> fields_;
  std::map<std::string, QString> initial_;
  QLabel* error_;
};

}  // namespace grpo::ui
