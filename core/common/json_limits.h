// Bounds on JSON that comes from outside (HTTP bodies, files users bring, peers' replies).
// nlohmann's parser is iterative, but dump(), our own recursive walks and error messages that
// quote a value are not: a body nested 100,000 levels deep parses, then overflows the stack the
// first time it is printed. So nesting is checked before any DOM is built, in one linear pass
// over the text that allocates nothing.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace grpo {

// Deeper than any real config, tokenizer, adapter_config.json or API body (those stay under 10).
inline constexpr int kMaxJsonDepth = 64;

// The deepest nesting of arrays and objects in `text` (brackets inside strings do not count),
// stopping early once it exceeds `stop_after`.
int json_depth(std::string_view text, int stop_after = kMaxJsonDepth);

// Throws grpo::Error naming `source` when `text` nests deeper than `max_depth` levels.
void check_json_depth(std::string_view text, const std::string& source, int max_depth = kMaxJsonDepth);

// check_json_depth, then parse. Malformed JSON is a grpo::Error naming `source` and the parser's
// message (byte position included).
nlohmann::json parse_json_bounded(std::string_view text, const std::string& source, int max_depth = kMaxJsonDepth);
nlohmann::ordered_json parse_ordered_json_bounded(std::string_view text, const std::string& source,
                                                  int max_depth = kMaxJsonDepth);

// yaml-cpp recurses once per level of flow collections ([...], {...}), so YAML from a file or a
// flag is checked before it is loaded: throws grpo::Error naming `source` when its brackets nest
// deeper than `max_depth`. Brackets are counted outside comments; one inside a quoted scalar
// counts too (a false refusal needs 64 unclosed brackets in one string). Block nesting needs two
// more bytes of indentation a level, so a file's size bounds it.
void check_yaml_flow_depth(std::string_view text, const std::string& source, int max_depth = kMaxJsonDepth);

}  // namespace grpo
