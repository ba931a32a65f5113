// Parquet reader: see parquet.h. Opening reads and checks the footer (the last 8 bytes: footer
// length + "PAR1"; FileMetaData before them) and builds the schema tree; reading a row group
// reads only its selected column chunks (pread), decodes their pages (parquet_column.cpp) and
// assembles the rows (parquet_assemble.cpp), within the row group's memory budget.
#include "core/io/parquet.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common/error.h"
#include "core/common/strings.h"
#include "core/io/parquet_assemble.h"
#include "core/io/parquet_column.h"
#include "core/io/parquet_meta.h"

namespace grpo::io {

using namespace parquet;

// Named, not anonymous: ParquetFile::Impl (external linkage) holds these types, and GCC's
// -Wsubobject-linkage rightly objects to anonymous ones there once a unity build includes this file.
namespace parquet_file_impl {

constexpr int kMaxSchemaDepth = 64;
constexpr int32_t kMaxFixedLength = 1 << 20;

// Where a column chunk's pages start: its dictionary page when it has one, else its first data page.
int64_t chunk_start(const ColumnChunkMeta& m) {
  int64_t start = m.data_page_offset;
  if (m.dictionary_page_offset && *m.dictionary_page_offset > 0 && *m.dictionary_page_offset < start)
    start = *m.dictionary_page_offset;
  return start;
}

// Where the bytes come from: a file read with pread, or an in-memory image.
class Source {
public:
  static std::unique_ptr<Source> file(const std::string& path) {
    auto s = std::unique_ptr<Source>(new Source);
    s->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (s->fd_ < 0) throw Error(path, std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(s->fd_, &st) != 0) throw Error(path, std::string("cannot stat: ") + std::strerror(errno));
    if (S_ISDIR(st.st_mode)) throw Error(path, "is a directory, not a Parquet file");
    s->size_ = static_cast<uint64_t>(st.st_size);
    s->path_ = path;
    return s;
  }
  static std::unique_ptr<Source> memory(std::string bytes) {
    auto s = std::unique_ptr<Source>(new Source);
    s->size_ = bytes.size();
    s->bytes_ = std::move(bytes);
    return s;
  }
  ~Source() {
    if (fd_ >= 0) ::close(fd_);
  }
  uint64_t size() const { return size_; }
  // Reads [offset, offset + n), which the caller has checked lies inside the file.
  void read(uint64_t offset, size_t n, uint8_t* out) const {
    if (n == 0) return;
    if (fd_ < 0) {
      std::memcpy(out, bytes_.data() + offset, n);
      return;
    }
    size_t done = 0;
    while (done < n) {
      ssize_t got = ::pread(fd_, out + done, n - done, static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0)
        throw Error(path_, got == 0 ? "file ended while reading (was it truncated while open?)"
                                    : std::string("read failed: ") + std::strerror(errno));
      done += static_cast<size_t>(got);
    }
  }

private:
  Source() = default;
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string bytes_, path_;
};

}  // namespace parquet_file_impl
using namespace parquet_file_impl;

struct ParquetFile::Impl {
  std::string path;
  ParquetOptions options;
  std::unique_ptr<Source> source;
  FileMeta meta;
  uint64_t data_end = 0;  // where the footer starts: column data lies in [4, data_end)
  std::vector<ParquetNode> schema;
  std::vector<NodePlan> plan;
  std::vector<ParquetColumn> columns;
  std::vector<std::vector<std::string>> column_parts;  // each leaf's path, element by element
  std::vector<ParquetRowGroup> row_groups;
  std::vector<int> fields;  // selected top-level nodes, file order
  // Chunk and page buffers reused from one row group to the next; every buffer is back in the
  // pool when a read returns (row group data never outlives the read).
  std::unique_ptr<BufferPool> pool = std::make_unique<BufferPool>();

  [[noreturn]] void fail(const std::string& message, const std::string& hint = {}) const { throw Error(path, message, hint); }

