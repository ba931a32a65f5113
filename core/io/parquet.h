// Parquet reader: rows of a Parquet file (what Hugging Face datasets store on the Hub) as JSON
// objects, one row group at a time. Our own implementation (Debian 12 has no Arrow C++): the
// footer and page headers (Thrift compact protocol), data pages v1 and v2, dictionary pages,
// encodings PLAIN, RLE/bit-packed hybrid, PLAIN_DICTIONARY/RLE_DICTIONARY, DELTA_BINARY_PACKED,
// DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY and BYTE_STREAM_SPLIT, codecs UNCOMPRESSED, SNAPPY,
// GZIP and ZSTD, and nested columns (lists, structs, maps) assembled from repetition and
// definition levels. Files are untrusted input: every size is checked, memory is bounded by one
// row group (ParquetLimits), and every failure is a grpo::Error naming the file and, inside
// data, the row group and column path.
//
// Values as JSON: null for nulls; BOOLEAN -> bool; INT32/INT64 -> integer (unsigned when
// annotated so; DECIMAL -> number = unscaled / 10^scale); FLOAT/DOUBLE -> number (NaN and
// infinities print as null); INT96 -> integer nanoseconds since the Unix epoch; BYTE_ARRAY and
// FIXED_LEN_BYTE_ARRAY annotated STRING/ENUM/JSON -> string (invalid UTF-8 replaced by U+FFFD,
// as a WHATWG TextDecoder does); UUID -> "xxxxxxxx-xxxx-..."; FLOAT16 -> number; other
// (unannotated) binary -> string when it is valid UTF-8, otherwise its standard base64.
// LIST -> array; MAP -> object (keys as strings); any other group -> object; a repeated field
// outside a LIST -> array. Row objects keep the file's top-level column order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace grpo::io {

enum class PhysicalType { BOOLEAN = 0, INT32 = 1, INT64 = 2, INT96 = 3, FLOAT = 4, DOUBLE = 5, BYTE_ARRAY = 6, FIXED_LEN_BYTE_ARRAY = 7 };
enum class Repetition { REQUIRED = 0, OPTIONAL = 1, REPEATED = 2 };
// The logical type of a schema node, from its LogicalType or, in older files, its ConvertedType.
enum class LogicalType { NONE, STRING, ENUM, JSON, BSON, UUID, FLOAT16, DECIMAL, DATE, TIME, TIMESTAMP, INTEGER, LIST, MAP, INTERVAL, OTHER };

// One schema element; ParquetFile::schema() lists them in file order (depth first), [0] = root.
struct ParquetNode {
  std::string name;
  std::string path;  // dotted from the top-level field: "messages.list.element.role"; "" for the root
  Repetition repetition = Repetition::REQUIRED;
  bool leaf = false;
  PhysicalType type = PhysicalType::BOOLEAN;  // leaves only
  int32_t type_length = 0;                    // FIXED_LEN_BYTE_ARRAY
  LogicalType logical = LogicalType::NONE;
  int32_t scale = 0, precision = 0;           // DECIMAL
  bool is_unsigned = false;                   // UINT_* / INTEGER(signed=false)
  int parent = -1;
  std::vector<int> children;
  int max_def = 0, max_rep = 0;  // definition / repetition level of this node
  int column = -1;               // leaves: index in ParquetFile::columns()
};

// A leaf column (what the file stores), in file order.
struct ParquetColumn {
  std::string path;
  int node = 0;  // index in schema()
  PhysicalType type = PhysicalType::BOOLEAN;
  LogicalType logical = LogicalType::NONE;
  int max_def = 0, max_rep = 0;
};

struct ParquetRowGroup {
  int64_t num_rows = 0;
  int64_t total_byte_size = 0;  // uncompressed size of its column data, as the writer reported
  int64_t compressed_size = 0;  // sum of its column chunks' compressed sizes
};

// Bounds on what one file may make us allocate. Exceeding one is a grpo::Error with a hint.
struct ParquetLimits {
  uint64_t max_footer_bytes = 64ull << 20;
  uint64_t max_page_bytes = 256ull << 20;      // one page, uncompressed
  // What one row group may cost: its compressed column chunks, every decompressed page, 8 bytes
  // per number, a string's length + 16 (its JSON copy), and 32 bytes per level entry (its share
  // of the JSON rows). Bounds both memory and decompression work per row group.
  uint64_t max_row_group_bytes = 1ull << 30;
};

struct ParquetOptions {
  std::vector<std::string> columns;  // top-level fields to read (file order kept); empty = all
  ParquetLimits limits;
};

using ParquetRow = nlohmann::ordered_json;

class ParquetFile {
public:
  // Opens `path` and reads its footer; the column data is read later, one row group at a time.
  static ParquetFile open(const std::string& path, ParquetOptions options = {});
  // The same over an in-memory file image (tests, fuzzing); `name` is used in error messages.
  static ParquetFile from_bytes(std::string bytes, const std::string& name, ParquetOptions options = {});

  ParquetFile(ParquetFile&&) noexcept;
  ParquetFile& operator=(ParquetFile&&) noexcept;
  ~ParquetFile();

  const std::string& path() const;
  const std::string& created_by() const;
  int64_t num_rows() const;
  const std::vector<ParquetNode>& schema() const;
  const std::vector<ParquetColumn>& columns() const;
  std::vector<std::string> field_names() const;     // top-level fields, file order
  std::vector<std::string> selected_fields() const;  // those the reads return
  // A readable type of a top-level field: "string", "int64", "list<struct<role: string, content: string>>".
  std::string field_type(const std::string& field) const;
  const std::vector<ParquetRowGroup>& row_groups() const;

  // The rows of row group `index` (0-based).
  std::vector<ParquetRow> read_row_group(size_t index) const;
  // Rows of row group `index` one by one, decoded one row group at a time; stops early when fn
  // returns false. Returns false if stopped.
  bool for_each_row_in_group(size_t index, const std::function<bool(ParquetRow&&)>& fn) const;
  // Every row group in order: fn(index, rows); stops early when fn returns false.
  void for_each_row_group(const std::function<bool(size_t, std::vector<ParquetRow>&)>& fn) const;
  // Every row in order; stops early when fn returns false. Memory: one row group.
  void for_each_row(const std::function<bool(ParquetRow&&)>& fn) const;

private:
  ParquetFile();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Up to `limit` rows of `path`, in order (reads only the row groups it needs).
std::vector<ParquetRow> read_parquet_rows(const std::string& path, size_t limit = SIZE_MAX, ParquetOptions options = {});
// Every row of `path` in order, one row group in memory at a time; fn returns false to stop.
void for_each_parquet_row(const std::string& path, const std::function<bool(ParquetRow&&)>& fn,
                          ParquetOptions options = {});

}  // namespace grpo::io
