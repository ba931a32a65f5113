// Parquet encodings, decode side: see parquet_encoding.h. Layouts from parquet-format's
// Encodings.md. Counts come from page headers and levels (already charged to the budget by the
// caller); every read is bounded by the bytes given, and loops consume input or stop at `count`.
#include "core/io/parquet_encoding.h"

#include <algorithm>
#include <cstring>

#include "core/common/error.h"
#include "core/common/strings.h"
#include "core/io/parquet_meta.h"

namespace grpo::io::parquet {
namespace {

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Unsigned LEB128 (as Parquet's encodings write it), at most 10 bytes.
uint64_t read_uleb(const uint8_t* p, size_t n, size_t& pos, const char* what) {
  uint64_t v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (pos >= n) fail(std::string(what) + ": data ends inside a varint");
    uint8_t b = p[pos++];
    if (shift == 63 && (b & 0x7E)) fail(std::string(what) + ": varint overflows 64 bits");
    v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if (!(b & 0x80)) return v;
  }
  fail(std::string(what) + ": varint longer than 10 bytes");
}

int64_t unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

// `count` little-endian-bit-packed values of `width` (<= 32) bits from p (which holds at least
// ceil(count * width / 8) bytes).
template <typename T>
void unpack_lsb(const uint8_t* p, int width, size_t count, T* out) {
  if (width == 0) {
    std::fill(out, out + count, T(0));
    return;
  }
  const uint64_t mask = (uint64_t(1) << width) - 1;
  uint64_t buf = 0;
  int bits = 0;
  for (size_t k = 0; k < count; ++k) {
    while (bits < width) {
      buf |= uint64_t(*p++) << bits;
      bits += 8;
    }
    out[k] = static_cast<T>(buf & mask);
    buf >>= width;
    bits -= width;
  }
}

// Value j (width <= 64 bits, LSB first) of a packed run of `avail` bytes.
uint64_t unpack_one(const uint8_t* p, size_t avail, int width, uint64_t j) {
  if (width == 0) return 0;
  uint64_t bit = j * static_cast<uint64_t>(width);
  size_t byte = bit / 8;
  int shift = static_cast<int>(bit % 8);
  unsigned __int128 x = 0;
  size_t need = std::min<size_t>((shift + width + 7) / 8, avail - byte);
  for (size_t b = 0; b < need; ++b) x |= static_cast<unsigned __int128>(p[byte + b]) << (8 * b);
  x >>= shift;
  return width == 64 ? static_cast<uint64_t>(x) : static_cast<uint64_t>(x) & ((uint64_t(1) << width) - 1);
}

template <typename T>
size_t hybrid(const uint8_t* p, size_t n, int width, size_t count, T* out) {
  if (width < 0 || width > 32) fail("RLE/bit-packed data: bit width " + std::to_string(width) + " exceeds 32");
  size_t pos = 0, done = 0;
  const size_t value_bytes = (width + 7) / 8;
  while (done < count) {
    uint64_t header = read_uleb(p, n, pos, "RLE/bit-packed data");
    if (header & 1) {
      // A bit-packed run of groups of 8 values; a last run cut short by the end of the data
      // yields the values its bytes hold.
      uint64_t groups = header >> 1;
      size_t avail = n - pos;
      uint64_t run_values, run_bytes;
      if (width == 0) {
        run_values = groups > (UINT64_MAX / 8) ? UINT64_MAX : groups * 8;
        run_bytes = 0;
      } else if (groups <= avail / static_cast<unsigned>(width)) {
        run_values = groups * 8;
        run_bytes = groups * static_cast<unsigned>(width);
      } else {
        run_values = static_cast<uint64_t>(avail) * 8 / static_cast<unsigned>(width);
        run_bytes = avail;
      }
      size_t take = static_cast<size_t>(std::min<uint64_t>(run_values, count - done));
      if (take == 0 && groups > 0) fail("RLE/bit-packed data: bit-packed run exceeds the data");
      unpack_lsb(p + pos, width, take, out + done);
      done += take;
      pos += static_cast<size_t>(run_bytes);
    } else {
      uint64_t run = header >> 1;
      if (value_bytes > n - pos) fail("RLE/bit-packed data: data ends inside a run value");
      uint32_t v = 0;
      for (size_t b = 0; b < value_bytes; ++b) v |= uint32_t(p[pos + b]) << (8 * b);
      pos += value_bytes;
      size_t take = static_cast<size_t>(std::min<uint64_t>(run, count - done));
      std::fill(out + done, out + done + take, static_cast<T>(v));
      done += take;
    }
  }
  return pos;
}

// ---- DELTA_BINARY_PACKED ------------------------------------------------------------------------

// Decodes a stream holding at least `count` values, keeping the first `count` (wrapping
// arithmetic; int32 streams are truncated to 32 bits). Returns the bytes of the whole stream.
size_t delta_stream(const uint8_t* p, size_t n, size_t count, bool is32, std::vector<int64_t>& out) {
  const char* what = "DELTA_BINARY_PACKED data";
  size_t pos = 0;
  uint64_t block_size = read_uleb(p, n, pos, what);
  uint64_t miniblocks = read_uleb(p, n, pos, what);
  uint64_t total = read_uleb(p, n, pos, what);
  uint64_t value = static_cast<uint64_t>(unzigzag(read_uleb(p, n, pos, what)));
  if (block_size == 0 || block_size % 128 != 0 || block_size > (1u << 20))
    fail(std::string(what) + ": block size " + n_str(block_size) + " is not a positive multiple of 128 (at most 2^20)");
  if (miniblocks == 0 || block_size % miniblocks != 0 || (block_size / miniblocks) % 32 != 0)
    fail(std::string(what) + ": " + n_str(miniblocks) + " miniblocks per block of " + n_str(block_size) +
         " values do not hold a multiple of 32 values each");
  if (total < count)
    fail(std::string(what) + ": holds " + n_str(total) + " values, the page needs " + n_str(count));
  const uint64_t per_mini = block_size / miniblocks;
  auto keep = [&](uint64_t v) {
    out.push_back(is32 ? static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(v))) : static_cast<int64_t>(v));
  };
  out.reserve(out.size() + count);
  uint64_t produced = 0;
  if (total > 0) {
    if (count > 0) keep(value);
    produced = 1;
  }
  while (produced < total) {
    uint64_t min_delta = static_cast<uint64_t>(unzigzag(read_uleb(p, n, pos, what)));
    if (miniblocks > n - pos) fail(std::string(what) + ": data ends inside a block's bit widths");
    const uint8_t* widths = p + pos;
    pos += miniblocks;
    for (uint64_t m = 0; m < miniblocks && produced < total; ++m) {
      int w = widths[m];
      if (w > 64) fail(std::string(what) + ": miniblock bit width " + std::to_string(w) + " exceeds 64");
      uint64_t in_mini = std::min<uint64_t>(per_mini, total - produced);
      uint64_t full_bytes = per_mini * w / 8;
      uint64_t needed = (in_mini * w + 7) / 8;  // a last miniblock may lack its padding
      size_t avail = n - pos;
      if (needed > avail) fail(std::string(what) + ": data ends inside a miniblock");
      uint64_t stored = produced < count ? std::min<uint64_t>(in_mini, count - produced) : 0;
      for (uint64_t j = 0; j < stored; ++j) {
        value += min_delta + unpack_one(p + pos, avail, w, j);
        keep(value);
      }
      produced += in_mini;
      pos += static_cast<size_t>(std::min<uint64_t>(full_bytes, avail));
    }
  }
  return pos;
}

