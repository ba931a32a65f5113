// RunFolder / RunDirectory / JsonlTail: the one reader and writer of a run folder (run_dir.h).
#include "core/records/run_dir.h"

#include <cmath>

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

#include "core/common/json_fields.h"
#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/json_limits.h"
#include "core/common/log.h"
#include "core/common/strings.h"

namespace fs = std::filesystem;

namespace grpo::run {
namespace {

constexpr std::string_view kAdapterPrefix = "policy-v";
constexpr std::string_view kCheckpointPrefix = "step-";

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

// <prefix><decimal digits> -> the number; anything else (a sign, other characters, more than 18
// digits, which could overflow) -> nullopt.
std::optional<int64_t> parse_numbered(std::string_view name, std::string_view prefix) {
  if (name.size() <= prefix.size() || name.substr(0, prefix.size()) != prefix) return std::nullopt;
  const std::string_view num = name.substr(prefix.size());
  if (num.size() > 18 || !std::all_of(num.begin(), num.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  int64_t v = 0;
  for (char c : num) v = v * 10 + (c - '0');
  return v;
}

// The numbers of the directories in `dir` whose names `parse` accepts, ascending.
std::vector<int64_t> numbered_dirs(const std::string& dir, std::optional<int64_t> (*parse)(std::string_view)) {
  std::vector<int64_t> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::error_code ec2;
    if (!e.is_directory(ec2)) continue;
    if (auto n = parse(e.path().filename().string())) out.push_back(*n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// One line's record: the JSON object, or null (not JSON, not an object, nested too deep).
nlohmann::json parse_line(std::string_view line) {
  if (json_depth(line) > kMaxJsonDepth) return nullptr;
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return nullptr;
  return j;
}

// Appends the whole, non-blank lines of `text` to `out`, numbering them from `line` (advanced
// past every whole line, blank ones too). Returns the bytes consumed: up to the last newline.
size_t parse_lines(std::string_view text, int64_t& line, std::vector<JsonlLine>& out) {
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string_view::npos; start = nl + 1, ++line) {
    const std::string_view l = text.substr(start, nl - start);
    if (l.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    out.push_back(JsonlLine{line, parse_line(l)});
  }
  return start;
}

// Bytes [offset, offset + n) of an open file.
std::string pread_range(int fd, const std::string& path, uint64_t offset, uint64_t n) {
  std::string buf(static_cast<size_t>(n), '\0');
  size_t done = 0;
  while (done < buf.size()) {
    const ssize_t r = ::pread(fd, buf.data() + done, buf.size() - done, static_cast<off_t>(offset + done));
    if (r > 0) done += static_cast<size_t>(r);
    else if (r == 0) break;  // shrank meanwhile
    else if (errno != EINTR) throw Error(path, std::string("read failed: ") + std::strerror(errno));
  }
  buf.resize(done);
  return buf;
}

// An open file descriptor, closed on scope exit; fd < 0 when the file is absent.
struct OpenFile {
  int fd = -1;
  uint64_t size = 0;
  explicit OpenFile(const std::string& path) {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return;
      throw Error(path, std::string("cannot open: ") + std::strerror(errno));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw Error(path, std::string("cannot stat: ") + std::strerror(errno));
    size = static_cast<uint64_t>(st.st_size);
  }
  ~OpenFile() {
    if (fd >= 0) ::close(fd);
  }
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// JsonlTail

JsonlTail::JsonlTail(std::string path, uint64_t offset, int64_t line)
    : path_(std::move(path)), offset_(offset), line_(line) {}

JsonlTail JsonlTail::from_end(std::string path) {
  uint64_t end = 0;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) end = static_cast<uint64_t>(st.st_size);
  return JsonlTail(std::move(path), end, 1);
}

std::vector<JsonlLine> JsonlTail::read_new() {
  std::vector<JsonlLine> out;
  try {
    OpenFile f(path_);
    if (f.fd < 0) return out;
    if (f.size < offset_) offset_ = 0, line_ = 1, skipping_ = false;  // rewritten shorter
    while (f.size > offset_) {
      const uint64_t n = std::min<uint64_t>(f.size - offset_, kChunkBytes);
      const std::string chunk = pread_range(f.fd, path_, offset_, n);
      std::string_view text = chunk;
      if (skipping_) {  // the rest of an over-long line
        const size_t nl = text.find('\n');
        if (nl == std::string_view::npos) {
          offset_ += chunk.size();
          continue;
        }
        skipping_ = false;
        ++line_;
        offset_ += nl + 1;
        text.remove_prefix(nl + 1);
      }
      const size_t used = parse_lines(text, line_, out);
      offset_ += used;
      if (used == 0 && text.size() >= kChunkBytes) {  // one line longer than a chunk
        out.push_back(JsonlLine{line_, nullptr});
        skipping_ = true;
        offset_ += text.size();
        continue;
      }
      if (chunk.size() < kChunkBytes || out.size() > 0) break;  // one chunk per call
    }
  } catch (const std::exception&) {
    // unreadable now: nothing new (the next call tries again)
  }
  for (const auto& l : out) malformed_ += l.well_formed() ? 0 : 1;
  return out;
}

std::vector<nlohmann::json> JsonlTail::read_new_records() {
  std::vector<nlohmann::json> out;
  for (auto& l : read_new())
    if (l.well_formed()) out.push_back(std::move(l.record));
  return out;
}

// ---------------------------------------------------------------------------------------------
// RunFolder

RunFolder::RunFolder(std::string root) : root_(std::move(root)) { check(!root_.empty(), "run directory", "no path given"); }

RunFolder RunFolder::open_existing(const std::string& root) {
  RunFolder f(root);
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    throw Error(root, fs::exists(root, ec) ? "not a directory" : "not a directory (it does not exist)",
                "give the run directory `grpo train` or the studio printed");
  return f;
}

std::string RunFolder::path(const std::string& relative) const {
  return relative.empty() ? root_ : path_join(root_, relative);
}

std::string RunFolder::adapter_name(int64_t version) { return std::string(kAdapterPrefix) + std::to_string(version); }
std::optional<int64_t> RunFolder::parse_adapter_name(std::string_view name) { return parse_numbered(name, kAdapterPrefix); }
std::string RunFolder::checkpoint_name(int64_t step) { return std::string(kCheckpointPrefix) + std::to_string(step); }
std::optional<int64_t> RunFolder::parse_checkpoint_name(std::string_view name) {
  return parse_numbered(name, kCheckpointPrefix);
}

std::string RunFolder::adapter_dir(int64_t version) const { return path_join(adapters_dir(), adapter_name(version)); }
std::string RunFolder::checkpoint_dir(int64_t step) const { return path_join(checkpoints_dir(), checkpoint_name(step)); }
std::vector<int64_t> RunFolder::adapter_versions() const { return numbered_dirs(adapters_dir(), &parse_adapter_name); }
std::vector<int64_t> RunFolder::checkpoint_steps() const {
  return numbered_dirs(checkpoints_dir(), &parse_checkpoint_name);
}

bool RunFolder::has_file(const char* name) const { return file_exists(path(name)); }

nlohmann::json RunFolder::read_config() const {
  const std::string p = config_path();
  check(file_exists(p), p, "missing: this is not a run directory",
        std::string("pick the directory `grpo train` or the studio printed (it holds ") + kConfigFile + " and " +
            kMetricsFile + ")");
  auto cfg = parse_json_bounded(read_file(p, kMaxConfigBytes), p);
  check(cfg.is_object(), p, "expected a JSON object (the run's resolved config), found " + std::string(cfg.type_name()));
  return cfg;
}

JsonlChunk RunFolder::read_jsonl(const std::string& path, uint64_t offset, uint64_t end) {
  JsonlChunk c;
  c.next_offset = offset;
  OpenFile f(path);
  if (f.fd < 0) return c;
  const uint64_t hi = std::min(end, f.size);
  if (hi <= offset) return c;
  if (hi - offset > kMaxJsonlReadBytes)
    throw Error(path, std::to_string(hi - offset) + " bytes to read at once exceeds the limit of " +
                          std::to_string(kMaxJsonlReadBytes),
                "follow the file with JsonlTail, which reads it in chunks");
  const std::string text = pread_range(f.fd, path, offset, hi - offset);
  c.next_offset = offset + parse_lines(text, c.next_line, c.lines);
  return c;
}

std::vector<nlohmann::json> RunFolder::records_of(const std::vector<JsonlLine>& lines, const std::string& path,
                                                  Malformed on_malformed, int64_t* malformed) {
  std::vector<nlohmann::json> out;
  int64_t bad = 0;
  for (const auto& l : lines) {
    if (l.well_formed()) {
      out.push_back(l.record);
      continue;
    }
    check(on_malformed == Malformed::Skip, path + ":" + std::to_string(l.number),
          "expected one JSON object per line", "was the file cut short by a crash, or edited by hand?");
    ++bad;
  }
  if (malformed) *malformed = bad;
  return out;
}

std::vector<nlohmann::json> RunFolder::read_metrics(Malformed on_malformed, int64_t* malformed) const {
  return records_of(read_jsonl(metrics_path()).lines, metrics_path(), on_malformed, malformed);
}

std::vector<nlohmann::json> RunFolder::read_events(Malformed on_malformed, int64_t* malformed) const {
  return records_of(read_jsonl(events_path()).lines, events_path(), on_malformed, malformed);
}

nlohmann::json sample_to_json(const SampleRecord& s) {
  auto number_or_null = [](double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); };
  nlohmann::json rewards = nlohmann::json::object();
  for (const auto& [name, v] : s.rewards) rewards[name] = number_or_null(v);
  return {{"step", s.step}, {"policy_version", s.policy_version}, {"group", s.group},
          {"prompt", s.prompt}, {"completion", s.completion}, {"answer", s.answer},
          {"reward", number_or_null(s.reward)}, {"rewards", std::move(rewards)},
          {"advantage", s.advantage}, {"finish_reason", s.finish_reason}};
}

SampleRecord sample_from_json(const nlohmann::json& j) {
  auto integer = [&](const char* k) { return j.contains(k) && j[k].is_number() ? j[k].get<int64_t>() : int64_t{0}; };
  auto text = [&](const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string(); };
  auto number = [](const nlohmann::json& v, double otherwise) { return v.is_number() ? v.get<double>() : otherwise; };
  SampleRecord s;
  if (!j.is_object()) return s;
  s.step = integer("step");
  s.policy_version = integer("policy_version");
  s.group = integer("group");
  s.prompt = text("prompt");
  s.completion = text("completion");
  s.answer = text("answer");
  s.finish_reason = text("finish_reason");
  s.reward = j.contains("reward") ? number(j["reward"], NAN) : NAN;
  s.advantage = j.contains("advantage") ? number(j["advantage"], 0.0) : 0.0;
  if (j.contains("rewards") && j["rewards"].is_object())
    for (const auto& [name, v] : j["rewards"].items()) s.rewards.emplace_back(name, number(v, NAN));
  return s;
}

std::vector<nlohmann::json> RunFolder::read_samples(size_t limit) const {
  std::vector<nlohmann::json> out;
  if (limit == 0) return out;
  const std::string p = samples_path();
  OpenFile f(p);
  if (f.fd < 0) return out;
  // Read ever larger windows from the end until they hold `limit` records (or the whole file, or
  // the bound); the first, partial line of a window is not counted.
  for (uint64_t window = std::min<uint64_t>(f.size, uint64_t(1) << 20);; window = std::min(window * 4, f.size)) {
    window = std::min(window, kMaxSamplesWindow);
    const uint64_t lo = f.size - window;
    const std::string text = pread_range(f.fd, p, lo, window);
    std::string_view v = text;
    if (lo > 0) {
      const size_t nl = v.find('\n');
      v.remove_prefix(nl == std::string_view::npos ? v.size() : nl + 1);
    }
    std::vector<JsonlLine> lines;
    int64_t line = 0;  // unknown this far into the file
    parse_lines(v, line, lines);
    out.clear();
    for (auto& l : lines)
      if (l.well_formed()) out.push_back(std::move(l.record));
    if (out.size() >= limit || lo == 0 || window >= kMaxSamplesWindow) break;
  }
  if (out.size() > limit) out.erase(out.begin(), out.end() - static_cast<std::ptrdiff_t>(limit));
  return out;
}

std::vector<nlohmann::json> RunFolder::metrics_since(int64_t since) const {
  std::vector<nlohmann::json> out;
  for (auto& r : read_metrics())
    if (json_integer(r, "step", -1) > since) out.push_back(std::move(r));
  return out;
}

nlohmann::json RunFolder::last_metrics() const {
  auto all = read_metrics();
  return all.empty() ? nlohmann::json() : std::move(all.back());
}

// ---------------------------------------------------------------------------------------------
// RunDirectory

RunDirectory::RunDirectory(std::string root) : RunFolder(std::move(root)) {
  for (const char* sub : {"", kAdaptersDir, kCheckpointsDir, kExportDir}) make_dirs(path(sub));
}

void RunDirectory::write_config(const nlohmann::json& config) const {
  write_file_atomic(config_path(), config.dump(2) + "\n");
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

int64_t RunDirectory::truncate_metrics(int64_t step) const {
  const std::string p = metrics_path();
  if (!file_exists(p)) return 0;
  const std::string text = read_file(p, kMaxJsonlReadBytes);
  std::string kept;
  int64_t n = 0;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {  // a torn last line is dropped
    const std::string_view line = std::string_view(text).substr(start, nl - start);
    const auto j = parse_line(line);
    const auto it = j.is_object() ? j.find("step") : j.end();
    if (!j.is_object() || it == j.end() || !it->is_number() || it->get<int64_t>() > step) continue;
    kept.append(line) += '\n';  // verbatim
    ++n;
  }
  write_file_atomic(p, kept);
  return n;
}

void RunDirectory::remove_stale_temporaries() const {
  std::error_code ec;
  for (const char* sub : {kAdaptersDir, kCheckpointsDir})
    for (const auto& e : fs::directory_iterator(path(sub), ec))
      if (starts_with(e.path().filename().string(), ".tmp-")) fs::remove_all(e.path(), ec);
}

std::string RunDirectory::checkpoint_temporary(int64_t step) const {
  const std::string tmp =
      path_join(checkpoints_dir(), ".tmp-" + checkpoint_name(step) + "-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) throw Error(tmp, "cannot create checkpoint directory: " + ec.message());
  return tmp;
}

std::string RunDirectory::commit_checkpoint(int64_t step, const std::string& tmp_dir, int64_t keep) const {
  const std::string final_dir = checkpoint_dir(step);
  std::error_code ec;
  try {
    fs::remove_all(final_dir, ec);  // a re-run of the same step after a resume replaces it
    fs::rename(tmp_dir, final_dir);
    fsync_directory(checkpoints_dir());  // the rename survives a power cut
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp_dir, ec);
    throw Error(final_dir, std::string("checkpoint failed: ") + e.code().message());
  }
  const auto all = checkpoint_steps();
  for (size_t i = 0; keep > 0 && i + static_cast<size_t>(keep) < all.size(); ++i)
    fs::remove_all(checkpoint_dir(all[i]), ec);
  return final_dir;
}

std::string RunDirectory::publish_adapter(int64_t version, const std::function<void(const std::string&)>& write_files,
                                          int64_t keep) {
  const std::string final_dir = adapter_dir(version);
  check(!fs::exists(final_dir), final_dir, "adapter version already published",
        "adapter names are never reused; is another trainer writing to this run?");
  const std::string tmp = path_join(adapters_dir(), ".tmp-" + adapter_name(version) + "-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(tmp, ec);
  make_dirs(tmp);
  try {
    write_files(tmp);
    write_file_atomic(path_join(tmp, io::kSha256SumsFile), sha256sums(tmp));
    fsync_dir(tmp);
    fs::rename(tmp, final_dir);
    fsync_dir(adapters_dir());
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

}  // namespace grpo::run
