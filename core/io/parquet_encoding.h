// Parquet value and level encodings (parquet-format's Encodings.md), decoding only, over untrusted
// bytes: PLAIN, RLE/bit-packed hybrid (levels, booleans, dictionary indices), BIT_PACKED
// (deprecated levels), DELTA_BINARY_PACKED, DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY and
// BYTE_STREAM_SPLIT. Every decoder checks its input bounds and charges what it allocates to a
// Budget; failures are grpo::Error without file context. Internal to the Parquet reader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/io/parquet.h"
#include "core/io/parquet_buffers.h"

namespace grpo::io::parquet {

// What one row group may still allocate (ParquetLimits::max_row_group_bytes).
class Budget {
public:
  explicit Budget(uint64_t limit) : limit_(limit), left_(limit) {}
  void take(uint64_t bytes);  // throws when the row group would exceed the limit
  uint64_t left() const { return left_; }
  uint64_t limit() const { return limit_; }

private:
  uint64_t limit_, left_;
};

// Decoded non-null values of one column, by physical type: BOOLEAN, INT32 (sign-extended) and
// INT64 in ints; FLOAT and DOUBLE in reals; BYTE_ARRAY, FIXED_LEN_BYTE_ARRAY and INT96 (12 raw
// bytes) as views into page buffers that `storage` keeps alive (no copy of the page's bytes).
// Each byte value is charged its length + 16 to the budget, what it costs once it is a JSON string.
struct Values {
  std::vector<int64_t> ints;
  std::vector<double> reals;
  std::vector<std::string_view> bytes;
  std::vector<Buffer> storage;
  BufferPool* pool = nullptr;  // where own() takes buffers from (none: plain allocations)

  size_t size(PhysicalType t) const;
  // A view of [p, p + n), which must lie in a buffer held by `storage` (or by the dictionary's).
  void append_bytes(const uint8_t* p, size_t n, Budget& budget);
  // A buffer of n bytes kept with the values (charged to the budget).
  uint8_t* own(size_t n, Budget& budget);
  // Appends dict's values at indices[0..n) (each already checked < dict size): dictionary lookups.
  void append_dictionary(const Values& dict, PhysicalType t, const uint32_t* indices, size_t n, Budget& budget);
};

// A column's physical layout: what a value decoder needs.
struct ValueType {
  PhysicalType type = PhysicalType::BOOLEAN;
  int32_t type_length = 0;  // FIXED_LEN_BYTE_ARRAY
  size_t fixed_width() const;  // bytes per value for fixed-width types, 0 for BYTE_ARRAY/BOOLEAN
};

// Smallest bit width holding v (0 for 0).
int bit_width(uint64_t v);

// RLE/bit-packed hybrid: `count` values of `width` bits (0..32) from [p, p + n) into out.
// Returns the bytes consumed. Values are not range-checked here.
size_t decode_hybrid(const uint8_t* p, size_t n, int width, size_t count, uint32_t* out);
// The same for levels (width <= 8).
size_t decode_hybrid(const uint8_t* p, size_t n, int width, size_t count, uint8_t* out);
// The deprecated BIT_PACKED level encoding (MSB first); returns bytes consumed.
size_t decode_bit_packed_msb(const uint8_t* p, size_t n, int width, size_t count, uint8_t* out);

// Decodes `count` values of `vt` in `encoding` from [p, p + n), appending to out; byte values
// may be views into [p, p + n), which the caller keeps alive in out.storage. Dictionary encodings
// are handled by the caller (decode_dictionary_indices).
void decode_values(int32_t encoding, const ValueType& vt, const uint8_t* p, size_t n, size_t count, Values& out,
                   Budget& budget);
// RLE_DICTIONARY / PLAIN_DICTIONARY data: a bit-width byte then hybrid indices, each < dict_size.
void decode_dictionary_indices(const uint8_t* p, size_t n, size_t count, size_t dict_size, std::vector<uint32_t>& out);

}  // namespace grpo::io::parquet
