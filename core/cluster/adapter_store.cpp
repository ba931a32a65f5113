#include "core/cluster/adapter_store.h"

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <stdlib.h>

#include <torch/torch.h>

#include "core/cluster/http_message.h"
#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/strings.h"
#include "core/io/sha256sums.h"
#include "core/model/peft_io.h"

namespace fs = std::filesystem;

namespace grpo::cluster {
namespace {

// True when `p` equals `root` or lies below it, compared component by component.
bool is_within(const fs::path& p, const fs::path& root) {
  auto pi = p.begin();
  for (auto ri = root.begin(); ri != root.end(); ++ri, ++pi) {
    if (ri->empty() && std::next(ri) == root.end()) return true;  // root ends with '/'
    if (pi == p.end() || *pi != *ri) return false;
  }
  return true;
}

std::string not_found(const std::string& name, const std::string& path) {
  return "Loading lora " + name + " failed: No adapter found for " + path;
}

// fs::exists's error for a path this process may not look at (a bucket mount without read
// permission, as opposed to a missing path) becomes an error naming the path.
void throw_if_unreadable(const fs::path& p, const std::error_code& ec) {
  if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
    throw HttpError(400, "cannot read " + p.string() + ": " + ec.message() + " (is the bucket readable by this worker?)");
}

}  // namespace

bool is_url(const std::string& path) { return starts_with(path, "http://") || starts_with(path, "https://"); }

AdapterStore::AdapterStore(model::CausalLM base, AdapterStoreOptions options)
    : base_(std::move(base)), options_(std::move(options)) {
  if (!options_.bucket_root.empty()) {
    std::error_code ec;
    const fs::path real = fs::canonical(options_.bucket_root, ec);
    check(!ec && fs::is_directory(real), options_.bucket_root, "bucket root is not a readable directory",
          "pass --bucket the directory the trainer publishes adapters into");
    root_real_ = real.string();
  }
  if (!options_.download_root.empty()) {
    std::error_code ec;
    const fs::path real = fs::canonical(options_.download_root, ec);
    check(!ec && fs::is_directory(real), options_.download_root, "download directory is not a directory");
    download_real_ = real.string();
  }
}

std::string AdapterStore::resolve(const std::string& lora_name, const std::string& lora_path) const {
  if (root_real_.empty())
    throw HttpError(400, "this worker was started without --bucket, so it cannot load adapters",
                    "BadRequestError");
  if (lora_path.find('\0') != std::string::npos)  // the OS would see only the part before it
    throw HttpError(400, "lora_path contains a NUL byte", "BadRequestError");
  const fs::path root(root_real_);
  fs::path p(lora_path);
  if (p.is_relative()) p = root / p;
  p = p.lexically_normal();
  std::error_code ec;
  if (!fs::exists(p, ec)) {
    if (is_within(p, root) || is_within(p, fs::path(options_.bucket_root).lexically_normal())) {
      throw_if_unreadable(p, ec);  // (only inside the bucket: nothing is said about paths outside it)
      throw HttpError(404, not_found(lora_name, lora_path), "NotFoundError");
    }
    throw HttpError(400, "lora_path " + lora_path + " is outside this worker's bucket " + root_real_);
  }
  const fs::path real = fs::canonical(p, ec);
  if (ec) throw HttpError(400, "lora_path " + lora_path + ": " + ec.message());
  if (!is_within(real, root))
    throw HttpError(400, "lora_path " + lora_path + " resolves to " + real.string() + ", outside this worker's bucket " +
                             root_real_);
  if (!fs::is_directory(real)) throw HttpError(400, "lora_path " + lora_path + " is not a directory");
  return real.string();
}

std::shared_ptr<LoadedAdapter> AdapterStore::build(const std::string& lora_name, const std::string& dir,
                                                   const std::string& root_dir, bool require_sums) const {
  const fs::path root(root_dir);
  // Every file we read must exist and resolve inside the bucket (a symlink may not lead out).
  auto inside = [&](const std::string& file, bool required) -> std::string {
    const fs::path p = fs::path(dir) / file;
    std::error_code ec;
    if (!fs::exists(p, ec)) {
      throw_if_unreadable(p, ec);
      if (required) throw HttpError(404, not_found(lora_name, dir), "NotFoundError");
      return {};
    }
    const fs::path real = fs::canonical(p, ec);
    if (ec || !is_within(real, root) || !fs::is_regular_file(real))
      throw HttpError(400, dir + "/" + file + " is not a regular file inside " + root_dir);
    return real.string();
  };
  const std::string config_file = inside(model::kAdapterConfigName, true);
  const std::string weights_file = inside(model::kAdapterWeightsName, true);
  const std::string sums_file = inside("SHA256SUMS", false);
  if (require_sums && sums_file.empty()) throw HttpError(400, "adapter " + dir + " has no SHA256SUMS, so it cannot be verified");

  auto a = std::make_shared<LoadedAdapter>();
  a->name = lora_name;
  a->path = dir;
  if (!sums_file.empty()) {
    std::vector<std::string> bad, listed;
    std::vector<io::Sha256Entry> entries;
    try {
      entries = io::parse_sha256sums(read_file(sums_file, kMaxSha256SumsBytes), sums_file);
    } catch (const Error& e) {
      throw HttpError(400, e.what());
    }
    for (const auto& entry : entries) {
      const std::string& name = entry.name;
      const std::string file = inside(name, false);
      listed.push_back(name);
      std::string actual = file.empty() ? std::string() : io::sha256_file(file);
      if (actual != entry.hex) bad.push_back(name + (file.empty() ? " (missing)" : ""));
      if (name == model::kAdapterWeightsName) a->sha256 = actual;
    }
    for (const char* required : {model::kAdapterConfigName, model::kAdapterWeightsName})
      if (std::find(listed.begin(), listed.end(), required) == listed.end())
        throw HttpError(400, sums_file + " does not list " + std::string(required) + ", so it cannot be verified");
    if (!bad.empty())
      throw HttpError(400, "adapter " + dir + " does not match its SHA256SUMS: " + join(bad, ", ") +
                               " (changed after publication, or a copy in progress?)");
    a->verified = true;
  } else {
    a->sha256 = io::sha256_file(weights_file);
  }

  try {
    const model::LoraConfig cfg = model::read_adapter_config(dir);
    // The largest rank any module may get (rank_pattern can raise it above r).
    if (cfg.max_rank() > options_.max_lora_rank)
      throw HttpError(400, "LoRA rank " + std::to_string(cfg.max_rank()) + " is greater than max_lora_rank " +
                               std::to_string(options_.max_lora_rank) + ".");
    a->rank = cfg.max_rank();
    a->lora_alpha = cfg.lora_alpha;
    // A model that aliases the base weights (same storage) and owns only its LoRA factors.
    model::CausalLM m(model::CausalLMOptions(base_->config())
                          .dtype(base_->dtype())
                          .device(base_->device())
                          .init_weights(false));
    torch::NoGradGuard no_grad;
    auto mine = m->named_base_parameters();
    for (const auto& kv : base_->named_base_parameters()) {
      torch::Tensor* p = mine.find(kv.key());
      check(p != nullptr, lora_name, "base parameter " + kv.key() + " missing");
      p->set_data(kv.value().detach());
    }
    model::load_adapter(*m, dir);
    m->eval();
    a->model = m;
  } catch (const Error& e) {
    throw HttpError(400, "Loading lora " + lora_name + " failed: " + e.what());
  }
  a->loaded_at = static_cast<int64_t>(std::time(nullptr));
  return a;
}

std::shared_ptr<const LoadedAdapter> AdapterStore::load(const std::string& lora_name, const std::string& lora_path,
                                                        bool inplace) {
  if (lora_name.empty() || lora_path.empty())
    throw HttpError(400, "Both 'lora_name' and 'lora_path' must be provided.", "InvalidUserInput");
  {
    std::lock_guard<std::mutex> lock(mu_);
    if ((loaded_.count(lora_name) && !inplace) || loading_.count(lora_name))
      throw HttpError(400, "The lora adapter '" + lora_name + "' has already been loaded.", "InvalidUserInput");
    if (!loaded_.count(lora_name) && static_cast<int>(loaded_.size() + loading_.size()) >= options_.max_loras)
      throw HttpError(400, "cannot load lora adapter '" + lora_name + "': " + std::to_string(options_.max_loras) +
                               " adapters are loaded (--max-loras); unload one first");
    loading_.insert(lora_name);
  }
  std::shared_ptr<LoadedAdapter> a;
  try {
    a = is_url(lora_path) ? fetch_and_build(lora_name, lora_path)
                          : build(lora_name, resolve(lora_name, lora_path), root_real_, false);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    loading_.erase(lora_name);
    throw;
  }
  std::lock_guard<std::mutex> lock(mu_);
  loading_.erase(lora_name);
  loaded_[lora_name] = a;
  if (!order_.count(lora_name)) order_[lora_name] = ++sequence_;
  return a;
}

std::shared_ptr<LoadedAdapter> AdapterStore::fetch_and_build(const std::string& lora_name, const std::string& url) const {
  if (!options_.fetch || download_real_.empty())
    throw HttpError(400, "lora_path " + url + ": this worker cannot fetch adapters by URL");
  std::string base = url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  std::string tmpl = (fs::path(download_real_) / "adapter-XXXXXX").string();
  check(::mkdtemp(tmpl.data()) != nullptr, download_real_, "cannot create a download directory");
  const std::string dir = tmpl;
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{dir};
  try {
    options_.fetch(base + "/SHA256SUMS", dir + "/SHA256SUMS", static_cast<int64_t>(kMaxSha256SumsBytes));
  } catch (const HttpError& e) {
    if (e.status() == 404) throw HttpError(404, not_found(lora_name, url), "NotFoundError");
    throw;
  }
  // Fetch exactly the plain file names SHA256SUMS lists (build() verifies every one).
  std::vector<io::Sha256Entry> entries;
  try {
    entries = io::parse_sha256sums(read_file(dir + "/SHA256SUMS", kMaxSha256SumsBytes), url + "/SHA256SUMS");
  } catch (const Error& e) {
    throw HttpError(400, e.what());
  }
  if (entries.size() > 32) throw HttpError(400, url + "/SHA256SUMS lists more than 32 files");
  for (const auto& entry : entries) {
    const std::string& name = entry.name;
    if (name == io::kSha256SumsFile) throw HttpError(400, url + "/SHA256SUMS lists itself");
    try {
      options_.fetch(base + "/" + name, dir + "/" + name, kMaxAdapterFileBytes);
    } catch (const HttpError& e) {
      if (e.status() == 404) throw HttpError(404, not_found(lora_name, url), "NotFoundError");
      throw;
    }
  }
  auto a = build(lora_name, dir, download_real_, /*require_sums=*/true);
  a->path = url;
  return a;
}

void AdapterStore::unload(const std::string& lora_name) {
  if (lora_name.empty())
    throw HttpError(400, "'lora_name' needs to be provided to unload a LoRA adapter.", "InvalidUserInput");
  std::lock_guard<std::mutex> lock(mu_);
  if (!loaded_.erase(lora_name))
    throw HttpError(404, "The lora adapter '" + lora_name + "' cannot be found.", "NotFoundError");
  order_.erase(lora_name);
}

std::shared_ptr<const LoadedAdapter> AdapterStore::find(const std::string& lora_name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = loaded_.find(lora_name);
  return it == loaded_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<const LoadedAdapter>> AdapterStore::list() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<int64_t, std::shared_ptr<const LoadedAdapter>>> v;
  for (const auto& [name, a] : loaded_) v.emplace_back(order_.at(name), a);
  std::sort(v.begin(), v.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::shared_ptr<const LoadedAdapter>> out;
  for (auto& [k, a] : v) out.push_back(std::move(a));
  return out;
}

}  // namespace grpo::cluster
