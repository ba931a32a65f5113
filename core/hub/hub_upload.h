// push_folder: `grpo push` and `grpo export --push-to-hub`. Uploads a local folder (an exported
// PEFT adapter, a merged model) to a Hub repo as huggingface_hub's upload_folder does
// (hf_api.py create_repo / create_commit, _commit_api.py, lfs.py), in this order:
//   POST {endpoint}/api/repos/create            {"name", "organization"?, "private", "type"?}
//        200: created; 409: a repo of that name exists, then GET /api/{models|datasets}/{repo}
//        says whether it is ours to push to (else the name is taken by another kind of repo)
//   POST /api/{type}s/{repo}/branch/{rev}        (a --revision other than main; 409 = exists)
//   POST /api/{type}s/{repo}/preupload/{rev}     {"files": [{"path", "sample" (base64 of the
//        first 512 bytes), "size"}]}, 256 at a time -> [{"path", "uploadMode": "lfs"|"regular",
//        "shouldIgnore", "oid"?}]; a file whose "oid" is ours (sha256 for LFS, git's blob sha1
//        for regular files) is already there and is left out
//   POST {endpoint}/[datasets/]{repo}.git/info/lfs/objects/batch  (application/vnd.git-lfs+json)
//        {"operation": "upload", "transfers": ["basic", "multipart"], "objects": [{"oid": sha256,
//        "size"}], "hash_algo": "sha256", "ref": {"name": rev}} -> per object no "actions" (the
//        Hub has it: not sent), or "actions": {"upload": {"href", "header"}, "verify"?}:
//        basic: PUT the bytes to href; multipart (header "chunk_size" and "1".."N" part URLs):
//        PUT each chunk, keep its ETag, POST {"oid", "parts": [{"partNumber", "etag"}]} to href;
//        then POST {"oid", "size"} to verify.href when there is one
//   POST /api/{type}s/{repo}/commit/{rev}        application/x-ndjson, one line each:
//        {"key": "header", "value": {"summary", "description"}}
//        {"key": "file", "value": {"content": base64, "path", "encoding": "base64"}}
//        {"key": "lfsFile", "value": {"path", "algo": "sha256", "oid", "size"}}
//        (?create_pr=1 for a pull request) -> {"commitUrl", "commitOid", "pullRequestUrl"?}
// The commit is the last call, made only once every LFS object is uploaded (and verified): a
// failure anywhere before it leaves the repo as it was. Idempotent calls (preupload, batch,
// PUTs, completion, verify) are retried with backoff on 5xx and on a cut or stalled connection;
// the commit is not (it may have been applied).
//
// The token (HF_TOKEN, else the huggingface-cli token file) goes only to the endpoint's origin,
// never to a storage URL on another host, and is never part of a message. Everything from the
// server is bounded: answer sizes and JSON nesting, object and part counts, URL lengths, ETags,
// sizes (checked arithmetic).
//
// Blocking, like download_snapshot: it runs event loops in the calling thread, which needs a
// QCoreApplication in the process.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/hub/hf_cache.h"

namespace grpo::hub {

struct PushProgress {
  std::string stage;            // "hashing" | "preupload" | "uploading" | "committing" | "done"
  size_t files_done = 0, files_total = 0;
  uint64_t bytes_done = 0, bytes_total = 0;  // hashing: bytes read; uploading: LFS bytes sent
  std::string current;          // the file being hashed or sent
};

struct PushOptions {
  std::string folder;                     // the local folder; its files keep their relative paths
  std::string path_in_repo;               // "" = the repo's root; else the folder's files go under it
  std::string repo_id;
  RepoType repo_type = RepoType::Model;
  std::string revision = "main";          // a branch (created from main when missing) or refs/pr/N
  bool private_repo = false;              // only when the repo is created now
  bool create_pr = false;                 // open a pull request instead of committing to revision
  std::string commit_message;             // "" = "Upload folder with GRPO Studio"
  std::string commit_description;
  std::string endpoint;                   // "" = hub_endpoint() (HF_ENDPOINT)
  std::optional<std::string> token;       // nullopt = hub_token(); pushing needs one
  int idle_timeout_ms = 60000;            // a request without a byte either way for this long fails
  int max_retries = 5;                    // per idempotent call, after the first try
  int retry_base_ms = 1000;               // backoff: base * 2^attempt, at most retry_max_ms
  int retry_max_ms = 8000;
  size_t max_json_bytes = 32u << 20;      // any answer (a multipart batch answer lists every part URL)
  int max_json_depth = 16;                // the Hub's answers nest 4 levels
  size_t max_files = 10000;               // files in the folder
  uint64_t max_total_bytes = uint64_t(2) << 40;   // 2 TiB over the folder
  uint64_t max_regular_file_bytes = 64u << 20;    // a file the server wants inline (base64 in the commit)
  size_t max_parts = 10000;               // multipart: parts of one object (S3's limit)
  std::function<void(const PushProgress&)> on_progress;  // from the calling thread
};

struct PushResult {
  std::string repo_url;         // {endpoint}/{repo} (datasets/ prefixed)
  std::string commit_url;       // "" when nothing changed (no commit made)
  std::string commit_oid;
  std::string pr_url;           // with create_pr
  bool created = false;         // the repo was created by this call
  bool no_changes = false;      // every file was already there: no commit
  size_t files = 0;             // files in the folder
  size_t unchanged = 0;         // left out: the Hub has the same content at that path
  size_t regular_files = 0;     // sent inline in the commit
  size_t lfs_files = 0;         // committed as LFS pointers
  size_t lfs_uploaded = 0;      // LFS objects whose bytes were sent now
  size_t lfs_present = 0;       // LFS objects the Hub already stored (not sent)
  size_t parts = 0;             // multipart parts sent
  uint64_t lfs_bytes_sent = 0;  // bytes of LFS objects sent (each counted once, retries not)
  int retries = 0;              // tries repeated after a 5xx or a cut connection
};

PushResult push_folder(const PushOptions& options);

}  // namespace grpo::hub
