// One run on disk (docs/ARCHITECTURE.md, "Who owns which file of a run"): the run's config, its
// metrics, events and samples files (one JSON object a line), adapters/policy-v<N>/ and
// checkpoints/step-<S>/. This file pair is the only code that knows those names and reads or writes
// those files:
//   RunFolder     a read-only view of a run folder (creates nothing): paths, the names of
//                 versions and checkpoints, listings, typed readers of every file.
//   RunDirectory  a RunFolder that the run's writer holds: creates the layout, appends records,
//                 writes the config, publishes adapter versions, truncates metrics on resume.
//   JsonlTail     follows one of the JSONL files as it grows, returning only whole new lines.
// Every file is written through atomic rename or as whole appended lines, so a reader never sees
// a half-written file except a last line still being appended ("torn"): readers never return it.
// Adapter versions are published by renaming a complete temporary directory (with SHA256SUMS)
// into place; names are never reused, and only the newest `keep` versions are kept.
// Torch-free and Qt-free, so every front end may include it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/io/sha256sums.h"
#include "core/records/engine_types.h"

namespace grpo::run {

// SHA256SUMS of published versions and checkpoints (core/io/sha256sums.h).
using io::sha256sums;
using io::verify_sha256sums;

// One whole (newline-terminated), non-blank line of a run's JSONL file.
struct JsonlLine {
  int64_t number = 0;     // 1-based line number in the file (blank lines count)
  nlohmann::json record;  // the JSON object on the line; null when the line is not one
  bool well_formed() const { return record.is_object(); }
};

// The whole lines of a JSONL file between two byte offsets.
struct JsonlChunk {
  std::vector<JsonlLine> lines;  // non-blank whole lines, in file order
  uint64_t next_offset = 0;      // just after the last whole line: where a torn last line begins
  int64_t next_line = 1;         // the line number at next_offset
};

// What a reader does with a whole line that is not a JSON object (a line a power cut left short,
// which the next append then continued): Skip it (live views, status, resume; the count is in
// the readers' `malformed`), or Refuse the file with a grpo::Error naming "<file>:<line>" (exports,
// which must not silently drop a step).
enum class Malformed { Skip, Refuse };

// Follows one JSONL file as it grows: each read_new() returns the whole lines appended since the
// previous one; a torn last line waits for its newline. A file that shrank (rewritten by
// RunDirectory::truncate_metrics) is followed again from its start. Each call reads at most
// kChunkBytes; a single line longer than that is returned as one malformed line (null record).
// Never throws: a missing or unreadable file reads as nothing new. Not thread-safe.
class JsonlTail {
public:
  static constexpr uint64_t kChunkBytes = uint64_t(64) << 20;

  // From byte `offset` (0: the whole file), whose line number is `line`.
  explicit JsonlTail(std::string path, uint64_t offset = 0, int64_t line = 1);
  // From the file's current end (only lines appended later are read; an absent file is read
  // from its start once it appears). Line numbers then count from there (1).
  static JsonlTail from_end(std::string path);

  std::vector<JsonlLine> read_new();
  // The JSON objects of read_new(); lines that are not one are skipped (counted in malformed()).
  std::vector<nlohmann::json> read_new_records();

  const std::string& path() const { return path_; }
  uint64_t offset() const { return offset_; }
  int64_t malformed() const { return malformed_; }

private:
  std::string path_;
  uint64_t offset_ = 0;
  int64_t line_ = 1;
  int64_t malformed_ = 0;
  bool skipping_ = false;  // inside an over-long line: drop bytes up to its newline
};

class RunFolder {
public:
  // The names of a run's files and folders, for messages and labels. Only run_dir.cpp opens them.
  static constexpr const char* kConfigFile = "config.json";
  static constexpr const char* kMetricsFile = "metrics.jsonl";
  static constexpr const char* kEventsFile = "events.jsonl";
  static constexpr const char* kSamplesFile = "samples.jsonl";
  static constexpr const char* kAdaptersDir = "adapters";
  static constexpr const char* kCheckpointsDir = "checkpoints";
  static constexpr const char* kExportDir = "export";
  // Workers launched through Slurm: the jobs the run owns (cancelled at its end, or by the next
  // start after a crash) and a folder for their batch script, logs and the token copy they read.
  static constexpr const char* kSlurmJobsFile = "slurm-jobs.json";
  static constexpr const char* kSlurmDir = "slurm";
  // Bounds on reads: a config is small; a JSONL file is read whole only up to 1 GiB (JsonlTail
  // reads any size in chunks); read_samples looks at most kMaxSamplesWindow bytes back.
  static constexpr size_t kMaxConfigBytes = size_t(16) << 20;
  static constexpr uint64_t kMaxJsonlReadBytes = uint64_t(1) << 30;
  static constexpr uint64_t kMaxSamplesWindow = uint64_t(256) << 20;

