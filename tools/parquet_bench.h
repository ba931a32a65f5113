// `grpo bench parquet FILE`: our Parquet reader's rows/s and MB/s against hyparquet (npm, through
// Node: tests/bench/parquet_bench.mjs) reading the same file in the same run. The bench file comes
// from tests/bench/make_parquet_bench_file.mjs (e.g. 100,000 GSM8K-like rows, SNAPPY).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace grpo::io {

// Reads every row of `file` `passes` times (open + decode + JSON rows, one row group in memory)
// and reports the median; then runs `node <node_script_dir>/parquet_bench.mjs <file>` and
// compares. Returns {file, file_bytes, row_groups, rows, seconds, cold_seconds, rows_per_s,
// mb_per_s, strings_hash, ref_rows, ref_seconds, ref_rows_per_s, ref_mb_per_s, ratio,
// rows_match, strings_match, ref_error}; ref_* are null when node or the npm packages are missing
// (ref_error says why). MB/s counts the file's bytes on disk.
nlohmann::json bench_parquet(const std::string& file, const std::string& node_script_dir, int passes = 5);

}  // namespace grpo::io
