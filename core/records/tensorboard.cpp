// TensorBoard event files: CRC32C, hand-written protobuf for Event/Summary/Value, TFRecord
// framing, an appending writer and a checking reader.
#include "core/records/tensorboard.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fcntl.h>
#include <unistd.h>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/log.h"
#include "core/common/strings.h"
#include "core/records/metrics_record.h"

namespace grpo::run {

// ---------------------------------------------------------------- CRC32C

namespace {

const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

}  // namespace

uint32_t crc32c(const void* data, size_t size, uint32_t crc) {
  const auto& t = crc_table();
  const auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) crc = t[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

// ---------------------------------------------------------------- protobuf wire format

namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_tag(std::string& out, uint32_t field, WireType type) { put_varint(out, (uint64_t(field) << 3) | type); }

template <typename T>
void put_le(std::string& out, T value) {
  static_assert(std::is_trivially_copyable_v<T>);
  char b[sizeof(T)];
  std::memcpy(b, &value, sizeof(T));  // every supported host is little-endian (as safetensors assumes)
  out.append(b, sizeof(T));
}

void put_bytes(std::string& out, uint32_t field, const std::string& bytes) {
  put_tag(out, field, kBytes);
  put_varint(out, bytes.size());
  out += bytes;
}

// Event fields (tensorboard/compat/proto/event.proto).
constexpr uint32_t kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3, kEventSummary = 5;
// Summary { repeated Value value = 1; }  Value { string tag = 1; float simple_value = 2; }
constexpr uint32_t kSummaryValue = 1, kValueTag = 1, kValueSimple = 2;

void put_event_header(std::string& out, double wall_time, int64_t step) {
  put_tag(out, kEventWallTime, kFixed64);
  put_le(out, wall_time);
  if (step != 0) {  // proto3: a default value is not written
    put_tag(out, kEventStep, kVarint);
    put_varint(out, static_cast<uint64_t>(step));
  }
}

// A cursor over protobuf bytes; every read checks the bounds.
struct Reader {
  const std::string& s;
  size_t pos = 0;
  const std::string& ctx;

  bool done() const { return pos >= s.size(); }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ctx, what + " at byte " + std::to_string(pos), "not a TensorBoard Event protobuf?");
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= s.size()) fail("truncated varint");
      const auto b = static_cast<uint8_t>(s[pos++]);
      v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    fail("varint longer than 10 bytes");
  }
  template <typename T>
  T fixed() {
    if (s.size() - pos < sizeof(T)) fail("truncated fixed-width field");
    T v;
    std::memcpy(&v, s.data() + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  std::string bytes() {
    const uint64_t n = varint();
    if (n > s.size() - pos) fail("length-delimited field of " + std::to_string(n) + " bytes runs past the end");
    std::string out = s.substr(pos, n);
    pos += n;
    return out;
  }
  void skip(uint32_t type) {
    switch (type) {
      case kVarint: varint(); break;
      case kFixed64: fixed<uint64_t>(); break;
      case kBytes: bytes(); break;
      case kFixed32: fixed<uint32_t>(); break;
      default: fail("unsupported wire type " + std::to_string(type));
    }
  }
};

std::pair<std::string, float> decode_value(const std::string& bytes, const std::string& ctx) {
  Reader r{bytes, 0, ctx};
  std::pair<std::string, float> out{"", 0.0f};
  while (!r.done()) {
    const uint64_t key = r.varint();
    const auto field = uint32_t(key >> 3), type = uint32_t(key & 7);
    if (field == kValueTag && type == kBytes) out.first = r.bytes();
    else if (field == kValueSimple && type == kFixed32) out.second = r.fixed<float>();
    else r.skip(type);
  }
  return out;
}

}  // namespace

std::string encode_file_version_event(double wall_time, const std::string& version) {
  std::string out;
  put_event_header(out, wall_time, 0);
  put_bytes(out, kEventFileVersion, version);
  return out;
}

std::string encode_scalars_event(double wall_time, int64_t step,
                                 const std::vector<std::pair<std::string, float>>& values) {
  std::string summary;
  for (const auto& [tag, v] : values) {
    std::string value;
    put_bytes(value, kValueTag, tag);
    put_tag(value, kValueSimple, kFixed32);
    put_le(value, v);
    put_bytes(summary, kSummaryValue, value);
  }
  std::string out;
  put_event_header(out, wall_time, step);
  put_bytes(out, kEventSummary, summary);
  return out;
}

std::string frame_record(const std::string& payload) {
  std::string out;
  const uint64_t len = payload.size();
  put_le(out, len);
  put_le(out, masked_crc32c(&len, sizeof len));
  out += payload;
  put_le(out, masked_crc32c(payload.data(), payload.size()));
  return out;
}

// ---------------------------------------------------------------- writer

TensorBoardWriter::TensorBoardWriter(std::string log_dir) : dir_(std::move(log_dir)) {}