  // A view of `root` that creates and checks nothing: a missing file reads as absent (readers
  // say so where it matters). Throws only when `root` is empty.
  explicit RunFolder(std::string root);
  // The same for reading a run that must exist (`grpo status`, the app's history): a grpo::Error
  // naming `root` when it is not a directory. Creates nothing.
  static RunFolder open_existing(const std::string& root);

  const std::string& root() const { return root_; }
  std::string path(const std::string& relative) const;
  std::string config_path() const { return path(kConfigFile); }
  std::string metrics_path() const { return path(kMetricsFile); }
  std::string events_path() const { return path(kEventsFile); }
  std::string samples_path() const { return path(kSamplesFile); }
  std::string slurm_jobs_path() const { return path(kSlurmJobsFile); }
  std::string slurm_dir() const { return path(kSlurmDir); }

  // ---- names: the one place that writes and parses "policy-v<N>" and "step-<S>" ----
  static std::string adapter_name(int64_t version);  // "policy-v3"
  // 3 for "policy-v3"; nullopt for anything else ("policy-vX", "policy-v-1", "policy-v", "policy-v03x",
  // numbers past 18 digits, the ".tmp-policy-v3-..." of a publication in progress).
  static std::optional<int64_t> parse_adapter_name(std::string_view name);
  static std::string checkpoint_name(int64_t step);  // "step-12"
  static std::optional<int64_t> parse_checkpoint_name(std::string_view name);

  // ---- listings ----
  std::string adapters_dir() const { return path(kAdaptersDir); }
  std::string checkpoints_dir() const { return path(kCheckpointsDir); }
  std::string adapter_dir(int64_t version) const;  // adapters/policy-v<version>
  std::string checkpoint_dir(int64_t step) const;  // checkpoints/step-<step>
  std::vector<int64_t> adapter_versions() const;   // published versions (directories), ascending
  std::vector<int64_t> checkpoint_steps() const;   // checkpoint directories, ascending (intact or not)

  // ---- typed readers ----
  bool has_file(const char* name) const;  // e.g. has_file(kMetricsFile)
  bool has_config() const { return has_file(kConfigFile); }
  // The run's resolved config (read bounded by kMaxConfigBytes, nesting checked). grpo::Error
  // naming the file when it is missing ("this is not a run directory"), too large, not JSON or
  // not a JSON object.
  nlohmann::json read_config() const;
  // The records of the metrics / events files in file order: every whole line that is a JSON
  // object; a torn last line is not read; an absent file has none. `malformed` (when given)
  // gets the number of lines skipped under Malformed::Skip. grpo::Error naming the file past
  // kMaxJsonlReadBytes.
  std::vector<nlohmann::json> read_metrics(Malformed on_malformed = Malformed::Skip, int64_t* malformed = nullptr) const;
  std::vector<nlohmann::json> read_events(Malformed on_malformed = Malformed::Skip, int64_t* malformed = nullptr) const;
  // The last `limit` records of the samples file (oldest first), reading only its end (at most
  // kMaxSamplesWindow bytes), so a long run's file costs no more than the rows shown.
  std::vector<nlohmann::json> read_samples(size_t limit) const;
  // The metrics records with "step" > since (a live view's next page).
  std::vector<nlohmann::json> metrics_since(int64_t since) const;
  // The last metrics record, or null when there is none.
  nlohmann::json last_metrics() const;

