// Thrift compact protocol, read side only: what Parquet's footer (FileMetaData) and page headers
// are written in. A bounded cursor over untrusted bytes: every length is checked against the
// bytes left, nesting is limited, and a malformed input throws grpo::Error (no context; the
// caller adds the file and the structure being read).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace grpo::io::thrift {

// Wire types of the compact protocol (field headers and list element types).
enum Type : uint8_t {
  kStop = 0, kTrue = 1, kFalse = 2, kByte = 3, kI16 = 4, kI32 = 5, kI64 = 6, kDouble = 7,
  kBinary = 8, kList = 9, kSet = 10, kMap = 11, kStruct = 12,
};

constexpr int kMaxDepth = 64;  // structs/lists/maps nested deeper than this are rejected

class CompactReader {
public:
  CompactReader(const uint8_t* data, size_t size) : p_(data), end_(data + size), begin_(data) {}

  size_t position() const { return static_cast<size_t>(p_ - begin_); }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }

  // Reads the fields of one struct, calling on_field(id, type) for each; on_field reads the value
  // with the typed readers below (checking the type with expect) or calls skip(type). Returns
  // after the struct's stop byte. Nesting depth is counted here.
  void read_struct(const std::function<void(int16_t id, uint8_t type)>& on_field);

  // Values. A field's boolean lives in its header type (kTrue/kFalse): pass that type here.
  bool read_bool(uint8_t type);
  int8_t read_byte();
  int16_t read_i16();
  int32_t read_i32();
  int64_t read_i64();
  double read_double();
  std::string_view read_binary();  // a view into the input
  // A list/set header: element type and count; the count is at most the bytes left, since every
  // element takes at least one byte.
  void read_list_header(uint8_t& elem_type, uint32_t& count);
  // A list of elements read by read_elem (called count times), with nesting counted.
  void read_list(uint8_t expected_elem_type, const std::function<void()>& read_elem);

  // Skips one value of `type` (recursing into containers up to kMaxDepth).
  void skip(uint8_t type);
  // Throws unless `type` is `expected` (a field of the wrong wire type: a corrupt file).
  static void expect(uint8_t type, uint8_t expected, int16_t field_id);

private:
  uint64_t read_varint();
  uint8_t read_u8();
  void enter();
  void leave() { --depth_; }

  const uint8_t* p_;
  const uint8_t* end_;
  const uint8_t* begin_;
  int depth_ = 0;
};

}  // namespace grpo::io::thrift
