// Column chunk decoding: see parquet_column.h. Pages follow one another from the chunk's start
// (a dictionary page first if any); each is a Thrift page header then its (compressed) body.
// Data page v1: body = compressed(rep levels, def levels, values), each level run RLE with a
// 4-byte length (or the old BIT_PACKED). Data page v2: rep and def levels uncompressed (RLE, no
// length prefix; their byte lengths in the header), then the values, compressed if is_compressed.
#include "core/io/parquet_column.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/common/error.h"
#include "core/io/parquet_codec.h"
#include "core/io/parquet_meta.h"

namespace grpo::io::parquet {
namespace {

// A reusable scratch buffer (no zero-filling), from the pool.
struct Scratch {
  BufferPool* pool = nullptr;
  Buffer data;
  size_t capacity = 0;
  uint8_t* get(size_t n) {
    if (n > capacity) {
      data = pool->get(n);
      capacity = n;
    }
    return data.get();
  }
};

// v1 levels: RLE (4-byte length then hybrid data) or BIT_PACKED. Returns the bytes consumed.
size_t read_v1_levels(int32_t encoding, const uint8_t* p, size_t n, int max_level, size_t count, uint8_t* out,
                      const char* what) {
  int width = bit_width(static_cast<uint64_t>(max_level));
  if (encoding == RLE) {
    if (n < 4) fail(std::string(what) + " levels: missing their 4-byte length");
    uint32_t len;
    std::memcpy(&len, p, 4);
    if (len > n - 4) fail(std::string(what) + " levels: length " + n_str(len) + " exceeds the page's " + n_str(n - 4) + " bytes");
    decode_hybrid(p + 4, len, width, count, out);
    return 4 + static_cast<size_t>(len);
  }
  if (encoding == BIT_PACKED) return decode_bit_packed_msb(p, n, width, count, out);
  fail(std::string(what) + " levels: unsupported encoding " + encoding_name(encoding) + " (" + std::to_string(encoding) + ")");
}

void check_levels(const uint8_t* levels, size_t count, int max_level, const char* what) {
  for (size_t i = 0; i < count; ++i)
    if (levels[i] > max_level)
      fail(std::string(what) + " level " + std::to_string(levels[i]) + " (entry " + n_str(i) + ") exceeds the column's maximum " +
           std::to_string(max_level));
}

class ChunkDecoder {
public:
  ChunkDecoder(const ChunkInfo& info, const ParquetLimits& limits, Budget& budget, BufferPool& pool)
      : info_(info), limits_(limits), budget_(budget) {
    scratch_.pool = &pool;
    out_.values.pool = &pool;
    dict_.pool = &pool;
  }

  ColumnData run(Buffer chunk, size_t size) {
    const uint8_t* data = chunk.get();
    // Byte values are views into the pages: keep the chunk (uncompressed pages) with them.
    if (byte_values()) out_.values.storage.push_back(std::move(chunk));
    if (info_.num_values < 0) fail("column chunk metadata: negative value count " + std::to_string(info_.num_values));
    if (!codec_supported(info_.codec)) decompress(info_.codec, nullptr, 0, nullptr, 1);  // throws, naming the codec
    size_t pos = 0;
    int page = 0;
    while (pos < size && seen_ < static_cast<uint64_t>(info_.num_values)) {
      try {
        pos = read_page(data, size, pos);
      } catch (const Error& e) {
        throw e.within("page " + std::to_string(page) + " (byte " + n_str(pos) + " of the column chunk)");
      }
      ++page;
    }
    if (seen_ != static_cast<uint64_t>(info_.num_values))
      fail("column chunk ends after " + n_str(seen_) + " of the " + std::to_string(info_.num_values) +
           " values its metadata counts");
    out_.num_entries = static_cast<size_t>(seen_);
    for (auto& b : dict_.storage) out_.values.storage.push_back(std::move(b));
    return std::move(out_);
  }

private:
  bool byte_values() const {
    return info_.vt.type == PhysicalType::BYTE_ARRAY || info_.vt.type == PhysicalType::FIXED_LEN_BYTE_ARRAY ||
           info_.vt.type == PhysicalType::INT96;
  }