  // ---- JSONL files in general ----
  // The whole lines of `path` in [offset, end) (end clipped to the file's size); an absent file
  // gives none. grpo::Error naming the file when the range is longer than kMaxJsonlReadBytes or
  // the file cannot be read.
  static JsonlChunk read_jsonl(const std::string& path, uint64_t offset = 0, uint64_t end = UINT64_MAX);
  // The JSON objects of `lines`, applying `on_malformed` (errors name `path` and the line).
  static std::vector<nlohmann::json> records_of(const std::vector<JsonlLine>& lines, const std::string& path,
                                                Malformed on_malformed, int64_t* malformed = nullptr);
  JsonlTail follow_metrics() const { return JsonlTail(metrics_path()); }    // from the start
  JsonlTail follow_events() const { return JsonlTail::from_end(events_path()); }  // from now on

protected:
  std::string root_;
};

// A sampled completion as the samples file holds it: {"step", "policy_version", "group", "prompt",
// "completion", "answer", "reward" (null: nothing scored it), "rewards": {function: score or null},
// "advantage", "finish_reason"}; and back, a field missing (a record from before it existed) or of
// another type read as empty.
nlohmann::json sample_to_json(const SampleRecord& s);
SampleRecord sample_from_json(const nlohmann::json& j);

class RunDirectory : public RunFolder {
public:
  // Creates the directory layout if needed (mkdir -p); throws grpo::Error naming the path.
  explicit RunDirectory(std::string root);

  void write_config(const nlohmann::json& config) const;  // the config file, atomically
  // One record a line, appended as append_jsonl does: a step's metrics ({"step", "time", ...}),
  // an event ({"event", "time", ...}), a sampled completion ({"step", "prompt", ...}).
  void append_metrics(const nlohmann::json& record) const { append_jsonl(kMetricsFile, record); }
  void append_event(const nlohmann::json& record) const { append_jsonl(kEventsFile, record); }
  void append_sample(const nlohmann::json& record) const { append_jsonl(kSamplesFile, record); }
  // Appends one JSON object as one line (a single write(2) with O_APPEND). A write the file system
  // cuts short (disk full, file-size limit) is truncated away again, so the file never holds a
  // torn line that a later append would glue onto; appends within the process are serialized.
  void append_jsonl(const std::string& file, const nlohmann::json& record) const;
  // The line append_jsonl writes for `record`, without its newline (invalid UTF-8 replaced);
  // the same record always gives the same text, so readers can match lines to records by it.
  static std::string jsonl_line(const nlohmann::json& record);
  // On resume from a checkpoint: keeps only the metrics lines whose "step" <= step (lines that
  // are not a JSON object with a "step", and a torn last line, are dropped), by an atomic
  // rewrite. Returns the lines kept; 0 when there is no metrics file.
  int64_t truncate_metrics(int64_t step) const;

  // Publishes adapters/policy-v<version>/: `write_files(tmp_dir)` fills a temporary directory,
  // SHA256SUMS is added, and the directory is renamed into place. Returns its path and deletes
  // versions older than the newest `keep`. Throws if the version already exists.
  std::string publish_adapter(int64_t version, const std::function<void(const std::string&)>& write_files,
                              int64_t keep);
  // How many adapter versions a run keeps published: every version a rollout may still be
  // sampled from (max_staleness + 1) plus the one being swapped in (docs/workers.md, "Adapter
  // versions kept").
  static int64_t keep_versions(int64_t max_staleness) { return max_staleness + 2; }
  // A temporary directory for checkpoint `step` (checkpoints/.tmp-step-<S>-<pid>, emptied), to be
  // filled and passed to commit_checkpoint.
  std::string checkpoint_temporary(int64_t step) const;
  // Renames a filled temporary into checkpoints/step-<step> (replacing one of the same step, as a
  // re-run after a resume does), then deletes all but the newest `keep`. Returns the final path.
  std::string commit_checkpoint(int64_t step, const std::string& tmp_dir, int64_t keep) const;
  // Deletes adapters/.tmp-* and checkpoints/.tmp-* (half-written by a killed trainer; never
  // visible as versions). Only the run's single trainer calls this, at start.
  void remove_stale_temporaries() const;
};

// Whether a failed write was the file system's doing (full, over quota, file too large, I/O
// error), told from the error text: the errno text our writers and std::filesystem put there
// (every bucket file, the .pt ones too, goes through them). Returns that text ("No space left on
// device"), else "".
std::string storage_fault_of(const std::string& error_text);
// The mount holding `path`, for messages: "/mnt/bucket (tmpfs, 12 KiB free of 8.0 MiB)".
std::string describe_filesystem(const std::string& path);

}  // namespace grpo::run
