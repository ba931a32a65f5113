#include "core/grpo/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/common/strings.h"

namespace grpo::grpo {
namespace {
bool has_word(const std::string& name, const std::string& word) {
  std::string spaced = name;
  for (char& c : spaced)
    if (c == '/' || c == '_' || c == '.') c = ' ';
  for (const auto& w : split(spaced, ' '))
    if (w == word) return true;
  return false;
}
}  // namespace

Reduction reduction_for(const std::string& name) {
  if (has_word(name, "total")) return Reduction::Sum;
  if (has_word(name, "max")) return Reduction::Max;
  if (has_word(name, "min")) return Reduction::Min;
  return Reduction::Mean;
}

void MetricsWindow::add(const std::string& name, double value) {
  Acc& a = acc_[name];
  switch (reduction_for(name)) {
    case Reduction::Sum: a.a += value; ++a.n; break;
    case Reduction::Max: a.a = a.n ? std::max(a.a, value) : value; ++a.n; break;
    case Reduction::Min: a.a = a.n ? std::min(a.a, value) : value; ++a.n; break;
    default:
      if (!std::isnan(value)) { a.a += value; ++a.n; }
      break;
  }
}

void MetricsWindow::add_rate(const std::string& name, double numerator, double denominator) {
  Acc& a = acc_[name];
  a.rate = true;
  a.a += numerator;
  a.b += denominator;
  ++a.n;
}

void MetricsWindow::merge(const std::map<std::string, double>& values) {
  for (const auto& [k, v] : values) add(k, v);
}

std::map<std::string, double> MetricsWindow::reduce() const {
  std::map<std::string, double> out;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const auto& [name, a] : acc_) {
    if (a.rate) {
      out[name] = a.b != 0 ? a.a / a.b : nan;
      continue;
    }
    switch (reduction_for(name)) {
      case Reduction::Sum:
      case Reduction::Max:
      case Reduction::Min: out[name] = a.n ? a.a : nan; break;
      default: out[name] = a.n ? a.a / static_cast<double>(a.n) : nan; break;
    }
  }
  return out;
}

}  // namespace grpo::grpo