  size_t read_page(const uint8_t* data, size_t size, size_t pos) {
    PageHeader h;
    try {
      h = parse_page_header(data + pos, size - pos);
    } catch (const Error& e) {
      throw e.within("page header");
    }
    pos += h.header_size;
    if (h.compressed_size < 0 || static_cast<uint64_t>(h.compressed_size) > size - pos)
      fail("page header: compressed size " + std::to_string(h.compressed_size) + " exceeds the " + n_str(size - pos) +
           " bytes left in the column chunk");
    if (h.uncompressed_size < 0 || static_cast<uint64_t>(h.uncompressed_size) > limits_.max_page_bytes)
      fail("page header: uncompressed size " + std::to_string(h.uncompressed_size) + " is negative or exceeds the page limit of " +
           n_str(limits_.max_page_bytes) + " bytes");
    const uint8_t* body = data + pos;
    const size_t body_size = static_cast<size_t>(h.compressed_size);
    if (h.type == DICTIONARY_PAGE) {
      if (!h.has_dict) fail("dictionary page without its header");
      read_dictionary(h, body, body_size);
    } else if (h.type == DATA_PAGE) {
      if (!h.has_data) fail("data page without its header");
      read_data_v1(h, body, body_size);
    } else if (h.type == DATA_PAGE_V2) {
      if (!h.has_data_v2) fail("data page v2 without its header");
      read_data_v2(h, body, body_size);
    }  // index pages and unknown page types are skipped
    return pos + body_size;
  }

  // Decompresses a whole page body (or returns it as is when stored uncompressed). Pages of byte
  // values get a buffer kept with `keep` (the values are views into it); others reuse scratch.
  const uint8_t* page_bytes(const uint8_t* body, size_t n, size_t usize, bool compressed, Values& keep) {
    if (!compressed || info_.codec == UNCOMPRESSED) {
      if (n != usize) fail("uncompressed page holds " + n_str(n) + " bytes, its header says " + n_str(usize));
      return body;
    }
    // Every decompressed byte is charged (kept or not), which also bounds the decompression work
    // one row group can cause.
    uint8_t* dst = byte_values() ? keep.own(usize, budget_) : (budget_.take(usize), scratch_.get(usize));
    decompress(info_.codec, body, n, dst, usize);
    return dst;
  }

  void read_dictionary(const PageHeader& h, const uint8_t* body, size_t n) {
    if (has_dict_) fail("a second dictionary page");
    if (seen_ > 0) fail("a dictionary page after data pages");
    if (h.dict_encoding != PLAIN && h.dict_encoding != PLAIN_DICTIONARY)
      fail(std::string("dictionary page encoding ") + encoding_name(h.dict_encoding) + " (expected PLAIN)");
    if (h.dict_num_values < 0) fail("dictionary page: negative value count");
    const uint8_t* p = page_bytes(body, n, static_cast<size_t>(h.uncompressed_size), true, dict_);
    decode_values(PLAIN, info_.vt, p, static_cast<size_t>(h.uncompressed_size), static_cast<size_t>(h.dict_num_values),
                  dict_, budget_);
    has_dict_ = true;
  }

  // Reserves `count` more level entries (charged to the budget) and returns where they go.
  void begin_entries(int64_t count) {
    if (count < 0) fail("data page: negative value count " + std::to_string(count));
    uint64_t c = static_cast<uint64_t>(count);
    if (c > static_cast<uint64_t>(info_.num_values) - seen_)
      fail("data page: " + n_str(c) + " values overrun the " + std::to_string(info_.num_values) + " values of the column chunk");
    budget_.take(c * kEntryCost);
    if (info_.max_rep > 0) out_.rep.resize(seen_ + c);
    if (info_.max_def > 0) out_.def.resize(seen_ + c);
  }

  size_t count_non_null(size_t count) const {
    if (info_.max_def == 0) return count;
    const uint8_t* d = out_.def.data() + seen_;
    return static_cast<size_t>(std::count(d, d + count, static_cast<uint8_t>(info_.max_def)));
  }

