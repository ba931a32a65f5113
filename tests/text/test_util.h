// Helpers shared by the core/text tests: reading text lines and JSON Lines files.
#pragma once

#include <QtTest/QtTest>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace grpo::text::test {

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) qFatal("cannot open %s", path.c_str());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Lines split on "\n" (a final empty line dropped), as the reference scripts split them.
inline std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> lines;
  std::string all = slurp(path);
  size_t start = 0;
  while (start < all.size()) {
    size_t end = all.find('\n', start);
    if (end == std::string::npos) end = all.size();
    lines.push_back(all.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> rows;
  for (const std::string& line : read_lines(path)) {
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  }
  return rows;
}

inline std::string show_ids(const std::vector<int32_t>& ids) { return nlohmann::json(ids).dump(); }

}  // namespace grpo::text::test
