#include "core/common/error.h"

namespace grpo {
namespace {
std::string compose(const std::string& context, const std::string& message, const std::string& hint) {
  std::string s = context.empty() ? message : context + ": " + message;
  if (!hint.empty()) s += " (hint: " + hint + ")";
  return s;
}
}  // namespace

Error::Error(std::string context, std::string message, std::string hint)
    : std::runtime_error(compose(context, message, hint)),
      context_(std::move(context)),
      message_(std::move(message)),
      hint_(std::move(hint)) {}

Error Error::within(const std::string& outer) const {
  return Error(context_.empty() ? outer : outer + ": " + context_, message_, hint_);
}

}  // namespace grpo
