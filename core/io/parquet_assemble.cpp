// Row assembly: see parquet_assemble.h. A node N has a definition level D(N) (how many optional
// or repeated nodes from the root down to N, N included) and a repetition level R(N). At an
// entry of any leaf under N: def < D(N) means N is absent there (null, or an empty list for a
// repeated N) and every leaf under N holds exactly one entry for it; otherwise N is present and
// its children are read in turn. A repeated N continues with another element while the next
// entry's repetition level equals R(N). Each element consumes at least one entry of N's first
// leaf, so corrupt levels end in an error, never a loop.
#include "core/io/parquet_assemble.h"

#include <cmath>
#include <cstring>

#include "core/common/error.h"
#include "core/common/strings.h"
#include "core/io/parquet_meta.h"

namespace grpo::io::parquet {
namespace {

// UTF-8 with each maximal invalid subpart replaced by U+FFFD (the WHATWG decoder's rule, which
// hyparquet's TextDecoder follows).
std::string utf8_repaired(const char* s, size_t n) {
  std::string out;
  out.reserve(n);
  size_t i = 0;
  while (i < n) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    int need = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c == 0xE0) need = 2, lo = 0xA0;
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) need = 2;
    else if (c == 0xED) need = 2, hi = 0x9F;
    else if (c == 0xF0) need = 3, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) need = 3;
    else if (c == 0xF4) need = 3, hi = 0x8F;
    size_t j = i + 1;
    bool ok = need > 0;
    for (int k = 0; ok && k < need; ++k, ++j) {
      if (j >= n) { ok = false; break; }
      auto d = static_cast<unsigned char>(s[j]);
      if (d < (k == 0 ? lo : 0x80) || d > (k == 0 ? hi : 0xBF)) { ok = false; break; }
    }
    if (ok) {
      out.append(s + i, j - i);
    } else {
      out += "\xEF\xBF\xBD";
      if (j == i) j = i + 1;
    }
    i = j;
  }
  return out;
}

bool ascii_or_valid_utf8(const char* s, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (static_cast<unsigned char>(s[i]) >= 0x80) return is_valid_utf8(std::string_view(s + i, n - i));
  return true;
}

std::string base64(const char* s, size_t n) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = static_cast<unsigned char>(s[i]) << 16;
    if (i + 1 < n) v |= static_cast<unsigned char>(s[i + 1]) << 8;
    if (i + 2 < n) v |= static_cast<unsigned char>(s[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < n ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < n ? kAlphabet[v & 63] : '=';
  }
  return out;
}

ParquetRow binary_json(const char* s, size_t n) {
  if (ascii_or_valid_utf8(s, n)) return ParquetRow(std::string(s, n));
  return ParquetRow(base64(s, n));
}

double half_to_double(uint16_t h) {
  int exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exp == 0) return sign * std::ldexp(mant, -24);
  if (exp == 31) return mant ? NAN : sign * INFINITY;
  return sign * std::ldexp(mant + 1024, exp - 25);
}

// Big-endian two's complement of any length, as a double.
double decimal_bytes(const unsigned char* p, size_t n) {
  if (n == 0) return 0;
  double v = 0;
  bool negative = p[0] & 0x80;
  for (size_t i = 0; i < n; ++i) v = v * 256 + (negative ? 255 - p[i] : p[i]);
  return negative ? -(v + 1) : v;
}

std::string uuid_string(const unsigned char* p) {
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += kHex[p[i] >> 4];
    s += kHex[p[i] & 15];
  }
  return s;
}

