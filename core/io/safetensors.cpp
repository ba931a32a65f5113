// safetensors reader and writer. Reading: map the file (or take an owned buffer), parse the JSON
// header while watching for duplicate keys, validate every entry, then check that the sorted
// buffers tile the data section exactly (docs/formats.md, "Validation rules"). Writing: the
// reference writer's byte layout, so a file we read and write back is byte-identical ("Writing").
#include "core/common/json_limits.h"
#include "core/io/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <set>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/strings.h"

namespace grpo::io {

using nlohmann::json;

// ---- dtypes -----------------------------------------------------------------------------------

namespace {
struct DTypeRow { DType dtype; const char* name; size_t size; };
constexpr DTypeRow kDTypes[] = {
    {DType::BOOL, "BOOL", 1},   {DType::U8, "U8", 1},         {DType::I8, "I8", 1},
    {DType::F8_E5M2, "F8_E5M2", 1}, {DType::F8_E4M3, "F8_E4M3", 1}, {DType::I16, "I16", 2},
    {DType::U16, "U16", 2},     {DType::F16, "F16", 2},       {DType::BF16, "BF16", 2},
    {DType::I32, "I32", 4},     {DType::U32, "U32", 4},       {DType::F32, "F32", 4},
    {DType::F64, "F64", 8},     {DType::I64, "I64", 8},       {DType::U64, "U64", 8},
};
const DTypeRow& row(DType d) { return kDTypes[static_cast<size_t>(d)]; }

constexpr uint64_t kMaxHeaderSize = 100'000'000;  // the reference reader's MAX_HEADER_SIZE
}  // namespace

size_t dtype_size(DType d) { return row(d).size; }
const char* dtype_name(DType d) { return row(d).name; }

DType parse_dtype(const std::string& name, const std::string& context) {
  std::vector<std::string> known;
  for (const auto& r : kDTypes) {
    if (name == r.name) return r.dtype;
    known.push_back(r.name);
  }
  std::string hint = "known dtypes: " + join(known, ", ");
  std::string near = nearest_name(name, known);
  if (!near.empty()) hint = "did you mean " + near + "? " + hint;
  throw Error(context, "unknown dtype \"" + name + "\"", hint);
}

std::string format_shape(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(shape[i]);
  }
  s += ']';
  return s;
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// numel × dtype size, or false when a dimension is negative or the product overflows 63 bits.
static bool checked_nbytes(const std::vector<int64_t>& shape, DType dtype, uint64_t& out) {
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d != 0 && n > kMax / static_cast<uint64_t>(d)) return false;
    n *= static_cast<uint64_t>(d);
  }
  if (n > kMax / dtype_size(dtype)) return false;
  out = n * dtype_size(dtype);
  return true;
}

// ---- the mapping: an mmap'ed file or an owned buffer ------------------------------------------

struct SafetensorsFile::Mapping {
  void* addr = nullptr;  // mmap'ed region (nullptr when `owned` holds the bytes)
  size_t length = 0;
  std::string owned;
  ~Mapping() {
    if (addr) ::munmap(addr, length);
  }
  const uint8_t* bytes() const {
    return addr ? static_cast<const uint8_t*>(addr) : reinterpret_cast<const uint8_t*>(owned.data());
  }
  size_t size() const { return addr ? length : owned.size(); }
};

SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;
SafetensorsFile::~SafetensorsFile() = default;

// ---- header parsing ---------------------------------------------------------------------------

