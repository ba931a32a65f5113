// Parquet read benchmark: see parquet_bench.h.
#include "core/common/bench_stats.h"
#include "tools/parquet_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sys/stat.h>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/io/parquet.h"

namespace grpo::io {
namespace {

using Clock = std::chrono::steady_clock;

// FNV-1a over every string value's UTF-8 bytes then 0xFF, depth first (parquet_bench.mjs agrees).
struct StringHash {
  uint32_t h = 2166136261u;
  void add(uint8_t b) { h = (h ^ b) * 16777619u; }
  void walk(const ParquetRow& v) {
    if (v.is_string()) {
      for (unsigned char c : v.get_ref<const std::string&>()) add(c);
      add(0xFF);
    } else if (v.is_array() || v.is_object()) {
      for (const auto& e : v) walk(e);
    }
  }
};

}  // namespace

nlohmann::json bench_parquet(const std::string& file, const std::string& node_script_dir, int passes) {
  using nlohmann::json;
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) throw Error(file, "cannot read the bench file", "make one with: node tests/bench/make_parquet_bench_file.mjs build/bench/gsm8k_100k.parquet");
  json result;
  result["file"] = file;
  result["file_bytes"] = static_cast<uint64_t>(st.st_size);
  passes = std::max(1, passes);

  std::vector<double> times;
  uint64_t rows = 0;
  size_t groups = 0;
  for (int pass = 0; pass < passes; ++pass) {
    auto t0 = Clock::now();
    ParquetFile f = ParquetFile::open(file);
    uint64_t n = 0;
    f.for_each_row([&](ParquetRow&&) {
      ++n;
      return true;
    });
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    rows = n;
    groups = f.row_groups().size();
  }
  StringHash hash;  // outside the timing
  ParquetFile::open(file).for_each_row([&](ParquetRow&& row) {
    hash.walk(row);
    return true;
  });
  const double seconds = median(times);
  const double mb = static_cast<double>(st.st_size) / 1e6;
  result["row_groups"] = groups;
  result["rows"] = rows;
  result["seconds"] = seconds;
  result["cold_seconds"] = times[0];
  result["rows_per_s"] = static_cast<double>(rows) / seconds;
  result["mb_per_s"] = mb / seconds;
  result["strings_hash"] = hash.h;

  for (const char* k : {"ref_rows", "ref_seconds", "ref_rows_per_s", "ref_mb_per_s", "ratio", "rows_match", "strings_match"})
    result[k] = nullptr;
  std::string cmd = "node " + shell_quote(path_join(node_script_dir, "parquet_bench.mjs")) + " " + shell_quote(file) + " " +
                    std::to_string(passes) + " 2>&1";
  std::string output;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    result["ref_error"] = "cannot run node";
    return result;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) output.append(buf, n);
  int status = pclose(p);
  size_t last = output.find_last_of('{');
  json ref = last == std::string::npos ? json() : json::parse(output.substr(last), nullptr, false);
  if (status != 0 || ref.is_discarded() || !ref.is_object() || !ref.contains("seconds")) {
    result["ref_error"] = "node " + node_script_dir + "/parquet_bench.mjs failed (are node and `npm ci --prefix " +
                          node_script_dir + "` installed?): " + output.substr(0, 400);
    return result;
  }
  result["ref_rows"] = ref["rows"];
  result["ref_seconds"] = ref["seconds"];
  result["ref_rows_per_s"] = ref["rows_per_s"];
  result["ref_mb_per_s"] = ref["mb_per_s"];
  result["ratio"] = ref["seconds"].get<double>() / seconds;  // > 1: we are faster
  result["rows_match"] = ref["rows"].get<uint64_t>() == rows;
  result["strings_match"] = ref["strings_hash"].get<uint32_t>() == hash.h;
  return result;
}

}  // namespace grpo::io
