#include "ui/retune_dialog.h"

#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QVBoxLayout>

#include "core/api/config.h"
#include "ui/setup_page.h"

namespace grpo::ui {
namespace {

QString text_of(const nlohmann::json& v) {
  if (v.is_string()) return QString::fromStdString(v.get<std::string>());
  if (v.is_null()) return QString();
  return QString::fromStdString(v.dump());
}

}  // namespace

RetuneDialog::RetuneDialog(const nlohmann::json& current, std::function<QString(const nlohmann::json&)> submit,
                           QWidget* parent)
    : QDialog(parent), submit_(std::move(submit)) {
  setWindowTitle(tr("Retune the live run"));
  auto* lay = new QVBoxLayout(this);
  auto* note = new QLabel(tr("Changes apply at the next step boundary and are recorded in the run's events; "
                             "the charts mark them."));
  note->setWordWrap(true);
  lay->addWidget(note);
  auto* form = new QFormLayout;
  for (const auto& k : ::grpo::grpo::train_config_schema()) {  // the key table's retunable rows
    if (!k.retunable) continue;
    const std::string& key = k.name;
    auto* edit = new QLineEdit(current.contains(key) ? text_of(current[key]) : QString());
    edit->setObjectName(QString::fromStdString("retune:" + key));
    edit->setToolTip(SetupPage::describeKey(key));
    const std::string range = k.range_text();
    auto* label = new QLabel(QString::fromStdString(key));
    label->setToolTip(edit->toolTip());
    if (!range.empty()) edit->setPlaceholderText(QString::fromStdString(range));
    form->addRow(label, edit);
    fields_[key] = edit;
    initial_[key] = edit->text();
  }
  lay->addLayout(form);
  error_ = new QLabel;
  error_->setObjectName("retuneError");
  error_->setStyleSheet("color: #c62828;");
  error_->setWordWrap(true);
  lay->addWidget(error_);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Apply | QDialogButtonBox::Cancel);
  lay->addWidget(buttons);
  connect(buttons->button(QDialogButtonBox::Apply), &QPushButton::clicked, this, [this] {
    if (apply()) accept();
  });
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
}

QLineEdit* RetuneDialog::field(const std::string& key) const {
  auto it = fields_.find(key);
  return it == fields_.end() ? nullptr : it->second;
}

nlohmann::json RetuneDialog::changes() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, edit] : fields_) {
    if (edit->text() == initial_.at(key)) continue;
    const std::string s = edit->text().trimmed().toStdString();
    auto v = nlohmann::json::parse(s, nullptr, false);
    out[key] = v.is_discarded() ? nlohmann::json(s) : v;
  }
  return out;
}

QString RetuneDialog::errorText() const { return error_->text(); }

bool RetuneDialog::apply() {
  for (auto& [key, edit] : fields_) edit->setStyleSheet(QString());
  const auto c = changes();
  if (c.empty()) {
    error_->setText(tr("Nothing changed."));
    return false;
  }
  const QString err = submit_(c);
  error_->setText(err);
  if (err.isEmpty()) return true;
  for (auto& [key, edit] : fields_)  // mark the key the engine named
    if (err.contains(QString::fromStdString("\"" + key + "\""))) edit->setStyleSheet("border: 1px solid #c62828;");
  return false;
}

}  // namespace grpo::ui