namespace {

// Parses the header JSON and throws on the first duplicate key at any depth (nlohmann would keep
// the last one silently).
json parse_header_json(std::string_view text, const std::string& file) {
  struct Frame { std::string owner; std::set<std::string> keys; };
  std::vector<Frame> frames;
  std::string last_key;
  auto callback = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        frames.push_back({frames.empty() ? std::string() : last_key, {}});
        break;
      case json::parse_event_t::object_end:
        frames.pop_back();
        break;
      case json::parse_event_t::key: {
        last_key = parsed.get<std::string>();
        Frame& f = frames.back();
        if (!f.keys.insert(last_key).second) {
          if (frames.size() == 1)
            throw Error(file, "duplicate key \"" + last_key + "\" in header",
                        "each tensor name may appear only once");
          throw Error(file, "duplicate key \"" + last_key + "\" inside \"" + f.owner + "\"");
        }
        break;
      }
      default:
        break;
    }
    return true;
  };
  check_json_depth(text, file);
  try {
    return json::parse(text.begin(), text.end(), callback);
  } catch (const json::exception& e) {
    throw Error(file, std::string("header is not valid UTF-8 JSON: ") + e.what(),
                "not a safetensors file, or a corrupt one?");
  }
}

std::string describe(const json& v) {
  if (v.is_number_float()) return "number " + v.dump();
  if (v.is_number_integer() && !v.is_number_unsigned()) return "negative number " + v.dump();
  return std::string(v.type_name()) + " " + (v.dump().size() > 40 ? v.dump().substr(0, 40) + "..." : v.dump());
}

// Reads a JSON array of non-negative integers (each fitting int64); `what` names it in errors.
std::vector<uint64_t> read_uints(const json& v, const std::string& ctx, const char* what) {
  if (!v.is_array())
    throw Error(ctx, std::string("\"") + what + "\" must be an array of non-negative integers, got " +
                         describe(v));
  std::vector<uint64_t> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const json& x = v[i];
    const bool too_big = x.is_number_unsigned() &&
                         x.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    if (!x.is_number_unsigned() || too_big)
      throw Error(ctx, std::string("\"") + what + "\" " + v.dump() + ": element " + std::to_string(i) +
                           " is " + describe(x) + ", expected a non-negative integer" +
                           (too_big ? " below 2^63" : ""));
    out.push_back(x.get<uint64_t>());
  }
  return out;
}

const json& field(const json& entry, const char* key, const std::string& ctx) {
  auto it = entry.find(key);
  if (it == entry.end())
    throw Error(ctx, std::string("missing \"") + key + "\"", "an entry needs dtype, shape and data_offsets");
  return *it;
}

TensorInfo parse_entry(const std::string& name, const json& entry, const std::string& file) {
  const std::string ctx = file + ": tensor \"" + name + "\"";
  if (!entry.is_object())
    throw Error(ctx, "entry must be an object with dtype, shape and data_offsets, got " + describe(entry));
  TensorInfo t;
  t.name = name;
  const json& dtype = field(entry, "dtype", ctx);
  if (!dtype.is_string()) throw Error(ctx, "\"dtype\" must be a string, got " + describe(dtype));
  t.dtype = parse_dtype(dtype.get<std::string>(), ctx);
  for (uint64_t d : read_uints(field(entry, "shape", ctx), ctx, "shape"))
    t.shape.push_back(static_cast<int64_t>(d));
  auto offsets = read_uints(field(entry, "data_offsets", ctx), ctx, "data_offsets");
  if (offsets.size() != 2)
    throw Error(ctx, "\"data_offsets\" must hold exactly 2 integers [begin,end], got " +
                         std::to_string(offsets.size()));
  t.begin = offsets[0];
  t.end = offsets[1];
  const std::string range = "data_offsets [" + std::to_string(t.begin) + "," + std::to_string(t.end) + "]";
  if (t.begin > t.end) throw Error(ctx, range + ": begin is after end");
  uint64_t expected = 0;
  if (!checked_nbytes(t.shape, t.dtype, expected))
    throw Error(ctx, "shape " + format_shape(t.shape) + " has too many elements (size overflows 64 bits)");
  if (t.nbytes() != expected)
    throw Error(ctx, range + " hold " + std::to_string(t.nbytes()) + " bytes, expected " +
                         std::to_string(expected) + " (" + dtype_name(t.dtype) + ", shape " +
                         format_shape(t.shape) + ")");
  return t;
}

