// Parquet metadata from Thrift: see parquet_meta.h. Field ids are parquet.thrift's
// (apache/parquet-format); unknown fields are skipped, so newer writers' additions are harmless.
#include "core/io/parquet_meta.h"

#include "core/common/error.h"
#include "core/io/thrift_compact.h"

namespace grpo::io::parquet {

using thrift::CompactReader;
namespace T = thrift;

const char* codec_name(int32_t codec) {
  switch (codec) {
    case UNCOMPRESSED: return "UNCOMPRESSED";
    case SNAPPY: return "SNAPPY";
    case GZIP: return "GZIP";
    case LZO: return "LZO";
    case BROTLI: return "BROTLI";
    case LZ4: return "LZ4";
    case ZSTD: return "ZSTD";
    case LZ4_RAW: return "LZ4_RAW";
    default: return "unknown";
  }
}

const char* encoding_name(int32_t encoding) {
  switch (encoding) {
    case PLAIN: return "PLAIN";
    case PLAIN_DICTIONARY: return "PLAIN_DICTIONARY";
    case RLE: return "RLE";
    case BIT_PACKED: return "BIT_PACKED";
    case DELTA_BINARY_PACKED: return "DELTA_BINARY_PACKED";
    case DELTA_LENGTH_BYTE_ARRAY: return "DELTA_LENGTH_BYTE_ARRAY";
    case DELTA_BYTE_ARRAY: return "DELTA_BYTE_ARRAY";
    case RLE_DICTIONARY: return "RLE_DICTIONARY";
    case BYTE_STREAM_SPLIT: return "BYTE_STREAM_SPLIT";
    default: return "unknown";
  }
}

const char* type_name(PhysicalType t) {
  switch (t) {
    case PhysicalType::BOOLEAN: return "BOOLEAN";
    case PhysicalType::INT32: return "INT32";
    case PhysicalType::INT64: return "INT64";
    case PhysicalType::INT96: return "INT96";
    case PhysicalType::FLOAT: return "FLOAT";
    case PhysicalType::DOUBLE: return "DOUBLE";
    case PhysicalType::BYTE_ARRAY: return "BYTE_ARRAY";
    case PhysicalType::FIXED_LEN_BYTE_ARRAY: return "FIXED_LEN_BYTE_ARRAY";
  }
  return "unknown";
}

namespace {

// LogicalType is a union of (mostly empty) structs: the field id says which.
void read_logical_type(CompactReader& r, SchemaElement& e) {
  r.read_struct([&](int16_t id, uint8_t type) {
    switch (id) {
      case 1: e.logical = LogicalType::STRING; break;
      case 2: e.logical = LogicalType::MAP; break;
      case 3: e.logical = LogicalType::LIST; break;
      case 4: e.logical = LogicalType::ENUM; break;
      case 5:  // DecimalType {1: scale, 2: precision}
        e.logical = LogicalType::DECIMAL;
        if (type == T::kStruct) {
          r.read_struct([&](int16_t fid, uint8_t ft) {
            if (fid == 1 && ft == T::kI32) e.logical_scale = r.read_i32();
            else if (fid == 2 && ft == T::kI32) e.precision = r.read_i32();
            else r.skip(ft);
          });
          return;
        }
        break;
      case 6: e.logical = LogicalType::DATE; break;
      case 7: e.logical = LogicalType::TIME; break;
      case 8: e.logical = LogicalType::TIMESTAMP; break;
      case 10:  // IntType {1: bitWidth i8, 2: isSigned bool}
        e.logical = LogicalType::INTEGER;
        if (type == T::kStruct) {
          r.read_struct([&](int16_t fid, uint8_t ft) {
            if (fid == 1 && ft == T::kByte) e.int_bit_width = r.read_byte();
            else if (fid == 2 && (ft == T::kTrue || ft == T::kFalse)) e.int_signed = r.read_bool(ft);
            else r.skip(ft);
          });
          return;
        }
        break;
      case 12: e.logical = LogicalType::JSON; break;
      case 13: e.logical = LogicalType::BSON; break;
      case 14: e.logical = LogicalType::UUID; break;
      case 15: e.logical = LogicalType::FLOAT16; break;
      default: e.logical = LogicalType::OTHER; break;
    }
    r.skip(type);
  });
}

LogicalType from_converted(int32_t ct) {
  switch (ct) {
    case CT_UTF8: return LogicalType::STRING;
    case CT_MAP: case CT_MAP_KEY_VALUE: return LogicalType::MAP;
    case CT_LIST: return LogicalType::LIST;
    case CT_ENUM: return LogicalType::ENUM;
    case CT_DECIMAL: return LogicalType::DECIMAL;
    case CT_DATE: return LogicalType::DATE;
    case CT_TIME_MILLIS: case CT_TIME_MICROS: return LogicalType::TIME;
    case CT_TIMESTAMP_MILLIS: case CT_TIMESTAMP_MICROS: return LogicalType::TIMESTAMP;
    case CT_UINT_8: case CT_UINT_16: case CT_UINT_32: case CT_UINT_64:
    case CT_INT_8: case CT_INT_16: case CT_INT_32: case CT_INT_64: return LogicalType::INTEGER;
    case CT_JSON: return LogicalType::JSON;
    case CT_BSON: return LogicalType::BSON;
    case CT_INTERVAL: return LogicalType::INTERVAL;
    default: return LogicalType::OTHER;
  }
}

SchemaElement read_schema_element(CompactReader& r) {
  SchemaElement e;
  bool has_logical = false;
  r.read_struct([&](int16_t id, uint8_t type) {
    switch (id) {
      case 1: CompactReader::expect(type, T::kI32, id); e.type = r.read_i32(); break;
      case 2: CompactReader::expect(type, T::kI32, id); e.type_length = r.read_i32(); break;
      case 3: CompactReader::expect(type, T::kI32, id); e.repetition = r.read_i32(); break;
      case 4: CompactReader::expect(type, T::kBinary, id); e.name = std::string(r.read_binary()); break;
      case 5: CompactReader::expect(type, T::kI32, id); e.num_children = r.read_i32(); break;
      case 6: CompactReader::expect(type, T::kI32, id); e.converted_type = r.read_i32(); break;
      case 7: CompactReader::expect(type, T::kI32, id); e.scale = r.read_i32(); break;
      case 8: CompactReader::expect(type, T::kI32, id); e.precision = r.read_i32(); break;
      case 10:
        CompactReader::expect(type, T::kStruct, id);
        read_logical_type(r, e);
        has_logical = true;
        break;
      default: r.skip(type);
    }
  });
  if (has_logical && e.logical == LogicalType::DECIMAL) e.scale = e.logical_scale;
  if (!has_logical && e.converted_type) {
    e.logical = from_converted(*e.converted_type);
    int32_t ct = *e.converted_type;
    if (ct >= CT_UINT_8 && ct <= CT_UINT_64) e.int_signed = false;
  }
  return e;
}

ColumnChunkMeta read_column_chunk(CompactReader& r) {
  ColumnChunkMeta c;
  r.read_struct([&](int16_t id, uint8_t type) {
    if (id == 1 && type == T::kBinary) {
      r.read_binary();
      c.external = true;
    } else if (id == 3) {
      CompactReader::expect(type, T::kStruct, id);
      c.has_meta = true;
      r.read_struct([&](int16_t fid, uint8_t ft) {
        switch (fid) {
          case 1: CompactReader::expect(ft, T::kI32, fid); c.type = r.read_i32(); break;
          case 3:
            CompactReader::expect(ft, T::kList, fid);
            r.read_list(T::kBinary, [&] { c.path.emplace_back(r.read_binary()); });
            break;
          case 4: CompactReader::expect(ft, T::kI32, fid); c.codec = r.read_i32(); break;
          case 5: CompactReader::expect(ft, T::kI64, fid); c.num_values = r.read_i64(); break;
          case 6: CompactReader::expect(ft, T::kI64, fid); c.total_uncompressed_size = r.read_i64(); break;
          case 7: CompactReader::expect(ft, T::kI64, fid); c.total_compressed_size = r.read_i64(); break;
          case 9: CompactReader::expect(ft, T::kI64, fid); c.data_page_offset = r.read_i64(); break;
          case 11: CompactReader::expect(ft, T::kI64, fid); c.dictionary_page_offset = r.read_i64(); break;
          default: r.skip(ft);
        }
      });
    } else {
      r.skip(type);
    }
  });
  return c;
}

RowGroupMeta read_row_group(CompactReader& r) {
  RowGroupMeta g;
  r.read_struct([&](int16_t id, uint8_t type) {
    switch (id) {
      case 1:
        CompactReader::expect(type, T::kList, id);
        r.read_list(T::kStruct, [&] { g.columns.push_back(read_column_chunk(r)); });
        break;
      case 2: CompactReader::expect(type, T::kI64, id); g.total_byte_size = r.read_i64(); break;
      case 3: CompactReader::expect(type, T::kI64, id); g.num_rows = r.read_i64(); break;
      default: r.skip(type);
    }
  });
  return g;
}

}  // namespace

FileMeta parse_file_meta(const uint8_t* data, size_t size) {
  CompactReader r(data, size);
  FileMeta m;
  bool has_schema = false, has_rows = false, has_groups = false;
  r.read_struct([&](int16_t id, uint8_t type) {
    switch (id) {
      case 1: CompactReader::expect(type, T::kI32, id); m.version = r.read_i32(); break;
      case 2:
        CompactReader::expect(type, T::kList, id);
        r.read_list(T::kStruct, [&] { m.schema.push_back(read_schema_element(r)); });
        has_schema = true;
        break;
      case 3: CompactReader::expect(type, T::kI64, id); m.num_rows = r.read_i64(); has_rows = true; break;
      case 4:
        CompactReader::expect(type, T::kList, id);
        r.read_list(T::kStruct, [&] { m.row_groups.push_back(read_row_group(r)); });
        has_groups = true;
        break;
      case 6: CompactReader::expect(type, T::kBinary, id); m.created_by = std::string(r.read_binary()); break;
      case 8: m.encrypted = true; r.skip(type); break;
      default: r.skip(type);
    }
  });
  if (!has_schema) throw Error("", "file metadata has no schema");
  if (!has_rows) throw Error("", "file metadata has no row count");
  if (!has_groups) throw Error("", "file metadata has no row group list");
  return m;
}

PageHeader parse_page_header(const uint8_t* data, size_t size) {
  CompactReader r(data, size);
  PageHeader h;
  bool has_type = false, has_usize = false, has_csize = false;
  r.read_struct([&](int16_t id, uint8_t type) {
    switch (id) {
      case 1: CompactReader::expect(type, T::kI32, id); h.type = r.read_i32(); has_type = true; break;
      case 2: CompactReader::expect(type, T::kI32, id); h.uncompressed_size = r.read_i32(); has_usize = true; break;
      case 3: CompactReader::expect(type, T::kI32, id); h.compressed_size = r.read_i32(); has_csize = true; break;
      case 5:
        CompactReader::expect(type, T::kStruct, id);
        h.has_data = true;
        r.read_struct([&](int16_t fid, uint8_t ft) {
          switch (fid) {
            case 1: CompactReader::expect(ft, T::kI32, fid); h.data.num_values = r.read_i32(); break;
            case 2: CompactReader::expect(ft, T::kI32, fid); h.data.encoding = r.read_i32(); break;
            case 3: CompactReader::expect(ft, T::kI32, fid); h.data.def_encoding = r.read_i32(); break;
            case 4: CompactReader::expect(ft, T::kI32, fid); h.data.rep_encoding = r.read_i32(); break;
            default: r.skip(ft);
          }
        });
        break;
      case 7:
        CompactReader::expect(type, T::kStruct, id);
        h.has_dict = true;
        r.read_struct([&](int16_t fid, uint8_t ft) {
          switch (fid) {
            case 1: CompactReader::expect(ft, T::kI32, fid); h.dict_num_values = r.read_i32(); break;
            case 2: CompactReader::expect(ft, T::kI32, fid); h.dict_encoding = r.read_i32(); break;
            default: r.skip(ft);
          }
        });
        break;
      case 8:
        CompactReader::expect(type, T::kStruct, id);
        h.has_data_v2 = true;
        r.read_struct([&](int16_t fid, uint8_t ft) {
          switch (fid) {
            case 1: CompactReader::expect(ft, T::kI32, fid); h.data.num_values = r.read_i32(); break;
            case 2: CompactReader::expect(ft, T::kI32, fid); h.data.num_nulls = r.read_i32(); break;
            case 3: CompactReader::expect(ft, T::kI32, fid); h.data.num_rows = r.read_i32(); break;
            case 4: CompactReader::expect(ft, T::kI32, fid); h.data.encoding = r.read_i32(); break;
            case 5: CompactReader::expect(ft, T::kI32, fid); h.data.def_bytes = r.read_i32(); break;
            case 6: CompactReader::expect(ft, T::kI32, fid); h.data.rep_bytes = r.read_i32(); break;
            case 7: CompactReader::expect(ft, T::kTrue, fid); h.data.is_compressed = r.read_bool(ft); break;
            default: r.skip(ft);
          }
        });
        break;
      default: r.skip(type);
    }
  });
  if (!has_type || !has_usize || !has_csize) throw Error("", "page header lacks its type or sizes");
  h.header_size = r.position();
  return h;
}

}  // namespace grpo::io::parquet