LeafKind leaf_kind(const ParquetNode& n) {
  const bool decimal = n.logical == LogicalType::DECIMAL;
  switch (n.type) {
    case PhysicalType::BOOLEAN: return LeafKind::BOOL;
    case PhysicalType::INT32: return decimal ? LeafKind::DECIMAL_INT : n.is_unsigned ? LeafKind::UINT32 : LeafKind::INT;
    case PhysicalType::INT64: return decimal ? LeafKind::DECIMAL_INT : n.is_unsigned ? LeafKind::UINT64 : LeafKind::INT;
    case PhysicalType::INT96: return LeafKind::INT96;
    case PhysicalType::FLOAT:
    case PhysicalType::DOUBLE: return LeafKind::REAL;
    case PhysicalType::BYTE_ARRAY:
    case PhysicalType::FIXED_LEN_BYTE_ARRAY:
      switch (n.logical) {
        case LogicalType::STRING:
        case LogicalType::ENUM:
        case LogicalType::JSON: return LeafKind::STRING;
        case LogicalType::DECIMAL: return LeafKind::DECIMAL_BYTES;
        case LogicalType::UUID: return LeafKind::UUID;
        case LogicalType::FLOAT16: return LeafKind::FLOAT16;
        default: return LeafKind::BINARY;
      }
  }
  return LeafKind::BINARY;
}

GroupShape group_shape(const std::vector<ParquetNode>& schema, const ParquetNode& n) {
  if (n.children.size() != 1) return GroupShape::STRUCT;
  const ParquetNode& r = schema[n.children[0]];
  if (r.repetition != Repetition::REPEATED) return GroupShape::STRUCT;
  if (n.logical == LogicalType::LIST) {
    // parquet-format's backward-compatibility rules for LIST.
    if (r.leaf || r.children.size() > 1 || r.name == "array" || r.name == n.name + "_tuple") return GroupShape::LIST2;
    return GroupShape::LIST3;
  }
  if (n.logical == LogicalType::MAP && !r.leaf && r.children.size() == 2) return GroupShape::MAP;
  return GroupShape::STRUCT;
}

void plan_subtree(const std::vector<ParquetNode>& schema, std::vector<NodePlan>& plan, int node, int& next_column) {
  const ParquetNode& n = schema[node];
  plan[node].first_column = next_column;
  if (n.leaf) {
    plan[node].leaf = leaf_kind(n);
    ++next_column;
  } else {
    plan[node].shape = group_shape(schema, n);
    for (int c : n.children) plan_subtree(schema, plan, c, next_column);
  }
  plan[node].end_column = next_column;
}

std::string body_type(const std::vector<ParquetNode>& schema, const std::vector<NodePlan>& plan, int node);

std::string field_type(const std::vector<ParquetNode>& schema, const std::vector<NodePlan>& plan, int node) {
  std::string t = body_type(schema, plan, node);
  return schema[node].repetition == Repetition::REPEATED ? "list<" + t + ">" : t;
}

std::string body_type(const std::vector<ParquetNode>& schema, const std::vector<NodePlan>& plan, int node) {
  const ParquetNode& n = schema[node];
  if (n.leaf) {
    bool u = n.is_unsigned;
    switch (n.logical) {
      case LogicalType::STRING: case LogicalType::ENUM: return "string";
      case LogicalType::JSON: return "json";
      case LogicalType::UUID: return "uuid";
      case LogicalType::FLOAT16: return "float16";
      case LogicalType::DATE: return "date";
      case LogicalType::TIME: return "time";
      case LogicalType::TIMESTAMP: return "timestamp";
      case LogicalType::DECIMAL: return "decimal(" + std::to_string(n.precision) + ", " + std::to_string(n.scale) + ")";
      default: break;
    }
    switch (n.type) {
      case PhysicalType::BOOLEAN: return "bool";
      case PhysicalType::INT32: return u ? "uint32" : "int32";
      case PhysicalType::INT64: return u ? "uint64" : "int64";
      case PhysicalType::INT96: return "int96";
      case PhysicalType::FLOAT: return "float";
      case PhysicalType::DOUBLE: return "double";
      case PhysicalType::BYTE_ARRAY: return "binary";
      case PhysicalType::FIXED_LEN_BYTE_ARRAY: return "fixed_size_binary(" + std::to_string(n.type_length) + ")";
    }
  }
  const ParquetNode& r = schema[n.children[0]];
  switch (plan[node].shape) {
    case GroupShape::LIST3: return "list<" + field_type(schema, plan, r.children[0]) + ">";
    case GroupShape::LIST2: return "list<" + body_type(schema, plan, n.children[0]) + ">";
    case GroupShape::MAP:
      return "map<" + field_type(schema, plan, r.children[0]) + ", " + field_type(schema, plan, r.children[1]) + ">";
    case GroupShape::STRUCT: break;
  }
  std::string s = "struct<";
  for (size_t i = 0; i < n.children.size(); ++i) {
    if (i) s += ", ";
    s += schema[n.children[i]].name + ": " + field_type(schema, plan, n.children[i]);
  }
  return s + ">";
}

}  // namespace

