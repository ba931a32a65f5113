#include "core/run/run_dir.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "core/cluster/adapter_store.h"
#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/log.h"
#include "core/common/strings.h"

namespace fs = std::filesystem;

namespace grpo::run {
namespace {

void make_dirs(const std::string& p) {
  std::error_code ec;
  fs::create_directories(p, ec);
  if (ec) throw Error(p, "cannot create directory: " + ec.message());
}


void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

RunDirectory::RunDirectory(std::string root) : root_(std::move(root)) {
  check(!root_.empty(), "run directory", "no path given");
  for (const char* sub : {"", "adapters", "checkpoints", "export"}) make_dirs(path(sub));
}

std::string RunDirectory::path(const std::string& relative) const {
  return relative.empty() ? root_ : path_join(root_, relative);
}

void RunDirectory::write_config(const nlohmann::json& config) const {
  write_file_atomic(path(kConfigFile), config.dump(2) + "\n");
}

std::string RunDirectory::jsonl_line(const nlohmann::json& record) {
  return record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void RunDirectory::append_jsonl(const std::string& file, const nlohmann::json& record) const {
  static std::mutex appending;  // one append at a time, so a torn line can be cut off safely
  const std::string p = path(file);
  const std::string line = jsonl_line(record) + "\n";
  std::lock_guard lock(appending);
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(p, std::string("cannot open for append: ") + std::strerror(errno));
  struct stat before {};
  const bool sized = ::fstat(fd, &before) == 0;
  size_t done = 0;
  int err = 0;
  while (done < line.size()) {  // one write(2) unless the file system cuts it short
    ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      err = errno;  // the second write of a cut-short line says why (ENOSPC, EFBIG, ...)
      break;
    } else if (n == 0) {
      err = EIO;
      break;
    }
  }
  if (err && done > 0 && (!sized || ::ftruncate(fd, before.st_size) != 0))
    log_error(p + ": a torn line could not be cut off (" + std::strerror(errno) + ")");
  ::close(fd);
  if (err)
    throw Error(p, std::string("append failed: ") + std::strerror(err) +
                       (done > 0 ? " (the " + std::to_string(done) + " of " + std::to_string(line.size()) +
                                       " bytes written were cut off again)"
                                 : ""));
}

std::string RunDirectory::adapter_dir(int64_t version) const {
  return path("adapters/policy-v" + std::to_string(version));
}

std::vector<int64_t> RunDirectory::adapter_versions() const {
  std::vector<int64_t> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(path("adapters"), ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || !starts_with(name, "policy-v")) continue;
    const std::string num = name.substr(8);
    if (num.empty() || !std::all_of(num.begin(), num.end(), ::isdigit)) continue;
    out.push_back(std::stoll(num));
  }
  std::sort(out.begin(), out.end());
  return out;
}

void RunDirectory::remove_stale_temporaries() const {
  std::error_code ec;
  for (const char* sub : {"adapters", "checkpoints"})
    for (const auto& e : fs::directory_iterator(path(sub), ec))
      if (starts_with(e.path().filename().string(), ".tmp-")) fs::remove_all(e.path(), ec);
}

std::string RunDirectory::publish_adapter(int64_t version, const std::function<void(const std::string&)>& write_files,
                                          int64_t keep) {
  const std::string final_dir = adapter_dir(version);
  check(!fs::exists(final_dir), final_dir, "adapter version already published",
        "adapter names are never reused; is another trainer writing to this run?");
  const std::string tmp = path("adapters/.tmp-policy-v" + std::to_string(version) + "-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(tmp, ec);
  make_dirs(tmp);
  try {
    write_files(tmp);
    write_file_atomic(path_join(tmp, "SHA256SUMS"), sha256sums(tmp));
    fsync_dir(tmp);
    fs::rename(tmp, final_dir);
    fsync_dir(path("adapters"));
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp, ec);
    throw Error(final_dir, std::string("publish failed: ") + e.code().message());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  auto versions = adapter_versions();
  for (size_t i = 0; keep > 0 && i + static_cast<size_t>(keep) < versions.size(); ++i)
    fs::remove_all(adapter_dir(versions[i]), ec);
  return final_dir;
}

std::string storage_fault_of(const std::string& error_text) {
  for (int e : {ENOSPC, EDQUOT, EFBIG, EIO}) {
    const std::string text = std::strerror(e);
    if (error_text.find(text) != std::string::npos) return text;
  }
  return "";
}

std::string describe_filesystem(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  // The longest mount point that is a prefix of the path (/proc/self/mounts: device, dir, type).
  std::string mount = "/", type;
  std::ifstream mounts("/proc/self/mounts");
  for (std::string line; std::getline(mounts, line);) {
    std::istringstream in(line);
    std::string dev, dir, fstype;
    if (!(in >> dev >> dir >> fstype)) continue;
    const std::string s = p.string();
    const bool under = dir == "/" || (s.compare(0, dir.size(), dir) == 0 && (s.size() == dir.size() || s[dir.size()] == '/'));
    if (under && dir.size() >= mount.size()) mount = dir, type = fstype;
  }
  std::string out = mount;
  struct statvfs st {};
  if (::statvfs(p.string().c_str(), &st) == 0 || ::statvfs(mount.c_str(), &st) == 0) {
    out += " (" + (type.empty() ? std::string() : type + ", ") +
           format_bytes(static_cast<double>(st.f_bavail) * static_cast<double>(st.f_frsize)) + " free of " +
           format_bytes(static_cast<double>(st.f_blocks) * static_cast<double>(st.f_frsize)) + ")";
  }
  return out;
}

std::string sha256sums(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename() != "SHA256SUMS") names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& n : names) out += cluster::sha256_file(path_join(dir, n)) + "  " + n + "\n";
  return out;
}

std::vector<std::string> verify_sha256sums(const std::string& dir) {
  std::vector<std::string> bad;
  const std::string sums = path_join(dir, "SHA256SUMS");
  if (!file_exists(sums)) return {"SHA256SUMS"};
  for (const auto& line : split(read_file(sums, kMaxSha256SumsBytes), '\n')) {
    if (line.empty()) continue;
    const size_t sp = line.find("  ");
    if (sp == std::string::npos) { bad.push_back(line); continue; }
    const std::string name = line.substr(sp + 2);
    const std::string p = path_join(dir, name);
    if (!file_exists(p) || cluster::sha256_file(p) != line.substr(0, sp)) bad.push_back(name);
  }
  return bad;
}

}  // namespace grpo::run
