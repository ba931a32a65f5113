// Where a run's prompts come from: a file (JSONL, CSV or Parquet), a folder laid out like a
// Hugging Face dataset repo, or a dataset repo id in the Hub cache (TRL's dataset_name), with the
// config and split chosen as the `datasets` library chooses them, and columns renamed on the way.
//
// Data files of a split, in the order `datasets` (data_files.py, utils/metadata.py) tries them:
//   1. README.md front matter `configs:` — config_name, data_files (a path or glob, a list of
//      them, or a list of {split, path}), data_dir, default: true. No config asked: the one marked
//      default, else the one named "default", else the only one.
//   2. The Parquet conversion branch (revision refs/convert/parquet): <config>/<split>/*.parquet,
//      or <config>/partial-<split>/*.parquet.
//   3. Default patterns under <config>/ when such a folder exists, else the repo root: sharded
//      data/<split>-NNNNN-of-NNNNN*, then split keywords in directory names, then in file names
//      (train|training, validation|valid|dev|val, test|testing|eval|evaluation, delimited by
//      "-._ " or digits), else every data file is "train".
// Data files are .parquet, .jsonl, .ndjson, .json and .csv; files are read in sorted order.
//
// Columns: `columns` renames before rows become Examples ({"question": "prompt"}), so any column
// can serve as the prompt or the answer; GSM8K's "#### 42" answers are reduced to 42 by the
// rewards (reward_math.h reference_answer), not here.
//
// Untrusted input: README.md front matter is at most 256 KiB and 32 levels deep; a split has at
// most 10,000 files; every error names the file, the config or the split, and lists what exists.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/rollout/dataset.h"

namespace grpo::rollout {

struct DatasetRef {
  std::string name;              // file, folder, or "org/name" repo id in the Hub cache
  std::string config;            // "" = the default config
  std::string split = "train";
  std::string revision = "main";  // for a repo id: branch, tag, commit or refs/convert/parquet
  nlohmann::json columns = nlohmann::json::object();  // {"source column": "new name"}
  std::string cache_dir;         // "" = the Hub cache of the environment (core/hub/hf_cache.h)
};

// The Hub snapshot commit `ref` resolves to when it names a repo id in the cache; "" for a file
// or a folder. A run pins it in its resolved config (dataset_revision), as it pins the model's.
std::string dataset_commit(const DatasetRef& ref);

// The data files of `ref`'s split, sorted. A file name is itself; a folder or repo id is
// resolved as above. Throws grpo::Error naming what was searched and what exists.
std::vector<std::string> dataset_files(const DatasetRef& ref);

// The configs a folder laid out like a dataset repo declares (README.md), in file order; empty
// when it declares none. `default_config` receives the one used when none is asked ("" if none).
std::vector<std::string> dataset_configs(const std::string& repo_dir, std::string* default_config = nullptr);

// Renames columns of one row per `columns` ({"from": "to"}); the row keeps its other columns.
// Throws grpo::Error naming `where` when two columns would end up with one name.
nlohmann::ordered_json rename_columns(const nlohmann::ordered_json& row, const nlohmann::json& columns,
                                      const std::string& where);

// Every row of the split's files in order (columns renamed), as a JSON object in the file's column
// order; fn returns false to stop. Parquet is read one row group at a time.
void for_each_dataset_row(const DatasetRef& ref,
                          const std::function<bool(nlohmann::ordered_json&& row, const std::string& where)>& fn);

// The split as Examples (dataset.h's column rules after renaming). An empty split is an error.
std::vector<Example> load_dataset_ref(const DatasetRef& ref);

// Checks a `columns` mapping: an object of non-empty strings. Throws naming `source`.
void validate_column_map(const nlohmann::json& columns, const std::string& source);

}  // namespace grpo::rollout