  void load(std::unique_ptr<Source> src, const std::string& name, ParquetOptions opts);
  void read_footer();
  int build_node(size_t& next, int parent, int depth);
  void build_schema();
  void check_row_groups();
  void select(const std::vector<std::string>& names);
  ColumnData read_chunk(size_t group, int column, Budget& budget) const;
  std::vector<ColumnData> read_columns(size_t group, Budget& budget) const;
  template <typename Fn>
  void assemble(size_t group, Fn&& fn) const;
};

void ParquetFile::Impl::read_footer() {
  const uint64_t size = source->size();
  if (size < 12) fail("not a Parquet file: " + n_str(size) + " bytes is too short (a Parquet file starts and ends with PAR1)");
  uint8_t tail[8], head[4];
  source->read(size - 8, 8, tail);
  source->read(0, 4, head);
  if (std::memcmp(tail + 4, "PARE", 4) == 0) fail("encrypted Parquet files are not supported");
  if (std::memcmp(tail + 4, "PAR1", 4) != 0) fail("not a Parquet file: it does not end with the magic bytes PAR1");
  if (std::memcmp(head, "PAR1", 4) != 0) fail("not a Parquet file: it does not start with the magic bytes PAR1");
  uint32_t footer_len;
  std::memcpy(&footer_len, tail, 4);
  if (footer_len > size - 12)
    fail("footer length " + n_str(footer_len) + " exceeds the file (" + n_str(size) + " bytes)", "the file is truncated or corrupt");
  if (footer_len > options.limits.max_footer_bytes)
    fail("footer of " + n_str(footer_len) + " bytes exceeds the limit of " + n_str(options.limits.max_footer_bytes) + " bytes");
  data_end = size - 8 - footer_len;
  std::vector<uint8_t> footer(footer_len);
  source->read(data_end, footer_len, footer.data());
  try {
    meta = parse_file_meta(footer.data(), footer.size());
  } catch (const Error& e) {
    throw e.within(path + ": footer");
  }
  if (meta.encrypted) fail("encrypted Parquet files are not supported");
}

int ParquetFile::Impl::build_node(size_t& next, int parent, int depth) {
  const auto& elements = meta.schema;
  if (next >= elements.size()) fail("schema: its elements end before the groups' children do");
  if (depth > kMaxSchemaDepth) fail("schema: nested deeper than " + std::to_string(kMaxSchemaDepth) + " levels");
  const SchemaElement& e = elements[next++];
  const int index = static_cast<int>(schema.size());
  ParquetNode n;
  n.name = e.name;
  n.parent = parent;
  if (parent >= 0) {
    const ParquetNode& p = schema[static_cast<size_t>(parent)];
    n.path = p.path.empty() ? e.name : p.path + "." + e.name;
    if (!e.repetition) fail("schema: element \"" + n.path + "\" has no repetition type");
    if (*e.repetition < 0 || *e.repetition > 2)
      fail("schema: element \"" + n.path + "\" has repetition type " + std::to_string(*e.repetition));
    n.repetition = static_cast<Repetition>(*e.repetition);
    n.max_def = p.max_def + (n.repetition != Repetition::REQUIRED);
    n.max_rep = p.max_rep + (n.repetition == Repetition::REPEATED);
  }
  if (e.num_children < 0) fail("schema: element \"" + n.path + "\" has " + std::to_string(e.num_children) + " children");
  if (static_cast<uint64_t>(e.num_children) > elements.size() - next)
    fail("schema: element \"" + n.path + "\" counts " + std::to_string(e.num_children) + " children, the schema has " +
         n_str(elements.size() - next) + " elements left");
  n.logical = e.logical;
  n.scale = e.scale;
  n.precision = e.precision;
  n.is_unsigned = !e.int_signed;
  if (e.num_children == 0 && parent >= 0) {
    if (!e.type) fail("schema: group \"" + n.path + "\" has no children");
    if (*e.type < 0 || *e.type > 7) fail("schema: column \"" + n.path + "\" has unknown physical type " + std::to_string(*e.type));
    n.leaf = true;
    n.type = static_cast<PhysicalType>(*e.type);
    n.type_length = e.type_length;
    if (n.type == PhysicalType::FIXED_LEN_BYTE_ARRAY && (e.type_length <= 0 || e.type_length > kMaxFixedLength))
      fail("schema: column \"" + n.path + "\" has fixed length " + std::to_string(e.type_length) + " (expected 1.." +
           std::to_string(kMaxFixedLength) + ")");
    n.column = static_cast<int>(columns.size());
    columns.push_back({n.path, index, n.type, n.logical, n.max_def, n.max_rep});
    std::vector<std::string> parts;
    for (int a = parent; a > 0; a = schema[static_cast<size_t>(a)].parent) parts.insert(parts.begin(), schema[static_cast<size_t>(a)].name);
    parts.push_back(n.name);
    column_parts.push_back(std::move(parts));
  }
  schema.push_back(std::move(n));
  std::set<std::string> names;
  for (int32_t k = 0; k < e.num_children; ++k) {
    int child = build_node(next, index, depth + 1);
    const std::string& name = schema[static_cast<size_t>(child)].name;
    if (!names.insert(name).second)
      fail("schema: " + (index == 0 ? std::string("the file") : "group \"" + schema[static_cast<size_t>(index)].path + "\"") +
           " has two fields named \"" + name + "\"");
    schema[static_cast<size_t>(index)].children.push_back(child);
  }
  return index;
}

void ParquetFile::Impl::build_schema() {
  if (meta.schema.empty()) fail("schema: no elements");
  size_t next = 0;
  build_node(next, -1, 0);
  if (next != meta.schema.size())
    fail("schema: " + n_str(meta.schema.size() - next) + " elements lie outside the root's tree");
  plan = plan_nodes(schema);
}

void ParquetFile::Impl::check_row_groups() {
  uint64_t total = 0;
  for (size_t g = 0; g < meta.row_groups.size(); ++g) {
    const RowGroupMeta& rg = meta.row_groups[g];
    const std::string where = "row group " + n_str(g);
    if (rg.columns.size() != columns.size())
      fail(where + ": " + n_str(rg.columns.size()) + " column chunks, the schema has " + n_str(columns.size()) + " columns");
    if (rg.num_rows < 0) fail(where + ": negative row count " + std::to_string(rg.num_rows));
    ParquetRowGroup info{rg.num_rows, rg.total_byte_size, 0};
    for (size_t c = 0; c < columns.size(); ++c) {
      const ColumnChunkMeta& cc = rg.columns[c];
      const std::string col = where + ", column \"" + columns[c].path + "\"";
      if (!cc.has_meta) fail(col + ": no column metadata (encrypted columns are not supported)");
      if (cc.path != column_parts[c]) fail(col + ": the chunk's path is \"" + join(cc.path, ".") + "\"");
      if (cc.type != static_cast<int32_t>(columns[c].type))
        fail(col + ": the chunk's physical type " + std::to_string(cc.type) + " differs from the schema's " + type_name(columns[c].type));
      if (cc.total_compressed_size > 0) info.compressed_size += cc.total_compressed_size;
    }
    total += static_cast<uint64_t>(rg.num_rows);
    if (total > static_cast<uint64_t>(INT64_MAX)) fail("row counts overflow");
    row_groups.push_back(info);
  }
  if (meta.num_rows < 0 || total != static_cast<uint64_t>(meta.num_rows))
    fail("the file counts " + std::to_string(meta.num_rows) + " rows, its row groups " + n_str(total));
  // Column chunks never share bytes in a file a writer made; a crafted file could otherwise make
  // every row group decompress the same small chunk again.
  struct Range { int64_t begin, end; size_t group, column; };
  std::vector<Range> ranges;
  for (size_t g = 0; g < meta.row_groups.size(); ++g)
    for (size_t c = 0; c < columns.size(); ++c) {
      const ColumnChunkMeta& m = meta.row_groups[g].columns[c];
      int64_t b = chunk_start(m), len = m.total_compressed_size;
      if (m.external || len <= 0 || b < 0 || len > INT64_MAX - b) continue;  // reported when read
      ranges.push_back({b, b + len, g, c});
    }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].begin < ranges[i - 1].end)
      fail("row group " + n_str(ranges[i].group) + ", column \"" + columns[ranges[i].column].path + "\": its bytes overlap those of row group " +
           n_str(ranges[i - 1].group) + ", column \"" + columns[ranges[i - 1].column].path + "\"");
}