std::vector<NodePlan> plan_nodes(const std::vector<ParquetNode>& schema) {
  std::vector<NodePlan> plan(schema.size());
  int next_column = 0;
  if (!schema.empty()) plan_subtree(schema, plan, 0, next_column);
  return plan;
}

std::string node_type_string(const std::vector<ParquetNode>& schema, const std::vector<NodePlan>& plan, int node) {
  return field_type(schema, plan, node);
}

RowAssembler::RowAssembler(const std::vector<ParquetNode>& schema, const std::vector<NodePlan>& plan,
                           const std::vector<int>& fields, const std::vector<const ColumnData*>& columns)
    : schema_(schema), plan_(plan), fields_(fields), cursors_(columns.size()) {
  for (size_t c = 0; c < columns.size(); ++c) {
    cursors_[c].col = columns[c];
    if (columns[c]) selected_columns_.push_back(static_cast<int>(c));
  }
}

RowAssembler::Cursor& RowAssembler::cursor(int column) { return cursors_[static_cast<size_t>(column)]; }

const std::string& RowAssembler::column_path(int column) const {
  for (const ParquetNode& n : schema_)
    if (n.column == column) return n.path;
  return schema_[0].path;
}

bool RowAssembler::next(ParquetRow& row) {
  if (selected_columns_.empty()) return false;
  bool first_done = cursor(selected_columns_[0]).done();
  for (int c : selected_columns_) {
    const Cursor& k = cursor(c);
    if (k.done() != first_done)
      fail("column \"" + column_path(c) + "\" holds a different number of rows than column \"" +
           column_path(selected_columns_[0]) + "\"");
    if (!k.done() && k.rep() != 0)
      fail("column \"" + column_path(c) + "\": a row starts with repetition level " + std::to_string(k.rep()));
  }
  if (first_done) return false;
  row = ParquetRow::object();
  for (int f : fields_) row[schema_[f].name] = read_field(f);
  return true;
}

void RowAssembler::skip_null(int node) {
  const int d = schema_[node].max_def;
  for (int c = plan_[node].first_column; c < plan_[node].end_column; ++c) {
    Cursor& k = cursor(c);
    if (k.done()) fail("column data ends inside a row");
    if (k.def(d) >= d) fail("columns disagree on whether \"" + schema_[node].path + "\" is present");
    ++k.pos;
  }
}

template <typename Elem>
ParquetRow RowAssembler::read_repeated(int node, Elem&& elem) {
  const ParquetNode& n = schema_[node];
  Cursor& c = cursor(plan_[node].first_column);
  if (c.done()) fail("column data ends inside a row");
  ParquetRow arr = ParquetRow::array();
  if (c.def(n.max_def) < n.max_def) {
    skip_null(node);
    return arr;
  }
  do {
    arr.push_back(elem());
  } while (!c.done() && c.rep() == n.max_rep);
  return arr;
}

ParquetRow RowAssembler::read_field(int node) {
  const ParquetNode& n = schema_[node];
  if (n.repetition == Repetition::REPEATED) return read_repeated(node, [&] { return read_body(node); });
  if (n.repetition == Repetition::OPTIONAL) {
    Cursor& c = cursor(plan_[node].first_column);
    if (c.done()) fail("column data ends inside a row");
    if (c.def(n.max_def) < n.max_def) {
      skip_null(node);
      return ParquetRow();
    }
  }
  return read_body(node);
}