std::map<std::string, std::string> parse_metadata(const json& m, const std::string& file) {
  std::map<std::string, std::string> out;
  if (m.is_null()) return out;  // the reference reader treats null as absent
  if (!m.is_object())
    throw Error(file, "__metadata__ must be an object of string to string, got " + describe(m));
  for (const auto& [k, v] : m.items()) {
    if (!v.is_string())
      throw Error(file, "__metadata__[\"" + k + "\"] must be a string, got " + describe(v),
                  "metadata holds string values only; store numbers as text");
    out[k] = v.get<std::string>();
  }
  return out;
}

// Sorted by offset, the buffers must tile [0, buffer_size) exactly.
void check_layout(std::vector<TensorInfo>& tensors, uint64_t buffer_size, const std::string& file) {
  std::sort(tensors.begin(), tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t pos = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo& t : tensors) {
    const std::string range = "data_offsets [" + std::to_string(t.begin) + "," + std::to_string(t.end) + "]";
    const std::string ctx = file + ": tensor \"" + t.name + "\"";
    if (t.begin > pos) {
      std::string after = prev ? "tensor \"" + prev->name + "\", which ends at " + std::to_string(pos)
                               : "the start of the data section";
      throw Error(ctx, range + " leave a gap of " + std::to_string(t.begin - pos) + " bytes after " + after,
                  "tensor buffers must be contiguous");
    }
    if (t.begin < pos)
      throw Error(ctx, range + " overlap tensor \"" + prev->name + "\" [" + std::to_string(prev->begin) +
                           "," + std::to_string(prev->end) + "]",
                  "tensor buffers must not overlap");
    pos = t.end;
    prev = &t;
  }
  if (pos > buffer_size)
    throw Error(file, "tensor \"" + prev->name + "\" ends at byte " + std::to_string(pos) +
                          " of the data section, which holds only " + std::to_string(buffer_size) + " bytes",
                "the file is truncated");
  if (pos < buffer_size)
    throw Error(file, "tensors end at byte " + std::to_string(pos) + " but the data section holds " +
                          std::to_string(buffer_size) + " bytes (MetadataIncompleteBuffer)",
                "the header does not describe the whole file");
}

}  // namespace

// ---- SafetensorsFile --------------------------------------------------------------------------

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path, "not a regular file");
  }
  auto map = std::make_unique<Mapping>();
  if (st.st_size >= 8) {  // shorter files are rejected by parse() with a clear message
    void* addr = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      throw Error(path, std::string("mmap failed: ") + std::strerror(e));
    }
    map->addr = addr;
    map->length = static_cast<size_t>(st.st_size);
  } else {
    map->owned.resize(static_cast<size_t>(st.st_size));
    if (::read(fd, map->owned.data(), map->owned.size()) != st.st_size) map->owned.clear();
  }
  ::close(fd);
  SafetensorsFile f;
  f.path_ = path;
  f.map_ = std::move(map);
  f.parse();
  return f;
}

SafetensorsFile SafetensorsFile::from_bytes(std::string bytes, const std::string& name) {
  SafetensorsFile f;
  f.path_ = name;
  f.map_ = std::make_unique<Mapping>();
  f.map_->owned = std::move(bytes);
  f.parse();
  return f;
}