void ParquetFile::Impl::select(const std::vector<std::string>& names) {
  const ParquetNode& root = schema[0];
  std::vector<std::string> all;
  for (int c : root.children) all.push_back(schema[static_cast<size_t>(c)].name);
  std::set<std::string> wanted;
  for (const auto& name : names) {
    bool found = false;
    for (const auto& a : all) found = found || a == name;
    if (!found) {
      std::string near = nearest_name(name, all);
      throw Error(path, "no column named \"" + name + "\"",
                  (near.empty() ? std::string() : "did you mean \"" + near + "\"? ") + "columns: " + join(all, ", "));
    }
    wanted.insert(name);
  }
  for (int c : root.children)
    if (names.empty() || wanted.count(schema[static_cast<size_t>(c)].name)) fields.push_back(c);
}

ColumnData ParquetFile::Impl::read_chunk(size_t group, int column, Budget& budget) const {
  const ColumnChunkMeta& m = meta.row_groups[group].columns[static_cast<size_t>(column)];
  if (m.external) throw Error("", "the column chunk lives in another file (file_path), which this reader does not support");
  const int64_t start = chunk_start(m);
  const int64_t len = m.total_compressed_size;
  if (start < 4 || len < 0 || static_cast<uint64_t>(len) > data_end || static_cast<uint64_t>(start) > data_end - static_cast<uint64_t>(len))
    throw Error("", "column chunk at byte " + std::to_string(start) + " of " + std::to_string(len) +
                        " bytes exceeds the file's data (bytes 4.." + n_str(data_end) + ")");
  budget.take(static_cast<uint64_t>(len));
  Buffer bytes = pool->get(static_cast<size_t>(len));
  source->read(static_cast<uint64_t>(start), static_cast<size_t>(len), bytes.get());
  const ParquetColumn& col = columns[static_cast<size_t>(column)];
  ChunkInfo info;
  info.vt = {col.type, schema[static_cast<size_t>(col.node)].type_length};
  info.max_def = col.max_def;
  info.max_rep = col.max_rep;
  info.codec = m.codec;
  info.num_values = m.num_values;
  return decode_column_chunk(std::move(bytes), static_cast<size_t>(len), info, options.limits, budget, *pool);
}