ParquetRow RowAssembler::read_body(int node) {
  const ParquetNode& n = schema_[node];
  if (n.leaf) {
    Cursor& c = cursor(plan_[node].first_column);
    if (c.done()) fail("column data ends inside a row");
    if (c.def(n.max_def) != n.max_def)
      fail("column \"" + n.path + "\": definition level " + std::to_string(c.def(n.max_def)) + " where the value must be present");
    ParquetRow v = leaf_value(node, c);
    ++c.pos;
    return v;
  }
  switch (plan_[node].shape) {
    case GroupShape::LIST3: {
      int r = n.children[0];
      int element = schema_[r].children[0];
      return read_repeated(r, [&] { return read_field(element); });
    }
    case GroupShape::LIST2: {
      int r = n.children[0];
      return read_repeated(r, [&] { return read_body(r); });
    }
    case GroupShape::MAP: {
      int r = n.children[0];
      int key = schema_[r].children[0], value = schema_[r].children[1];
      ParquetRow obj = ParquetRow::object();
      ParquetRow pairs = read_repeated(r, [&] {
        ParquetRow k = read_field(key);
        ParquetRow v = read_field(value);
        ParquetRow pair = ParquetRow::array();
        pair.push_back(std::move(k));
        pair.push_back(std::move(v));
        return pair;
      });
      for (auto& p : pairs) obj[p[0].is_string() ? p[0].get<std::string>() : p[0].dump()] = std::move(p[1]);
      return obj;
    }
    case GroupShape::STRUCT: break;
  }
  ParquetRow obj = ParquetRow::object();
  for (int child : n.children) obj[schema_[child].name] = read_field(child);
  return obj;
}

ParquetRow RowAssembler::leaf_value(int node, Cursor& c) {
  const ParquetNode& n = schema_[node];
  const Values& v = c.col->values;
  const size_t i = c.value;
  if (i >= v.size(n.type)) fail("column \"" + n.path + "\": more present entries than values");
  ++c.value;
  switch (plan_[node].leaf) {
    case LeafKind::BOOL: return ParquetRow(v.ints[i] != 0);
    case LeafKind::INT: return ParquetRow(v.ints[i]);
    case LeafKind::UINT32: return ParquetRow(static_cast<uint64_t>(static_cast<uint32_t>(v.ints[i])));
    case LeafKind::UINT64: return ParquetRow(static_cast<uint64_t>(v.ints[i]));
    case LeafKind::DECIMAL_INT: return ParquetRow(static_cast<double>(v.ints[i]) / std::pow(10.0, n.scale));
    case LeafKind::REAL: return ParquetRow(v.reals[i]);
    default: break;
  }
  const char* s = v.bytes[i].data();
  const size_t len = v.bytes[i].size();
  const auto* u = reinterpret_cast<const unsigned char*>(s);
  switch (plan_[node].leaf) {
    case LeafKind::STRING:
      if (ascii_or_valid_utf8(s, len)) return ParquetRow(std::string(s, len));
      return ParquetRow(utf8_repaired(s, len));
    case LeafKind::UUID:
      if (len == 16) return ParquetRow(uuid_string(u));
      break;
    case LeafKind::FLOAT16:
      if (len == 2) return ParquetRow(half_to_double(static_cast<uint16_t>(u[0] | (u[1] << 8))));
      break;
    case LeafKind::DECIMAL_BYTES: return ParquetRow(decimal_bytes(u, len) / std::pow(10.0, n.scale));
    case LeafKind::INT96:
      if (len == 12) {
        uint64_t nanos;
        uint32_t day;
        std::memcpy(&nanos, s, 8);
        std::memcpy(&day, s + 8, 4);
        // Julian day 2440588 is 1970-01-01; wrapping arithmetic keeps corrupt values defined.
        uint64_t ns = (static_cast<uint64_t>(day) - 2440588u) * 86400000000000ull + nanos;
        return ParquetRow(static_cast<int64_t>(ns));
      }
      break;
    default: break;
  }
  return binary_json(s, len);
}

}  // namespace grpo::io::parquet
