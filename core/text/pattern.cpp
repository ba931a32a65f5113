// Split/replace patterns: see pattern.h.
#include "core/text/pattern.h"

namespace grpo::text {

Pattern::Pattern(const json& j, const JsonWhere& where) {
  if (j.is_string()) {
    literal_ = j.get<std::string>();
  } else if (j.is_object() && j.contains("String") && j["String"].is_string()) {
    literal_ = j["String"].get<std::string>();
  } else if (j.is_object() && j.contains("Regex") && j["Regex"].is_string()) {
    regex_ = std::make_unique<Regex>(j["Regex"].get<std::string>(),
                                     where.file + ": " + where.path + ".Regex");
  } else {
    throw_bad(where, "expected {\"String\": ...} or {\"Regex\": ...}, got " + j.dump());
  }
}

void Pattern::matches(std::string_view s, std::vector<std::pair<size_t, size_t>>& out) const {
  if (regex_) {
    regex_->find_all(s, out);
    return;
  }
  if (literal_.empty()) return;
  for (size_t pos = s.find(literal_); pos != std::string_view::npos;
       pos = s.find(literal_, pos + literal_.size())) {
    out.emplace_back(pos, pos + literal_.size());
  }
}

void Pattern::find_matches(std::string_view s, std::vector<Span>& out) const {
  if (s.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  thread_local std::vector<std::pair<size_t, size_t>> found;
  found.clear();
  matches(s, found);
  size_t prev = 0;
  for (auto [start, end] : found) {
    if (prev != start) out.push_back({prev, start, false});
    out.push_back({start, end, true});
    prev = end;
  }
  if (prev != s.size()) out.push_back({prev, s.size(), false});
}

std::string Pattern::replace_all(std::string_view s, std::string_view content) const {
  std::vector<std::pair<size_t, size_t>> found;
  matches(s, found);
  if (found.empty()) return std::string(s);
  std::string out;
  out.reserve(s.size() + found.size() * content.size());
  size_t prev = 0;
  for (auto [start, end] : found) {
    out.append(s.substr(prev, start - prev));
    out.append(content);
    prev = end;
  }
  out.append(s.substr(prev));
  return out;
}

}  // namespace grpo::text
