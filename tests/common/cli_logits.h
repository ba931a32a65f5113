// Logits through the `grpo` CLI as a user reads them (`grpo inspect logits --last`), for tests
// that compare a base model, base + adapter and a merged export.
#pragma once

#include <QStringList>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/common/run_cli.h"

namespace grpo::testing {

// The last line of `out` that starts with '{' (every command prints its result there).
inline std::string last_json_line(const std::string& out) {
  std::istringstream in(out);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty() && line[0] == '{') last = line;
  return last;
}

// `grpo inspect logits --model MODEL --ids IDS --last [--adapter ADAPTER]`: the last position's logits.
inline std::vector<float> cli_logits(const std::string& model, const std::string& ids, const std::string& adapter = {}) {
  QStringList args = {"inspect", "logits", "--model", QString::fromStdString(model), "--ids",
                      QString::fromStdString(ids), "--last"};
  if (!adapter.empty()) args << "--adapter" << QString::fromStdString(adapter);
  const auto r = run_cli(args);
  if (r.code != 0) qFatal("grpo inspect logits failed: %s", r.out.c_str());
  return nlohmann::json::parse(last_json_line(r.out))["logits"][0].get<std::vector<float>>();
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 1e30;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, static_cast<double>(std::abs(a[i] - b[i])));
  return m;
}

}  // namespace grpo::testing
