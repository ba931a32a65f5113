// Parquet metadata as read from the Thrift structures of parquet.thrift (apache/parquet-format):
// the footer's FileMetaData (schema elements, row groups, column chunks) and page headers. Only
// the fields the reader uses are kept; the rest (statistics, indexes, bloom filters, encryption)
// are skipped. Internal to core/io's Parquet reader.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/common/error.h"
#include "core/io/parquet.h"

namespace grpo::io::parquet {

// Enum values as numbered in parquet.thrift.
enum Codec : int32_t { UNCOMPRESSED = 0, SNAPPY = 1, GZIP = 2, LZO = 3, BROTLI = 4, LZ4 = 5, ZSTD = 6, LZ4_RAW = 7 };
enum Encoding : int32_t {
  PLAIN = 0, PLAIN_DICTIONARY = 2, RLE = 3, BIT_PACKED = 4, DELTA_BINARY_PACKED = 5, DELTA_LENGTH_BYTE_ARRAY = 6,
  DELTA_BYTE_ARRAY = 7, RLE_DICTIONARY = 8, BYTE_STREAM_SPLIT = 9,
};
enum PageType : int32_t { DATA_PAGE = 0, INDEX_PAGE = 1, DICTIONARY_PAGE = 2, DATA_PAGE_V2 = 3 };
enum ConvertedType : int32_t {
  CT_UTF8 = 0, CT_MAP = 1, CT_MAP_KEY_VALUE = 2, CT_LIST = 3, CT_ENUM = 4, CT_DECIMAL = 5, CT_DATE = 6,
  CT_TIME_MILLIS = 7, CT_TIME_MICROS = 8, CT_TIMESTAMP_MILLIS = 9, CT_TIMESTAMP_MICROS = 10, CT_UINT_8 = 11,
  CT_UINT_16 = 12, CT_UINT_32 = 13, CT_UINT_64 = 14, CT_INT_8 = 15, CT_INT_16 = 16, CT_INT_32 = 17, CT_INT_64 = 18,
  CT_JSON = 19, CT_BSON = 20, CT_INTERVAL = 21,
};

// The reader's parts report a malformed file with fail() (grpo::Error without a file name: the
// reader's entry point names the file), and counts with n_str().
[[noreturn]] inline void fail(const std::string& message) { throw Error("", message); }
inline std::string n_str(uint64_t v) { return std::to_string(v); }

const char* codec_name(int32_t codec);
const char* encoding_name(int32_t encoding);
const char* type_name(PhysicalType t);

struct SchemaElement {
  std::optional<int32_t> type;  // PhysicalType; absent for groups
  int32_t type_length = 0;
  std::optional<int32_t> repetition;  // Repetition; absent only for the root
  std::string name;
  int32_t num_children = 0;
  std::optional<int32_t> converted_type;
  int32_t scale = 0, precision = 0;
  LogicalType logical = LogicalType::NONE;  // from logicalType, else derived from converted_type
  int32_t logical_scale = 0;                // DECIMAL's scale from logicalType
  int8_t int_bit_width = 0;                 // INTEGER's bit width (0: none)
  bool int_signed = true;
};

struct ColumnChunkMeta {
  bool has_meta = false;
  bool external = false;  // file_path set: the chunk lives in another file
  int32_t type = 0;
  std::vector<std::string> path;
  int32_t codec = 0;
  int64_t num_values = 0;
  int64_t total_uncompressed_size = 0, total_compressed_size = 0;
  int64_t data_page_offset = 0;
  std::optional<int64_t> dictionary_page_offset;
};

struct RowGroupMeta {
  std::vector<ColumnChunkMeta> columns;
  int64_t total_byte_size = 0;
  int64_t num_rows = 0;
};

struct FileMeta {
  int32_t version = 0;
  std::vector<SchemaElement> schema;
  int64_t num_rows = 0;
  std::vector<RowGroupMeta> row_groups;
  std::string created_by;
  bool encrypted = false;  // encryption_algorithm present (plaintext-footer encryption)
};

struct DataPageHeader {  // v1 and v2 share this; v2-only fields are marked
  int32_t num_values = 0;
  int32_t encoding = 0;
  int32_t def_encoding = RLE, rep_encoding = RLE;  // v1
  int32_t num_nulls = 0, num_rows = 0;             // v2
  int32_t def_bytes = 0, rep_bytes = 0;            // v2: level byte lengths (never compressed)
  bool is_compressed = true;                       // v2
};

struct PageHeader {
  int32_t type = -1;
  int32_t uncompressed_size = 0;
  int32_t compressed_size = 0;
  bool has_data = false, has_data_v2 = false, has_dict = false;
  DataPageHeader data;
  int32_t dict_num_values = 0;
  int32_t dict_encoding = 0;
  size_t header_size = 0;  // bytes the header itself took
};

// Parses FileMetaData from the footer bytes. Throws grpo::Error without file context.
FileMeta parse_file_meta(const uint8_t* data, size_t size);
// Parses one page header at the start of [data, data + size).
PageHeader parse_page_header(const uint8_t* data, size_t size);

}  // namespace grpo::io::parquet