// ---- byte arrays --------------------------------------------------------------------------------

// DELTA_LENGTH_BYTE_ARRAY: lengths (DELTA_BINARY_PACKED) then the bytes. Calls emit(ptr, len).
// Returns the bytes consumed.
template <typename Emit>
size_t delta_length(const uint8_t* p, size_t n, size_t count, Emit&& emit) {
  std::vector<int64_t> lengths;
  size_t pos = delta_stream(p, n, count, true, lengths);
  for (size_t i = 0; i < count; ++i) {
    int64_t len = lengths[i];
    if (len < 0 || static_cast<uint64_t>(len) > n - pos)
      fail("DELTA_LENGTH_BYTE_ARRAY data: value " + n_str(i) + " of " + std::to_string(len) + " bytes exceeds the data");
    emit(p + pos, static_cast<size_t>(len));
    pos += static_cast<size_t>(len);
  }
  return pos;
}

void check_count(size_t count, size_t n, size_t width, const char* encoding, PhysicalType t) {
  if (width != 0 && count > n / width)
    fail(std::string(encoding) + " " + type_name(t) + " data: " + n_str(count) + " values need " +
         n_str(static_cast<uint64_t>(count) * width) + " bytes, the page has " + n_str(n));
}

void decode_plain(const ValueType& vt, const uint8_t* p, size_t n, size_t count, Values& out, Budget& budget) {
  const size_t w = vt.fixed_width();
  switch (vt.type) {
    case PhysicalType::BOOLEAN:
      if (count > (n * 8)) fail("PLAIN BOOLEAN data: " + n_str(count) + " values exceed the page's " + n_str(n) + " bytes");
      budget.take(count * 8);
      {
        size_t base = out.ints.size();
        out.ints.resize(base + count);
        unpack_lsb(p, 1, count, out.ints.data() + base);
      }
      return;
    case PhysicalType::INT32:
      check_count(count, n, 4, "PLAIN", vt.type);
      budget.take(count * 8);
      for (size_t i = 0; i < count; ++i) out.ints.push_back(static_cast<int32_t>(load_u32(p + 4 * i)));
      return;
    case PhysicalType::INT64:
      check_count(count, n, 8, "PLAIN", vt.type);
      budget.take(count * 8);
      for (size_t i = 0; i < count; ++i) {
        int64_t v;
        std::memcpy(&v, p + 8 * i, 8);
        out.ints.push_back(v);
      }
      return;
    case PhysicalType::FLOAT:
      check_count(count, n, 4, "PLAIN", vt.type);
      budget.take(count * 8);
      for (size_t i = 0; i < count; ++i) {
        float f;
        std::memcpy(&f, p + 4 * i, 4);
        out.reals.push_back(f);
      }
      return;
    case PhysicalType::DOUBLE:
      check_count(count, n, 8, "PLAIN", vt.type);
      budget.take(count * 8);
      for (size_t i = 0; i < count; ++i) {
        double d;
        std::memcpy(&d, p + 8 * i, 8);
        out.reals.push_back(d);
      }
      return;
    case PhysicalType::INT96:
    case PhysicalType::FIXED_LEN_BYTE_ARRAY:
      check_count(count, n, w, "PLAIN", vt.type);
      for (size_t i = 0; i < count; ++i) out.append_bytes(p + w * i, w, budget);
      return;
    case PhysicalType::BYTE_ARRAY: {
      check_count(count, n, 4, "PLAIN", vt.type);  // each value has a 4-byte length
      size_t pos = 0;
      for (size_t i = 0; i < count; ++i) {
        if (n - pos < 4) fail("PLAIN BYTE_ARRAY data: value " + n_str(i) + " of " + n_str(count) + ": data ends in its length");
        uint32_t len = load_u32(p + pos);
        pos += 4;
        if (len > n - pos)
          fail("PLAIN BYTE_ARRAY data: value " + n_str(i) + " of " + n_str(len) + " bytes exceeds the " + n_str(n - pos) + " bytes left");
        out.append_bytes(p + pos, len, budget);
        pos += len;
      }
      return;
    }
  }
}