void TensorBoardWriter::open() {
  static std::atomic<int> counter{0};
  char host[256] = "localhost";
  if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "localhost");
  host[sizeof host - 1] = '\0';
  std::filesystem::create_directories(dir_);
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // TensorBoard's own writer appends .<pid>.<n> so two writers in one second never collide.
  for (int tries = 0; tries < 1000; ++tries) {
    const std::string name = "events.out.tfevents." + std::to_string(static_cast<int64_t>(now)) + "." + host + "." +
                             std::to_string(::getpid()) + "." + std::to_string(counter++);
    const std::string p = path_join(dir_, name);
    const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) throw Error(p, std::string("cannot create TensorBoard event file: ") + std::strerror(errno));
    ::close(fd);
    path_ = p;
    append(frame_record(encode_file_version_event(now)));
    return;
  }
  throw Error(dir_, "cannot find a free TensorBoard event file name");
}

void TensorBoardWriter::append(const std::string& record) {
  const int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) throw Error(path_, std::string("cannot open for append: ") + std::strerror(errno));
  const ssize_t n = ::write(fd, record.data(), record.size());
  const int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(record.size()))
    throw Error(path_, std::string("short write of a TensorBoard record: ") + (n < 0 ? std::strerror(err) : "disk full?"));
}

void TensorBoardWriter::add_scalars(int64_t step, double wall_time, const std::map<std::string, double>& metrics) {
  std::vector<std::pair<std::string, float>> values;
  for (const auto& [k, v] : metrics)
    if (std::isfinite(v)) values.emplace_back(k, static_cast<float>(v));
  if (path_.empty()) open();
  append(frame_record(encode_scalars_event(wall_time, step, values)));
}

void TensorBoardWriter::add_metrics_record(const nlohmann::json& record) {
  MetricsRecord r;
  check(read_metrics_record(record, &r), dir_, "metrics record without an integer \"step\": " + record.dump().substr(0, 200));
  std::map<std::string, double> m = r.metrics;
  if (record.contains("policy_version")) m["policy_version"] = static_cast<double>(r.policy_version);  // a scalar worth seeing
  add_scalars(r.step, std::isfinite(r.time) ? r.time : 0.0, m);
}

void TensorBoardWriter::log_metrics(const nlohmann::json& record) noexcept {
  if (failed_) return;
  try {
    add_metrics_record(record);
  } catch (const std::exception& e) {
    failed_ = true;
    log_warn(std::string("TensorBoard event file disabled for this run: ") + e.what());
  }
}

// ---------------------------------------------------------------- reader

std::vector<std::string> read_tfrecords(const std::string& path) {
  const std::string data = read_file(path);
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < data.size()) {
    const std::string where = path + ": record " + std::to_string(out.size()) + " at byte " + std::to_string(pos);
    check(data.size() - pos >= 12, where, "truncated record header (" + std::to_string(data.size() - pos) + " bytes left)");
    uint64_t len;
    uint32_t len_crc;
    std::memcpy(&len, data.data() + pos, 8);
    std::memcpy(&len_crc, data.data() + pos + 8, 4);
    check(len_crc == masked_crc32c(&len, sizeof len), where, "length CRC mismatch", "corrupt event file");
    check(len <= data.size() - pos - 12 && data.size() - pos - 12 - len >= 4, where,
          "record of " + std::to_string(len) + " bytes runs past the end of the file", "truncated event file");
    std::string payload = data.substr(pos + 12, len);
    uint32_t data_crc;
    std::memcpy(&data_crc, data.data() + pos + 12 + len, 4);
    check(data_crc == masked_crc32c(payload.data(), payload.size()), where, "payload CRC mismatch", "corrupt event file");
    out.push_back(std::move(payload));
    pos += 12 + len + 4;
  }
  return out;
}

TfEvent decode_event(const std::string& payload, const std::string& ctx) {
  Reader r{payload, 0, ctx};
  TfEvent e;
  while (!r.done()) {
    const uint64_t key = r.varint();
    const auto field = uint32_t(key >> 3), type = uint32_t(key & 7);
    if (field == kEventWallTime && type == kFixed64) {
      e.wall_time = r.fixed<double>();
    } else if (field == kEventStep && type == kVarint) {
      e.step = static_cast<int64_t>(r.varint());
    } else if (field == kEventFileVersion && type == kBytes) {
      e.file_version = r.bytes();
    } else if (field == kEventSummary && type == kBytes) {
      const std::string summary = r.bytes();
      Reader s{summary, 0, ctx};
      while (!s.done()) {
        const uint64_t k = s.varint();
        if (uint32_t(k >> 3) == kSummaryValue && (k & 7) == kBytes) e.values.push_back(decode_value(s.bytes(), ctx));
        else s.skip(uint32_t(k & 7));
      }
    } else {
      r.skip(type);
    }
  }
  return e;
}

std::vector<std::string> event_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.is_regular_file() && starts_with(entry.path().filename().string(), "events.out.tfevents."))
      out.push_back(entry.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace grpo::run
