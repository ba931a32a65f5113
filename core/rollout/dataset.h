// Prompt datasets: JSONL and CSV files turned into Examples for the rollout producers.
//
// Columns (TRL's conventions):
//   prompt     a string, or a chat conversation: an array of {"role", "content"} strings
//   messages   a chat conversation (used when there is no "prompt"); in CSV a JSON string
//   answer     optional reference answer (a string or a number); "solution", then "ground_truth"
//              when "answer" is absent
//   other      every other column is kept in `metadata` and handed to the rewards
// JSON null, an absent cell or an empty CSV cell means "no answer". CSV cells are strings.
// The chat template is applied later by the caller when the model has one, so a conversation
// stays data here; `prompt_text` then holds a plain fallback rendering (see render_messages).
//
// Every bad row is a grpo::Error naming the file, the line and the field, e.g.
//   data/train.jsonl:17: field "prompt": expected a string or a "messages" array, got number
// Shuffling, epochs and the eval split live in dataset_sampler.h.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace grpo::rollout {

struct Example {
  std::string prompt_text;                 // the prompt, or render_messages(*messages)
  std::optional<nlohmann::json> messages;  // chat conversation [{role, content}], when given as one
  std::optional<std::string> answer;       // reference answer for the rewards
  nlohmann::json metadata = nlohmann::json::object();  // the other columns
  int64_t index = 0;                       // 0-based row number in the source (stable id)
};

// Loads a whole dataset. Format by extension: ".csv" is CSV, ".parquet" is Parquet
// (dataset_source.h), anything else ("jsonl", "json", "ndjson") is JSON lines. An empty dataset
// is an error. Hub dataset repos and folders: load_dataset_ref (dataset_source.h).
std::vector<Example> load_dataset(const std::string& path);
std::vector<Example> load_jsonl(const std::string& path);
std::vector<Example> load_csv(const std::string& path);
// The same from text already in memory; `name` stands for the file in messages.
std::vector<Example> parse_jsonl(const std::string& text, const std::string& name);
std::vector<Example> parse_csv(const std::string& text, const std::string& name);

// The JSON lines of `text` in order, parsed as ordered objects (a UTF-8 BOM and blank lines are
// skipped); `where` is "name:line". fn returns false to stop. Invalid JSON is a grpo::Error
// naming the line.
void for_each_json_line(const std::string& text, const std::string& name,
                        const std::function<bool(nlohmann::ordered_json&& row, const std::string& where)>& fn);

// One row (a JSON object of columns) -> Example. `where` is "file:line" for messages;
// `from_csv` makes "messages" a JSON string to parse and empty cells mean absent.
Example example_from_row(const nlohmann::json& row, int64_t index, const std::string& where, bool from_csv);

// "role: content" lines joined by "\n" (a readable fallback when no chat template exists).
std::string render_messages(const nlohmann::json& messages);

}  // namespace grpo::rollout
