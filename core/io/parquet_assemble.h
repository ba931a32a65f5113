// Row assembly for the Parquet reader: decoded leaf columns (levels + values) of one row group
// back into nested JSON rows, record by record (Dremel's assembly, by recursive descent over the
// schema). Also how each leaf's values become JSON (parquet.h lists the mapping). Internal.
#pragma once

#include <cstddef>
#include <vector>

#include "core/io/parquet.h"
#include "core/io/parquet_column.h"

namespace grpo::io::parquet {

// How a group node's value is built.
enum class GroupShape {
  STRUCT,  // object of its children
  LIST3,   // LIST: repeated group with one child, the element (standard three-level list)
  LIST2,   // LIST: the repeated child itself is the element (legacy two-level lists)
  MAP,     // MAP: repeated key_value group with a key and a value child
};

// How a leaf's values become JSON.
enum class LeafKind { BOOL, INT, UINT32, UINT64, DECIMAL_INT, REAL, STRING, BINARY, UUID, FLOAT16, DECIMAL_BYTES, INT96 };

// Per schema node, computed once when the file is opened.
struct NodePlan {
  GroupShape shape = GroupShape::STRUCT;
  LeafKind leaf = LeafKind::BINARY;
  int first_column = 0, end_column = 0;  // the leaf columns under the node: [first, end)
};

std::vector<NodePlan> plan_nodes(const std::vector<ParquetNode>& schema);
// A readable type: "string", "list<struct<role: string, content: string>>".
std::string node_type_string(const std::vector<ParquetNode>& schema, const std::vector<NodePlan>& plan, int node);

// Assembles the rows of one row group. `columns[c]` is the decoded leaf column c, or null for
// columns under fields that are not selected.
class RowAssembler {
public:
  RowAssembler(const std::vector<ParquetNode>& schema, const std::vector<NodePlan>& plan, const std::vector<int>& fields,
               const std::vector<const ColumnData*>& columns);
  // The next row into `row`; false when every column is exhausted. Throws when the columns
  // disagree (a corrupt file).
  bool next(ParquetRow& row);

private:
  struct Cursor {
    const ColumnData* col = nullptr;
    size_t pos = 0, value = 0;
    bool done() const { return pos >= col->num_entries; }
    int def(int max_def) const { return col->def.empty() ? max_def : col->def[pos]; }
    int rep() const { return col->rep.empty() ? 0 : col->rep[pos]; }
  };

  ParquetRow read_field(int node);
  ParquetRow read_body(int node);
  template <typename Elem>
  ParquetRow read_repeated(int node, Elem&& elem);
  void skip_null(int node);
  ParquetRow leaf_value(int node, Cursor& c);
  Cursor& cursor(int column);
  const std::string& column_path(int column) const;  // for errors

  const std::vector<ParquetNode>& schema_;
  const std::vector<NodePlan>& plan_;
  std::vector<int> fields_;
  std::vector<Cursor> cursors_;
  std::vector<int> selected_columns_;
};

}  // namespace grpo::io::parquet