void SafetensorsFile::parse() {
  const uint8_t* p = map_->bytes();
  const uint64_t size = map_->size();
  if (size < 8)
    throw Error(path_, "file is " + std::to_string(size) + " bytes, too short for the 8-byte header length",
                "truncated or not a safetensors file");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | p[i];  // little-endian u64
  if (n > kMaxHeaderSize)
    throw Error(path_, "header length " + std::to_string(n) + " exceeds the 100 MB limit (" +
                           std::to_string(kMaxHeaderSize) + " bytes)",
                "not a safetensors file?");
  if (n > size - 8)
    throw Error(path_, "header length " + std::to_string(n) + " runs past the end of the file (file is " +
                           std::to_string(size) + " bytes, header would end at byte " +
                           std::to_string(n + 8) + ")",
                "the file is truncated");

  json header = parse_header_json({reinterpret_cast<const char*>(p + 8), n}, path_);
  if (!header.is_object())
    throw Error(path_, std::string("header must be a JSON object, got ") + header.type_name());

  std::vector<TensorInfo> tensors;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__")
      metadata_ = parse_metadata(value, path_);
    else
      tensors.push_back(parse_entry(key, value, path_));
  }
  buffer_ = p + 8 + n;
  buffer_size_ = size - 8 - n;
  check_layout(tensors, buffer_size_, path_);
  tensors_ = std::move(tensors);
  for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& [name, i] : index_) out.push_back(name);
  return out;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& SafetensorsFile::at(const std::string& name) const {
  if (const TensorInfo* t = find(name)) return *t;
  std::string near = nearest_name(name, names());
  throw Error(path_ + ": tensor \"" + name + "\"", "not in this file",
              near.empty() ? "the file holds " + std::to_string(tensors_.size()) + " tensors"
                           : "did you mean \"" + near + "\"?");
}

const uint8_t* SafetensorsFile::data(const TensorInfo& t) const { return buffer_ + t.begin; }

// ---- writer -----------------------------------------------------------------------------------

std::string serialize_safetensors(const std::vector<TensorView>& tensors,
                                  const std::map<std::string, std::string>& metadata) {
  const std::string ctx = "safetensors writer";
  std::vector<const TensorView*> order;
  std::set<std::string> seen;
  for (const TensorView& t : tensors) {
    const std::string tctx = ctx + ": tensor \"" + t.name + "\"";
    check(t.name != "__metadata__", tctx, "the name __metadata__ is reserved");
    check(seen.insert(t.name).second, tctx, "duplicate tensor name");
    uint64_t expected = 0;
    check(checked_nbytes(t.shape, t.dtype, expected), tctx,
          "shape " + format_shape(t.shape) + " has a negative dimension or too many elements");
    check(t.nbytes == expected, tctx,
          std::to_string(t.nbytes) + " bytes given, expected " + std::to_string(expected) + " (" +
              dtype_name(t.dtype) + ", shape " + format_shape(t.shape) + ")");
    check(t.data != nullptr || t.nbytes == 0, tctx, "null data pointer");
    order.push_back(&t);
  }
  // The reference writer: dtype descending (its enum order, i.e. alignment), then name.
  std::sort(order.begin(), order.end(), [](const TensorView* a, const TensorView* b) {
    return a->dtype != b->dtype ? a->dtype > b->dtype : a->name < b->name;
  });

  auto quote = [&](const std::string& s) {
    try {
      return json(s).dump();
    } catch (const json::exception&) {
      throw Error(ctx, "name or metadata \"" + s + "\" is not valid UTF-8");
    }
  };
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    for (const auto& [k, v] : metadata) {
      if (header.back() != '{') header += ',';
      header += quote(k);
      header += ':';
      header += quote(v);
    }
    header += '}';
  }
  uint64_t offset = 0;
  for (const TensorView* t : order) {
    if (header.size() > 1) header += ",";
    header += quote(t->name) + ":{\"dtype\":\"" + dtype_name(t->dtype) + "\",\"shape\":" +
              format_shape(t->shape) + ",\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + t->nbytes) + "]}";
    offset += t->nbytes;
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');

  std::string out;
  out.reserve(8 + header.size() + offset);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += header;
  for (const TensorView* t : order)
    if (t->nbytes) out.append(static_cast<const char*>(t->data), t->nbytes);
  return out;
}

void write_safetensors(const std::string& path, const std::vector<TensorView>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  try {
    write_file_atomic(path, serialize_safetensors(tensors, metadata));
  } catch (const Error& e) {
    if (e.context().rfind(path, 0) == 0) throw;
    throw e.within(path);
  }
}

}  // namespace grpo::io