void decode_byte_stream_split(const ValueType& vt, const uint8_t* p, size_t n, size_t count, Values& out, Budget& budget) {
  const size_t w = vt.fixed_width();
  if (w == 0 || vt.type == PhysicalType::INT96) fail(std::string("BYTE_STREAM_SPLIT is not defined for ") + type_name(vt.type));
  check_count(count, n, w, "BYTE_STREAM_SPLIT", vt.type);
  if (vt.type == PhysicalType::FIXED_LEN_BYTE_ARRAY) {
    uint8_t* dst = out.own(count * w, budget);
    for (size_t i = 0; i < count; ++i) {
      for (size_t k = 0; k < w; ++k) dst[i * w + k] = p[k * count + i];
      out.append_bytes(dst + i * w, w, budget);
    }
    return;
  }
  budget.take(static_cast<uint64_t>(count) * 8);
  uint8_t buf[8];
  for (size_t i = 0; i < count; ++i) {
    for (size_t k = 0; k < w; ++k) buf[k] = p[k * count + i];
    switch (vt.type) {
      case PhysicalType::INT32: out.ints.push_back(static_cast<int32_t>(load_u32(buf))); break;
      case PhysicalType::INT64: { int64_t v; std::memcpy(&v, buf, 8); out.ints.push_back(v); break; }
      case PhysicalType::FLOAT: { float f; std::memcpy(&f, buf, 4); out.reals.push_back(f); break; }
      default: { double d; std::memcpy(&d, buf, 8); out.reals.push_back(d); break; }
    }
  }
}

}  // namespace

void Budget::take(uint64_t bytes) {
  if (bytes > left_)
    throw Error("", "decoded data exceeds the row group limit of " + format_bytes(static_cast<double>(limit_)),
                "the file's row groups are too large for this reader's limit; rewrite it with smaller row "
                "groups (e.g. pyarrow's row_group_size) or raise ParquetLimits::max_row_group_bytes");
  left_ -= bytes;
}

