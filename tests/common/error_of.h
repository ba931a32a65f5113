// error_of(f): the message of the grpo::Error that f throws, or "(no error)" when it throws none,
// so a test can assert on what an error says (file, field, expected value, hint).
#pragma once

#include <functional>
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
