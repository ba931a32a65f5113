// Error: the one exception type the engine throws. It carries where (context, e.g. a file and a
// tensor name), what went wrong, and a hint for the user. Library code throws; each boundary
// (CLI main, engine slot, HTTP handler) catches once and reports with what().
#pragma once

#include <stdexcept>
#include <string>

namespace grpo {

class Error : public std::runtime_error {
public:
  Error(std::string context, std::string message, std::string hint = {});

  const std::string& context() const { return context_; }
  const std::string& message() const { return message_; }
  const std::string& hint() const { return hint_; }

  // A copy with an outer context prepended: "file.json: field x: expected ...".
  Error within(const std::string& outer) const;

private:
  std::string context_, message_, hint_;
};

// check(cond, context, message, hint): throw Error when cond is false.
inline void check(bool cond, const std::string& context, const std::string& message,
                  const std::string& hint = {}) {
  if (!cond) throw Error(context, message, hint);
}

}  // namespace grpo