  void read_values(int32_t encoding, const uint8_t* p, size_t n, size_t non_null) {
    if (encoding == PLAIN_DICTIONARY || encoding == RLE_DICTIONARY) {
      if (!has_dict_) fail("dictionary-encoded data page without a dictionary page");
      decode_dictionary_indices(p, n, non_null, dict_.size(info_.vt.type), indices_);
      out_.values.append_dictionary(dict_, info_.vt.type, indices_.data(), non_null, budget_);
    } else {
      decode_values(encoding, info_.vt, p, n, non_null, out_.values, budget_);
    }
  }

  void read_data_v1(const PageHeader& h, const uint8_t* body, size_t n) {
    const DataPageHeader& d = h.data;
    begin_entries(d.num_values);
    if (d.num_values == 0) return;  // nothing to decode
    const size_t count = static_cast<size_t>(d.num_values);
    const size_t usize = static_cast<size_t>(h.uncompressed_size);
    const uint8_t* p = page_bytes(body, n, usize, true, out_.values);
    size_t pos = 0;
    if (info_.max_rep > 0) {
      pos += read_v1_levels(d.rep_encoding, p, usize, info_.max_rep, count, out_.rep.data() + seen_, "repetition");
      check_levels(out_.rep.data() + seen_, count, info_.max_rep, "repetition");
    }
    if (info_.max_def > 0) {
      pos += read_v1_levels(d.def_encoding, p + pos, usize - pos, info_.max_def, count, out_.def.data() + seen_, "definition");
      check_levels(out_.def.data() + seen_, count, info_.max_def, "definition");
    }
    read_values(d.encoding, p + pos, usize - pos, count_non_null(count));
    seen_ += count;
  }

  void read_data_v2(const PageHeader& h, const uint8_t* body, size_t n) {
    const DataPageHeader& d = h.data;
    if (d.rep_bytes < 0 || d.def_bytes < 0) fail("data page v2: negative level byte length");
    uint64_t levels = static_cast<uint64_t>(d.rep_bytes) + static_cast<uint64_t>(d.def_bytes);
    if (levels > n || levels > static_cast<uint64_t>(h.uncompressed_size))
      fail("data page v2: level byte lengths " + std::to_string(d.rep_bytes) + " + " + std::to_string(d.def_bytes) +
           " exceed the page's " + n_str(n) + " bytes");
    begin_entries(d.num_values);
    if (d.num_values == 0) return;
    const size_t count = static_cast<size_t>(d.num_values);
    if (info_.max_rep > 0) {
      decode_hybrid(body, static_cast<size_t>(d.rep_bytes), bit_width(static_cast<uint64_t>(info_.max_rep)), count,
                    out_.rep.data() + seen_);
      check_levels(out_.rep.data() + seen_, count, info_.max_rep, "repetition");
    }
    if (info_.max_def > 0) {
      decode_hybrid(body + d.rep_bytes, static_cast<size_t>(d.def_bytes), bit_width(static_cast<uint64_t>(info_.max_def)), count,
                    out_.def.data() + seen_);
      check_levels(out_.def.data() + seen_, count, info_.max_def, "definition");
    }
    const size_t skip = static_cast<size_t>(levels);
    const size_t usize = static_cast<size_t>(h.uncompressed_size) - skip;
    const uint8_t* p = page_bytes(body + skip, n - skip, usize, d.is_compressed, out_.values);
    read_values(d.encoding, p, usize, count_non_null(count));
    seen_ += count;
  }

  const ChunkInfo& info_;
  const ParquetLimits& limits_;
  Budget& budget_;
  ColumnData out_;
  uint64_t seen_ = 0;  // level entries decoded so far
  bool has_dict_ = false;
  Values dict_;
  std::vector<uint32_t> indices_;
  Scratch scratch_;
};

}  // namespace

ColumnData decode_column_chunk(Buffer data, size_t size, const ChunkInfo& info, const ParquetLimits& limits,
                               Budget& budget, BufferPool& pool) {
  return ChunkDecoder(info, limits, budget, pool).run(std::move(data), size);
}

}  // namespace grpo::io::parquet
