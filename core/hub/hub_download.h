// download_snapshot: `grpo download`. Fetches a Hub repo (or the files of it matching --include)
// over the Hub's HTTP file API and writes the cache exactly as huggingface_hub's
// snapshot_download does (_snapshot_download.py, file_download.py), so Python tools read our
// downloads offline and we read theirs:
//   GET  {endpoint}/api/{models|datasets}/{repo}/revision/{rev}      -> "sha" (the commit), "siblings"
//   HEAD {endpoint}/[datasets/]{repo}/resolve/{commit}/{path}          -> X-Repo-Commit, X-Linked-Etag
//        (or ETag), X-Linked-Size (or Content-Length), Location (an LFS file's CDN URL)
//   GET  the location, Range: bytes=N- to resume blobs/<etag>.incomplete
//   blobs/<etag> (sha256 of an LFS file, git-sha1 of a regular one: both verified),
//   snapshots/<commit>/<path> -> ../../blobs/<etag> (relative links), refs/<rev> = the commit,
//   .locks/<repo folder>/<etag>.lock (flock, as filelock takes it).
// A file is linked into snapshots/ only once its blob is complete and verified: a failed or
// interrupted download leaves at most blobs/<etag>.incomplete, which the next run resumes.
//
// Everything from the server is bounded: JSON size and nesting, file count, sibling names (no
// "..", absolute paths or backslashes), ETags (hex digests only: they become file names), sizes
// (checked sums against a total limit), redirects, and each transfer's idle time.
//
// Blocking: it runs its own event loop in the calling thread, which needs a QCoreApplication in
// the process (the app calls it from a worker thread). HF_HUB_OFFLINE=1 never touches the network.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/hub/hf_cache.h"

namespace grpo::hub {

struct DownloadProgress {
  size_t files_done = 0, files_total = 0;
  uint64_t bytes_done = 0, bytes_total = 0;  // of the files being fetched (resumed bytes count as done)
  std::string current;                       // a file in flight
};

struct DownloadOptions {
  std::string repo_id;
  RepoType repo_type = RepoType::Model;
  std::string revision = "main";
  std::vector<std::string> include;          // fnmatch globs (allow_patterns); empty = every file
  std::string cache_dir;                     // "" = hub_cache_dir()
  std::string endpoint;                      // "" = hub_endpoint()
  std::optional<std::string> token;          // nullopt = hub_token(); "" = send none
  std::optional<bool> offline;               // nullopt = hub_offline()
  int parallel = 4;                          // files in flight at once (1..16)
  int idle_timeout_ms = 30000;               // a request without a byte for this long fails
  int max_redirects = 5;
  size_t max_json_bytes = 32u << 20;         // the revision listing
  int max_json_depth = 64;
  size_t max_files = 100000;
  uint64_t max_total_bytes = uint64_t(4) << 40;  // 4 TiB over the files to fetch
  std::function<void(const DownloadProgress&)> on_progress;  // from the calling thread
};

struct DownloadResult {
  std::string snapshot_dir;   // <cache>/<repo folder>/snapshots/<commit>
  std::string commit;
  size_t files = 0;           // files in the snapshot after the call (those asked for)
  size_t fetched = 0;         // files whose blob came over the network this time
  uint64_t bytes = 0;         // bytes received this time
  bool offline = false;       // resolved from the cache without the network
};

DownloadResult download_snapshot(const DownloadOptions& options);

}  // namespace grpo::hub
