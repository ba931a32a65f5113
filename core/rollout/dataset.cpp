// JSONL and CSV prompt datasets -> Examples (see dataset.h).
#include "core/common/json_limits.h"
#include "core/rollout/dataset.h"

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/strings.h"
#include "core/rollout/dataset_csv.h"
#include "core/rollout/dataset_source.h"

namespace grpo::rollout {

namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& where, const std::string& field, const std::string& message,
                       const std::string& hint = {}) {
  throw Error(where, "field \"" + field + "\": " + message, hint);
}

// A chat conversation: a non-empty array of {"role": string, "content": string} objects.
json checked_messages(const json& m, const std::string& where, const std::string& field) {
  if (!m.is_array() || m.empty())
    fail(where, field, std::string("expected a non-empty array of {\"role\", \"content\"} objects, got ") +
                           (m.is_array() ? "an empty array" : m.type_name()));
  for (size_t i = 0; i < m.size(); ++i) {
    std::string at = field + "[" + std::to_string(i) + "]";
    if (!m[i].is_object()) fail(where, at, std::string("expected an object with \"role\" and \"content\", got ") + m[i].type_name());
    for (const char* key : {"role", "content"}) {
      if (!m[i].contains(key)) fail(where, at + "." + key, "missing");
      if (!m[i][key].is_string()) fail(where, at + "." + key, std::string("expected a string, got ") + m[i][key].type_name());
    }
  }
  return m;
}

}  // namespace

std::string render_messages(const json& messages) {
  std::vector<std::string> lines;
  for (const auto& m : messages) lines.push_back(m.value("role", "") + ": " + m.value("content", ""));
  return join(lines, "\n");
}

Example example_from_row(const json& row, int64_t index, const std::string& where, bool from_csv) {
  if (!row.is_object()) throw Error(where, std::string("expected a JSON object (one row), got ") + row.type_name());
  auto present = [&](const char* key) {
    if (!row.contains(key) || row[key].is_null()) return false;
    return !(from_csv && row[key].is_string() && row[key].get<std::string>().empty());
  };
  Example ex;
  ex.index = index;

  // The prompt: "prompt" (text or conversation), else "messages".
  std::string used_prompt;
  if (present("prompt")) {
    used_prompt = "prompt";
    const json& p = row["prompt"];
    if (p.is_string()) {
      ex.prompt_text = p.get<std::string>();
      if (trim(ex.prompt_text).empty()) fail(where, "prompt", "empty");
    } else if (p.is_array()) {
      ex.messages = checked_messages(p, where, "prompt");
    } else {
      fail(where, "prompt", std::string("expected a string or a \"messages\" array, got ") + p.type_name());
    }
  } else if (present("messages")) {
    used_prompt = "messages";
    json m = row["messages"];
    if (m.is_string()) {  // CSV cells (and some exports) hold the conversation as JSON text
      m = json::parse(m.get<std::string>(), nullptr, /*allow_exceptions=*/false);
      if (m.is_discarded())
        fail(where, "messages", "expected a JSON array of {\"role\", \"content\"} objects, got text that is not JSON",
             "in CSV, quote the cell and double the quotes inside: \"[{\"\"role\"\": \"\"user\"\", ...}]\"");
    }
    ex.messages = checked_messages(m, where, "messages");
  } else {
    fail(where, "prompt", "missing", "each row needs a \"prompt\" (text or a messages array) or a \"messages\" column");
  }
  if (ex.messages) ex.prompt_text = render_messages(*ex.messages);

  // The reference answer: "answer", else "solution", else "ground_truth".
  std::string used_answer = present("answer")     ? "answer"
                            : present("solution") ? "solution"
                            : present("ground_truth") ? "ground_truth"
                                                      : "";
  if (!used_answer.empty()) {
    const json& a = row[used_answer];
    if (a.is_string()) ex.answer = a.get<std::string>();
    else if (a.is_number()) ex.answer = a.dump();
    else fail(where, used_answer, std::string("expected a string or a number, got ") + a.type_name());
  }

  // Everything else is metadata for the rewards.
  for (const auto& [key, value] : row.items())
    if (key != used_prompt && key != used_answer && key != "answer") ex.metadata[key] = value;
  return ex;
}

void for_each_json_line(const std::string& text, const std::string& name,
                        const std::function<bool(nlohmann::ordered_json&&, const std::string&)>& fn) {
  int64_t line_no = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (line_no == 1 && starts_with(line, "\xEF\xBB\xBF")) line.erase(0, 3);
    if (trim(line).empty()) continue;
    std::string where = name + ":" + std::to_string(line_no);
    nlohmann::ordered_json row;
    check_json_depth(line, where);
    try {
      row = nlohmann::ordered_json::parse(line);
    } catch (const json::exception& e) {  // parse_error, or out_of_range for a number too large
      throw Error(where, std::string("invalid JSON: ") + e.what(), "JSON lines: one complete JSON object per line");
    }
    if (!fn(std::move(row), where)) return;
  }
}

std::vector<Example> parse_jsonl(const std::string& text, const std::string& name) {
  std::vector<Example> out;
  for_each_json_line(text, name, [&](nlohmann::ordered_json&& row, const std::string& where) {
    out.push_back(example_from_row(json(row), static_cast<int64_t>(out.size()), where, /*from_csv=*/false));
    return true;
  });
  check(!out.empty(), name, "no rows", "a JSONL dataset has one JSON object per line, e.g. {\"prompt\": \"...\", \"answer\": \"...\"}");
  return out;
}

std::vector<Example> parse_csv(const std::string& text, const std::string& name) {
  CsvTable table = parse_csv_table(text, name);
  std::vector<Example> out;
  for (const auto& rec : table.records) {
    json row = json::object();
    for (size_t i = 0; i < table.header.size(); ++i) row[table.header[i]] = rec.fields[i];
    out.push_back(example_from_row(row, static_cast<int64_t>(out.size()), name + ":" + std::to_string(rec.line),
                                   /*from_csv=*/true));
  }
  check(!out.empty(), name, "no rows", "a CSV dataset has a header line (e.g. prompt,answer) and one row per example");
  return out;
}

std::vector<Example> load_jsonl(const std::string& path) { return parse_jsonl(read_file(path), path); }
std::vector<Example> load_csv(const std::string& path) { return parse_csv(read_file(path), path); }

std::vector<Example> load_dataset(const std::string& path) {
  std::string lower;
  for (char c : path) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (ends_with(lower, ".parquet")) {
    DatasetRef ref;
    ref.name = path;
    return load_dataset_ref(ref);
  }
  return ends_with(lower, ".csv") ? load_csv(path) : load_jsonl(path);
}

}  // namespace grpo::rollout
