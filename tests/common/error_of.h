// error_of(f): the message of the grpo::Error that f throws, or "(no error)" when it throws none,
// so a test can assert on what an error says (file, field, expected value, hint), and
// CHECK_ERROR_CONTAINS(message, needles...) to assert every needle occurs in it.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>

#include "core/common/error.h"

namespace grpo::testing {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ::grpo::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace grpo::testing

// Inside a Qt Test function: fails, showing the message, unless every needle occurs in it.
#define CHECK_ERROR_CONTAINS(msg, ...)                                                   \
  do {                                                                                   \
    const std::string m_ = (msg);                                                        \
    for (const std::string& n_ : std::initializer_list<std::string>{__VA_ARGS__})        \
      QVERIFY2(m_.find(n_) != std::string::npos, ("\"" + n_ + "\" not in: " + m_).c_str()); \
  } while (0)
