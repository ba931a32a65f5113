// JSON nesting bounds (see json_limits.h).
#include "core/common/json_limits.h"

#include "core/common/error.h"

namespace grpo {

int json_depth(std::string_view text, int stop_after) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '[':
      case '{':
        if (++depth > deepest) {
          deepest = depth;
          if (deepest > stop_after) return deepest;
        }
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;  // unbalanced text is the parser's to reject
        break;
      default: break;
    }
  }
  return deepest;
}

void check_json_depth(std::string_view text, const std::string& source, int max_depth) {
  check(json_depth(text, max_depth) <= max_depth, source,
        "JSON nested deeper than " + std::to_string(max_depth) + " levels (the limit for input from outside)",
        "real configs, tokenizers and API bodies nest a few levels; flatten the value");
}

void check_yaml_flow_depth(std::string_view text, const std::string& source, int max_depth) {
  int depth = 0;
  bool line_start = true, after_space = true;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '#' && (line_start || after_space)) {  // a comment runs to the end of its line
      while (i < text.size() && text[i] != '\n') ++i;
      line_start = after_space = true;
      continue;
    }
    if (c == '[' || c == '{')
      check(++depth <= max_depth, source,
            "YAML nested deeper than " + std::to_string(max_depth) + " levels (the limit for input from outside)",
            "real configs nest a few levels; flatten the value");
    if ((c == ']' || c == '}') && depth > 0) --depth;
    line_start = c == '\n';
    after_space = c == ' ' || c == '\t' || c == '\n';
  }
}

namespace {
template <typename J>
J parse_bounded(std::string_view text, const std::string& source, int max_depth) {
  check_json_depth(text, source, max_depth);
  try {
    return J::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a huge number
    throw Error(source, std::string("invalid JSON: ") + e.what());
  }
}
}  // namespace

nlohmann::json parse_json_bounded(std::string_view text, const std::string& source, int max_depth) {
  return parse_bounded<nlohmann::json>(text, source, max_depth);
}

nlohmann::ordered_json parse_ordered_json_bounded(std::string_view text, const std::string& source, int max_depth) {
  return parse_bounded<nlohmann::ordered_json>(text, source, max_depth);
}

}  // namespace grpo
