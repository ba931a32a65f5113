// Thrift compact protocol reader: see thrift_compact.h. The encoding (Apache Thrift's
// TCompactProtocol): field header byte = (id delta << 4) | type, or type alone followed by a
// zigzag varint id when the delta is 0 or over 15; integers are zigzag varints; binary is a varint
// length then bytes; a list header is (size << 4) | element type, size 15 meaning a varint size
// follows; a map header is a varint size then (key type << 4) | value type when non-empty.
#include "core/io/thrift_compact.h"

#include <cstring>

#include "core/common/error.h"

namespace grpo::io::thrift {
namespace {

int64_t unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

[[noreturn]] void fail(const std::string& message) { throw Error("", message); }

}  // namespace

uint8_t CompactReader::read_u8() {
  if (p_ >= end_) fail("thrift: unexpected end of data at byte " + std::to_string(position()));
  return *p_++;
}

uint64_t CompactReader::read_varint() {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    uint8_t b = read_u8();
    if (shift == 63 && (b & 0x7E)) fail("thrift: varint overflows 64 bits at byte " + std::to_string(position()));
    v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if (!(b & 0x80)) return v;
  }
  fail("thrift: varint longer than 10 bytes at byte " + std::to_string(position()));
}

void CompactReader::enter() {
  if (++depth_ > kMaxDepth) fail("thrift: structures nested deeper than " + std::to_string(kMaxDepth));
}

void CompactReader::read_struct(const std::function<void(int16_t, uint8_t)>& on_field) {
  enter();
  int16_t last_id = 0;
  for (;;) {
    uint8_t header = read_u8();
    uint8_t type = header & 0x0F;
    if (type == kStop) break;
    if (type > kStruct) fail("thrift: unknown field type " + std::to_string(type) + " at byte " + std::to_string(position() - 1));
    int16_t id;
    if (uint8_t delta = header >> 4) {
      id = static_cast<int16_t>(last_id + delta);  // last_id <= 32767 - 15 is not guaranteed: wraps harmlessly
    } else {
      id = read_i16();
    }
    last_id = id;
    on_field(id, type);
  }
  leave();
}

bool CompactReader::read_bool(uint8_t type) {
  if (type == kTrue) return true;
  if (type == kFalse) return false;
  fail("thrift: expected a boolean, found wire type " + std::to_string(type));
}

int8_t CompactReader::read_byte() { return static_cast<int8_t>(read_u8()); }

int16_t CompactReader::read_i16() {
  int64_t v = unzigzag(read_varint());
  if (v < INT16_MIN || v > INT16_MAX) fail("thrift: i16 value " + std::to_string(v) + " out of range");
  return static_cast<int16_t>(v);
}

int32_t CompactReader::read_i32() {
  int64_t v = unzigzag(read_varint());
  if (v < INT32_MIN || v > INT32_MAX) fail("thrift: i32 value " + std::to_string(v) + " out of range");
  return static_cast<int32_t>(v);
}

int64_t CompactReader::read_i64() { return unzigzag(read_varint()); }

double CompactReader::read_double() {
  if (remaining() < 8) fail("thrift: unexpected end of data in a double");
  double d;
  std::memcpy(&d, p_, 8);  // little-endian on every platform we build for
  p_ += 8;
  return d;
}

std::string_view CompactReader::read_binary() {
  uint64_t n = read_varint();
  if (n > remaining())
    fail("thrift: string of " + std::to_string(n) + " bytes exceeds the " + std::to_string(remaining()) + " bytes left");
  std::string_view s(reinterpret_cast<const char*>(p_), n);
  p_ += n;
  return s;
}

void CompactReader::read_list_header(uint8_t& elem_type, uint32_t& count) {
  uint8_t header = read_u8();
  elem_type = header & 0x0F;
  uint64_t n = header >> 4;
  if (n == 15) n = read_varint();
  if (elem_type == kStop || elem_type > kStruct) fail("thrift: unknown list element type " + std::to_string(elem_type));
  if (n > remaining())
    fail("thrift: list of " + std::to_string(n) + " elements exceeds the " + std::to_string(remaining()) + " bytes left");
  count = static_cast<uint32_t>(n);
}

void CompactReader::read_list(uint8_t expected_elem_type, const std::function<void()>& read_elem) {
  uint8_t elem_type;
  uint32_t count;
  read_list_header(elem_type, count);
  // Booleans in lists are written as kTrue/kFalse bytes; some writers use kTrue for the element
  // type of a bool list either way.
  bool bool_list = expected_elem_type == kTrue || expected_elem_type == kFalse;
  if (bool_list ? (elem_type != kTrue && elem_type != kFalse) : elem_type != expected_elem_type)
    fail("thrift: list of wire type " + std::to_string(elem_type) + ", expected " + std::to_string(expected_elem_type));
  enter();
  for (uint32_t i = 0; i < count; ++i) read_elem();
  leave();
}

void CompactReader::skip(uint8_t type) {
  switch (type) {
    case kTrue:
    case kFalse: return;  // the value was in the field header
    case kByte: read_u8(); return;
    case kI16:
    case kI32:
    case kI64: read_varint(); return;
    case kDouble: read_double(); return;
    case kBinary: read_binary(); return;
    case kList:
    case kSet: {
      uint8_t elem;
      uint32_t n;
      read_list_header(elem, n);
      enter();
      // Inside a container a boolean is a whole byte.
      for (uint32_t i = 0; i < n; ++i) (elem == kTrue || elem == kFalse) ? (void)read_u8() : skip(elem);
      leave();
      return;
    }
    case kMap: {
      uint64_t n = read_varint();
      if (n == 0) return;
      if (n > remaining()) fail("thrift: map of " + std::to_string(n) + " entries exceeds the bytes left");
      uint8_t kv = read_u8();
      uint8_t kt = kv >> 4, vt = kv & 0x0F;
      if (kt == kStop || kt > kStruct || vt == kStop || vt > kStruct) fail("thrift: unknown map key/value type");
      enter();
      for (uint64_t i = 0; i < n; ++i) {
        (kt == kTrue || kt == kFalse) ? (void)read_u8() : skip(kt);
        (vt == kTrue || vt == kFalse) ? (void)read_u8() : skip(vt);
      }
      leave();
      return;
    }
    case kStruct: read_struct([this](int16_t, uint8_t t) { skip(t); }); return;
    default: fail("thrift: cannot skip wire type " + std::to_string(type));
  }
}

void CompactReader::expect(uint8_t type, uint8_t expected, int16_t field_id) {
  bool ok = type == expected || ((expected == kTrue || expected == kFalse) && (type == kTrue || type == kFalse));
  if (!ok)
    fail("thrift: field " + std::to_string(field_id) + " has wire type " + std::to_string(type) + ", expected " +
         std::to_string(expected));
}

}  // namespace grpo::io::thrift
