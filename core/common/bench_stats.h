// Small helpers shared by the `grpo bench ...` implementations: the median of timed samples and
// quoting a path for the /bin/sh command that runs a reference (node, python3).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace grpo {

// The median of the samples (the upper one of an even count); v must not be empty.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// `s` single-quoted for /bin/sh, any quote inside it escaped.
inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace grpo