size_t Values::size(PhysicalType t) const {
  switch (t) {
    case PhysicalType::FLOAT:
    case PhysicalType::DOUBLE: return reals.size();
    case PhysicalType::BYTE_ARRAY:
    case PhysicalType::FIXED_LEN_BYTE_ARRAY:
    case PhysicalType::INT96: return bytes.size();
    default: return ints.size();
  }
}

void Values::append_bytes(const uint8_t* p, size_t n, Budget& budget) {
  budget.take(static_cast<uint64_t>(n) + 16);
  bytes.emplace_back(reinterpret_cast<const char*>(p), n);
}

uint8_t* Values::own(size_t n, Budget& budget) {
  budget.take(n);
  storage.push_back(pool ? pool->get(n) : unpooled_buffer(n));
  return storage.back().get();
}

void Values::append_dictionary(const Values& dict, PhysicalType t, const uint32_t* indices, size_t n, Budget& budget) {
  switch (t) {
    case PhysicalType::FLOAT:
    case PhysicalType::DOUBLE:
      budget.take(static_cast<uint64_t>(n) * 8);
      for (size_t i = 0; i < n; ++i) reals.push_back(dict.reals[indices[i]]);
      return;
    case PhysicalType::BYTE_ARRAY:
    case PhysicalType::FIXED_LEN_BYTE_ARRAY:
    case PhysicalType::INT96: {
      uint64_t total = 0;
      for (size_t i = 0; i < n; ++i) total += dict.bytes[indices[i]].size() + 16;
      budget.take(total);  // each lookup will be its own JSON string
      for (size_t i = 0; i < n; ++i) bytes.push_back(dict.bytes[indices[i]]);
      return;
    }
    default:
      budget.take(static_cast<uint64_t>(n) * 8);
      for (size_t i = 0; i < n; ++i) ints.push_back(dict.ints[indices[i]]);
  }
}

size_t ValueType::fixed_width() const {
  switch (type) {
    case PhysicalType::INT32:
    case PhysicalType::FLOAT: return 4;
    case PhysicalType::INT64:
    case PhysicalType::DOUBLE: return 8;
    case PhysicalType::INT96: return 12;
    case PhysicalType::FIXED_LEN_BYTE_ARRAY: return static_cast<size_t>(type_length);
    default: return 0;
  }
}

int bit_width(uint64_t v) {
  int w = 0;
  while (v) {
    ++w;
    v >>= 1;
  }
  return w;
}

size_t decode_hybrid(const uint8_t* p, size_t n, int width, size_t count, uint32_t* out) {
  return hybrid(p, n, width, count, out);
}

size_t decode_hybrid(const uint8_t* p, size_t n, int width, size_t count, uint8_t* out) {
  if (width > 8) fail("RLE levels: bit width " + std::to_string(width) + " exceeds 8");
  return hybrid(p, n, width, count, out);
}

size_t decode_bit_packed_msb(const uint8_t* p, size_t n, int width, size_t count, uint8_t* out) {
  if (width > 8) fail("BIT_PACKED levels: bit width " + std::to_string(width) + " exceeds 8");
  uint64_t bytes = (static_cast<uint64_t>(count) * width + 7) / 8;
  if (bytes > n) fail("BIT_PACKED levels: " + n_str(count) + " levels need " + n_str(bytes) + " bytes, the page has " + n_str(n));
  for (size_t i = 0; i < count; ++i) {
    uint32_t v = 0;
    for (int b = 0; b < width; ++b) {
      uint64_t bit = static_cast<uint64_t>(i) * width + b;
      v = (v << 1) | ((p[bit / 8] >> (7 - bit % 8)) & 1);
    }
    out[i] = static_cast<uint8_t>(v);
  }
  return static_cast<size_t>(bytes);
}

