// One column chunk of a Parquet row group, decoded: its pages (dictionary, data v1 and v2)
// decompressed and turned into repetition levels, definition levels and non-null values.
// Internal to the Parquet reader; errors carry no file context (the caller adds file, row group
// and column).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/io/parquet.h"
#include "core/io/parquet_encoding.h"

namespace grpo::io::parquet {

// Each level entry is charged this much to the row group budget: its levels and its share of
// the JSON rows it becomes.
constexpr uint64_t kEntryCost = 32;

struct ColumnData {
  std::vector<uint8_t> def, rep;  // one per entry; empty when the max level is 0
  size_t num_entries = 0;
  Values values;                  // the non-null values, in order
};

struct ChunkInfo {
  ValueType vt;
  int max_def = 0, max_rep = 0;
  int32_t codec = 0;
  int64_t num_values = 0;  // level entries, nulls included (ColumnMetaData.num_values)
};

// Decodes the column chunk held in data[0, size) (kept with the values when they are views).
// Page buffers come from `pool`.
ColumnData decode_column_chunk(Buffer data, size_t size, const ChunkInfo& info, const ParquetLimits& limits,
                               Budget& budget, BufferPool& pool);

}  // namespace grpo::io::parquet
