// AdapterStore: the LoRA adapters a worker has loaded, by lora_name (vLLM's runtime LoRA updating;
// docs/workers.md, "Loading and unloading adapters"). Each adapter is its own CausalLM whose base
// weights alias the worker's base model (no copy) with the adapter's LoRA factors attached, so
// requests for different versions can be served side by side and an in-flight batch keeps its
// adapter alive after an unload (shared_ptr).
//
// Paths are confined to the bucket root: lora_path (absolute, or relative to the root) and every
// file read must resolve (realpath, symlinks followed) inside it, otherwise 400. A directory that
// is not there yet (a mount that has not caught up) answers vLLM's "No adapter found for <path>"
// (404), which routers retry. When the directory has SHA256SUMS (RunDirectory::publish_adapter
// writes one; core/io/sha256sums.h) every listed file is verified before use and a mismatch is
// refused.
// Errors are HttpError with vLLM's statuses and messages.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/model/causal_lm.h"

namespace grpo::cluster {

struct LoadedAdapter {
  std::string name;        // lora_name
  std::string path;        // resolved directory (realpath), or the URL it was fetched from
  std::string sha256;      // hex SHA-256 of adapter_model.safetensors as loaded
  bool verified = false;   // SHA256SUMS was present and matched
  int64_t rank = 0;
  double lora_alpha = 0;
  int64_t loaded_at = 0;   // unix seconds
  model::CausalLM model{nullptr};
};

// The largest adapter file a worker fetches from a bucket URL.
inline constexpr int64_t kMaxAdapterFileBytes = int64_t(8) << 30;

struct AdapterStoreOptions {
  std::string bucket_root;  // empty: loading adapters is refused
  int max_loras = 8;        // loaded at once; a load beyond this is refused (never a silent eviction)
  int64_t max_lora_rank = 64;
  // Downloads `url` to the file `dest`; throws HttpError (404 when the server has no such file).
  // GET url into dest; more than max_bytes is an error (SHA256SUMS gets kMaxSha256SumsBytes).
  std::function<void(const std::string& url, const std::string& dest, int64_t max_bytes)> fetch;
  std::string download_root;  // where URL adapters are fetched to (empty: URLs are refused)
};

class AdapterStore {
public:
  AdapterStore(model::CausalLM base, AdapterStoreOptions options);

  // Thread-safe. Throws HttpError: 400 name already loaded (unless inplace) / path outside the
  // bucket / checksum mismatch / unsupported adapter / too many loaded; 404 "No adapter found".
  std::shared_ptr<const LoadedAdapter> load(const std::string& lora_name, const std::string& lora_path, bool inplace);
  // 404 "cannot be found" when not loaded.
  void unload(const std::string& lora_name);
  std::shared_ptr<const LoadedAdapter> find(const std::string& lora_name) const;  // null if absent
  std::vector<std::shared_ptr<const LoadedAdapter>> list() const;                  // by load time
  const AdapterStoreOptions& options() const { return options_; }

  // The real directory for a lora_path, confined to the bucket (see above). Exposed for tests.
  std::string resolve(const std::string& lora_name, const std::string& lora_path) const;

private:
  // `root`: the directory every file read must resolve inside; `require_sums`: refuse without
  // SHA256SUMS.
  std::shared_ptr<LoadedAdapter> build(const std::string& lora_name, const std::string& dir, const std::string& root,
                                       bool require_sums) const;
  std::shared_ptr<LoadedAdapter> fetch_and_build(const std::string& lora_name, const std::string& url) const;

  model::CausalLM base_;
  AdapterStoreOptions options_;
  std::string root_real_;      // realpath of bucket_root
  std::string download_real_;  // realpath of download_root
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const LoadedAdapter>> loaded_;
  std::set<std::string> loading_;
  int64_t sequence_ = 0;
  std::map<std::string, int64_t> order_;
};

bool is_url(const std::string& path);  // http:// or https://

}  // namespace grpo::cluster