std::vector<ColumnData> ParquetFile::Impl::read_columns(size_t group, Budget& budget) const {
  if (group >= row_groups.size())
    throw Error(path, "row group " + n_str(group) + " does not exist (the file has " + n_str(row_groups.size()) + ")");
  std::vector<ColumnData> data(columns.size());
  for (int f : fields) {
    for (int c = plan[static_cast<size_t>(f)].first_column; c < plan[static_cast<size_t>(f)].end_column; ++c) {
      try {
        data[static_cast<size_t>(c)] = read_chunk(group, c, budget);
      } catch (const Error& e) {
        throw e.within(path + ": row group " + n_str(group) + ", column \"" + columns[static_cast<size_t>(c)].path + "\"");
      }
    }
  }
  return data;
}

// Decodes row group `group` and calls fn(row) for each row (fn returns false to stop); checks the
// row count against the metadata when all rows were read.
template <typename Fn>
void ParquetFile::Impl::assemble(size_t group, Fn&& fn) const {
  Budget budget(options.limits.max_row_group_bytes);
  std::vector<ColumnData> data = read_columns(group, budget);
  const uint64_t expected = static_cast<uint64_t>(row_groups[group].num_rows);
  const std::string where = path + ": row group " + n_str(group);
  if (fields.empty()) {  // no columns selected (or none in the file): empty objects
    try {
      budget.take(expected > budget.left() / kEntryCost ? UINT64_MAX : expected * kEntryCost);
    } catch (const Error& e) {
      throw e.within(where);
    }
    for (uint64_t r = 0; r < expected; ++r)
      if (!fn(ParquetRow::object())) return;
    return;
  }
  std::vector<const ColumnData*> ptrs(columns.size(), nullptr);
  for (int f : fields)
    for (int c = plan[static_cast<size_t>(f)].first_column; c < plan[static_cast<size_t>(f)].end_column; ++c)
      ptrs[static_cast<size_t>(c)] = &data[static_cast<size_t>(c)];
  RowAssembler assembler(schema, plan, fields, ptrs);
  uint64_t rows = 0;
  for (;;) {
    ParquetRow row;
    try {
      if (!assembler.next(row)) break;
    } catch (const Error& e) {
      throw e.within(where + ", row " + n_str(rows));
    }
    if (++rows > expected) throw Error(where, "its columns hold more rows than the " + n_str(expected) + " its metadata counts");
    if (!fn(std::move(row))) return;
  }
  if (rows != expected) throw Error(where, "its columns hold " + n_str(rows) + " rows, its metadata counts " + n_str(expected));
}