void decode_values(int32_t encoding, const ValueType& vt, const uint8_t* p, size_t n, size_t count, Values& out,
                   Budget& budget) {
  switch (encoding) {
    case PLAIN: decode_plain(vt, p, n, count, out, budget); return;
    case RLE: {  // booleans only: a 4-byte length, then width-1 hybrid data
      if (vt.type != PhysicalType::BOOLEAN) fail(std::string("RLE value encoding is not defined for ") + type_name(vt.type));
      if (n < 4) fail("RLE BOOLEAN data: missing its 4-byte length");
      uint32_t len = load_u32(p);
      if (len > n - 4) fail("RLE BOOLEAN data: length " + n_str(len) + " exceeds the page's " + n_str(n - 4) + " bytes");
      budget.take(static_cast<uint64_t>(count) * 8);
      std::vector<uint32_t> bits(count);
      hybrid(p + 4, len, 1, count, bits.data());
      for (uint32_t b : bits) out.ints.push_back(b & 1);
      return;
    }
    case DELTA_BINARY_PACKED: {
      if (vt.type != PhysicalType::INT32 && vt.type != PhysicalType::INT64)
        fail(std::string("DELTA_BINARY_PACKED is not defined for ") + type_name(vt.type));
      budget.take(static_cast<uint64_t>(count) * 8);
      delta_stream(p, n, count, vt.type == PhysicalType::INT32, out.ints);
      return;
    }
    case DELTA_LENGTH_BYTE_ARRAY:
      if (vt.type != PhysicalType::BYTE_ARRAY) fail(std::string("DELTA_LENGTH_BYTE_ARRAY is not defined for ") + type_name(vt.type));
      delta_length(p, n, count, [&](const uint8_t* v, size_t len) { out.append_bytes(v, len, budget); });
      return;
    case DELTA_BYTE_ARRAY: {  // prefix lengths, then suffixes (DELTA_LENGTH_BYTE_ARRAY)
      if (vt.type != PhysicalType::BYTE_ARRAY && vt.type != PhysicalType::FIXED_LEN_BYTE_ARRAY)
        fail(std::string("DELTA_BYTE_ARRAY is not defined for ") + type_name(vt.type));
      std::vector<int64_t> prefixes;
      size_t pos = delta_stream(p, n, count, true, prefixes);
      std::vector<std::string_view> suffixes;
      suffixes.reserve(count);
      delta_length(p + pos, n - pos, count, [&](const uint8_t* v, size_t len) {
        suffixes.emplace_back(reinterpret_cast<const char*>(v), len);
      });
      // Every value's length, checked and charged before the values are built in one buffer.
      uint64_t total = 0, prev = 0;
      for (size_t i = 0; i < count; ++i) {
        int64_t prefix = prefixes[i];
        if (prefix < 0 || static_cast<uint64_t>(prefix) > prev)
          fail("DELTA_BYTE_ARRAY data: value " + n_str(i) + " has prefix length " + std::to_string(prefix) +
               ", the previous value has " + n_str(prev) + " bytes");
        prev = static_cast<uint64_t>(prefix) + suffixes[i].size();
        if (vt.type == PhysicalType::FIXED_LEN_BYTE_ARRAY && prev != static_cast<uint64_t>(vt.type_length))
          fail("DELTA_BYTE_ARRAY data: value " + n_str(i) + " has " + n_str(prev) + " bytes, the column's fixed length is " +
               std::to_string(vt.type_length));
        budget.take(prev + 16);
        total += prev;
      }
      uint8_t* dst = out.own(static_cast<size_t>(total), budget);
      const uint8_t* last = dst;
      for (size_t i = 0; i < count; ++i) {
        size_t prefix = static_cast<size_t>(prefixes[i]);
        if (prefix) std::memmove(dst, last, prefix);
        if (!suffixes[i].empty()) std::memcpy(dst + prefix, suffixes[i].data(), suffixes[i].size());
        out.bytes.emplace_back(reinterpret_cast<const char*>(dst), prefix + suffixes[i].size());
        last = dst;
        dst += prefix + suffixes[i].size();
      }
      return;
    }
    case BYTE_STREAM_SPLIT: decode_byte_stream_split(vt, p, n, count, out, budget); return;
    case PLAIN_DICTIONARY:
    case RLE_DICTIONARY: fail("dictionary-encoded page without a dictionary page");
    default: fail(std::string("unsupported value encoding ") + encoding_name(encoding) + " (" + std::to_string(encoding) + ")");
  }
}

void decode_dictionary_indices(const uint8_t* p, size_t n, size_t count, size_t dict_size, std::vector<uint32_t>& out) {
  if (count == 0) return;
  if (n < 1) fail("dictionary indices: missing the bit-width byte");
  int width = p[0];
  if (width > 32) fail("dictionary indices: bit width " + std::to_string(width) + " exceeds 32");
  out.resize(count);
  hybrid(p + 1, n - 1, width, count, out.data());
  for (size_t i = 0; i < count; ++i)
    if (out[i] >= dict_size)
      fail("dictionary index " + n_str(out[i]) + " (value " + n_str(i) + ") is out of the dictionary's " + n_str(dict_size) + " entries");
}

}  // namespace grpo::io::parquet
