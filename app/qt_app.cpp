#include <QCoreApplication>

#include "app/commands.h"

namespace grpo::cli {

std::unique_ptr<QCoreApplication> make_qt_application() {
  if (QCoreApplication::instance()) return nullptr;
  static int qt_argc = 1;  // QCoreApplication keeps references to these for its lifetime
  static char qt_name[] = "grpo";
  static char* qt_argv[] = {qt_name, nullptr};
  return std::make_unique<QCoreApplication>(qt_argc, qt_argv);
}

}  // namespace grpo::cli
