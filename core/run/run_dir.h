// RunDirectory: one run on disk (DESIGN.md, "One run on disk"): config.json, metrics.jsonl,
// events.jsonl, samples.jsonl, adapters/policy-v<N>/ and checkpoints/. Every file is written
// through atomic rename or as whole appended lines, so a reader never sees a half-written file.
// Adapter versions are published by renaming a complete temporary directory (with SHA256SUMS)
// into place; names are never reused, and only the newest `keep` versions are kept.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace grpo::run {

class RunDirectory {
public:
  // Creates the directory layout if needed (mkdir -p); throws grpo::Error naming the path.
  explicit RunDirectory(std::string root);

  const std::string& root() const { return root_; }
  std::string path(const std::string& relative) const;

  // The names of a run's files, for messages and labels; only run_dir.cpp opens them.
  static constexpr const char* kConfigFile = "config.json";
  static constexpr const char* kMetricsFile = "metrics.jsonl";
  static constexpr const char* kEventsFile = "events.jsonl";
  static constexpr const char* kSamplesFile = "samples.jsonl";

  void write_config(const nlohmann::json& config) const;  // config.json, atomically
  // One record a line, appended as append_jsonl does: a step's metrics ({"step", "time", ...}),
  // an event ({"event", "time", ...}), a sampled completion ({"step", "prompt", ...}).
  void append_metrics(const nlohmann::json& record) const { append_jsonl(kMetricsFile, record); }
  void append_event(const nlohmann::json& record) const { append_jsonl(kEventsFile, record); }
  void append_sample(const nlohmann::json& record) const { append_jsonl(kSamplesFile, record); }
  std::string metrics_path() const { return path(kMetricsFile); }
  std::string events_path() const { return path(kEventsFile); }
  std::string samples_path() const { return path(kSamplesFile); }
  // Appends one JSON object as one line (a single write(2) with O_APPEND). A write the file system
  // cuts short (disk full, file-size limit) is truncated away again, so the file never holds a
  // torn line that a later append would glue onto; appends within the process are serialized.
  void append_jsonl(const std::string& file, const nlohmann::json& record) const;
  // The line append_jsonl writes for `record`, without its newline (invalid UTF-8 replaced);
  // the same record always gives the same text, so readers can match lines to records by it.
  static std::string jsonl_line(const nlohmann::json& record);

  // Publishes adapters/policy-v<version>/: `write_files(tmp_dir)` fills a temporary directory,
  // SHA256SUMS is added, and the directory is renamed into place. Returns its path and deletes
  // versions older than the newest `keep`. Throws if the version already exists.
  std::string publish_adapter(int64_t version, const std::function<void(const std::string&)>& write_files,
                              int64_t keep);
  std::vector<int64_t> adapter_versions() const;  // published versions, ascending
  // How many adapter versions a run keeps published: every version a rollout may still be
  // sampled from (max_staleness + 1) plus the one being swapped in (facts §1.5).
  static int64_t keep_versions(int64_t max_staleness) { return max_staleness + 2; }
  // Deletes adapters/.tmp-* and checkpoints/.tmp-* (half-written by a killed trainer; never
  // visible as versions). Only the run's single trainer calls this, at start.
  void remove_stale_temporaries() const;
  std::string adapter_dir(int64_t version) const;

private:
  std::string root_;
};

// Whether a failed write was the file system's doing (full, over quota, file too large, I/O
// error), told from the error text: the errno text our writers and std::filesystem put there
// (every bucket file, the .pt ones too, goes through them). Returns that text ("No space left on
// device"), else "".
std::string storage_fault_of(const std::string& error_text);
// The mount holding `path`, for messages: "/mnt/bucket (tmpfs, 12 KiB free of 8.0 MiB)".
std::string describe_filesystem(const std::string& path);

// "sha256  name" lines for every regular file of `dir` (sorted, as sha256sum writes them).
std::string sha256sums(const std::string& dir);
// Checks every line of dir/SHA256SUMS; returns the names that do not match (empty = intact).
std::vector<std::string> verify_sha256sums(const std::string& dir);

}  // namespace grpo::run