// ---- ParquetFile --------------------------------------------------------------------------------

ParquetFile::ParquetFile() : impl_(std::make_unique<Impl>()) {}
ParquetFile::ParquetFile(ParquetFile&&) noexcept = default;
ParquetFile& ParquetFile::operator=(ParquetFile&&) noexcept = default;
ParquetFile::~ParquetFile() = default;

void ParquetFile::Impl::load(std::unique_ptr<Source> src, const std::string& name, ParquetOptions opts) {
  path = name;
  options = std::move(opts);
  source = std::move(src);
  read_footer();
  build_schema();
  check_row_groups();
  select(options.columns);
}

ParquetFile ParquetFile::open(const std::string& path, ParquetOptions options) {
  ParquetFile f;
  f.impl_->load(Source::file(path), path, std::move(options));
  return f;
}

ParquetFile ParquetFile::from_bytes(std::string bytes, const std::string& name, ParquetOptions options) {
  ParquetFile f;
  f.impl_->load(Source::memory(std::move(bytes)), name, std::move(options));
  return f;
}

const std::string& ParquetFile::path() const { return impl_->path; }
const std::string& ParquetFile::created_by() const { return impl_->meta.created_by; }
int64_t ParquetFile::num_rows() const { return impl_->meta.num_rows; }
const std::vector<ParquetNode>& ParquetFile::schema() const { return impl_->schema; }
const std::vector<ParquetColumn>& ParquetFile::columns() const { return impl_->columns; }
const std::vector<ParquetRowGroup>& ParquetFile::row_groups() const { return impl_->row_groups; }

std::vector<std::string> ParquetFile::field_names() const {
  std::vector<std::string> out;
  for (int c : impl_->schema[0].children) out.push_back(impl_->schema[static_cast<size_t>(c)].name);
  return out;
}

std::vector<std::string> ParquetFile::selected_fields() const {
  std::vector<std::string> out;
  for (int c : impl_->fields) out.push_back(impl_->schema[static_cast<size_t>(c)].name);
  return out;
}

std::string ParquetFile::field_type(const std::string& field) const {
  for (int c : impl_->schema[0].children)
    if (impl_->schema[static_cast<size_t>(c)].name == field) return node_type_string(impl_->schema, impl_->plan, c);
  throw Error(impl_->path, "no column named \"" + field + "\"", "columns: " + join(field_names(), ", "));
}

std::vector<ParquetRow> ParquetFile::read_row_group(size_t index) const {
  std::vector<ParquetRow> rows;
  impl_->assemble(index, [&](ParquetRow&& row) {
    rows.push_back(std::move(row));
    return true;
  });
  return rows;
}

bool ParquetFile::for_each_row_in_group(size_t index, const std::function<bool(ParquetRow&&)>& fn) const {
  bool stopped = false;
  impl_->assemble(index, [&](ParquetRow&& row) {
    stopped = !fn(std::move(row));
    return !stopped;
  });
  return !stopped;
}

void ParquetFile::for_each_row_group(const std::function<bool(size_t, std::vector<ParquetRow>&)>& fn) const {
  for (size_t g = 0; g < impl_->row_groups.size(); ++g) {
    std::vector<ParquetRow> rows = read_row_group(g);
    if (!fn(g, rows)) return;
  }
}

void ParquetFile::for_each_row(const std::function<bool(ParquetRow&&)>& fn) const {
  for (size_t g = 0; g < impl_->row_groups.size(); ++g)
    if (!for_each_row_in_group(g, fn)) return;
}

std::vector<ParquetRow> read_parquet_rows(const std::string& path, size_t limit, ParquetOptions options) {
  std::vector<ParquetRow> rows;
  if (limit == 0) return rows;
  ParquetFile::open(path, std::move(options)).for_each_row([&](ParquetRow&& row) {
    rows.push_back(std::move(row));
    return rows.size() < limit;
  });
  return rows;
}

void for_each_parquet_row(const std::string& path, const std::function<bool(ParquetRow&&)>& fn, ParquetOptions options) {
  ParquetFile::open(path, std::move(options)).for_each_row(fn);
}

}  // namespace grpo::io
