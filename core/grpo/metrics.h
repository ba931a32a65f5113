// A logging window of metrics reduced to one value per name exactly as TRL's _reduce_metric does
// (docs/formulas.md, "Metric window reduction"): (numerator, denominator) pairs are rates
// Σnum/Σden; a name containing the word "total" is a counter (summed); "max"/"min" names take the
// extreme; the rest are gauges (averaged). Words are the pieces of the name split at '/', '_'
// and '.'.
#pragma once

#include <map>
#include <string>

namespace grpo::grpo {

enum class Reduction { Mean, Sum, Max, Min, Rate };
Reduction reduction_for(const std::string& name);

class MetricsWindow {
public:
  void add(const std::string& name, double value);
  void add_rate(const std::string& name, double numerator, double denominator);
  void merge(const std::map<std::string, double>& values);  // add() each
  bool empty() const { return acc_.empty(); }
  // One value per name; NaN values are ignored by gauges (a NaN-only gauge stays NaN).
  std::map<std::string, double> reduce() const;
  void clear() { acc_.clear(); }

private:
  struct Acc { double a = 0, b = 0; int64_t n = 0; bool rate = false; };
  std::map<std::string, Acc> acc_;
};

}  // namespace grpo::grpo
