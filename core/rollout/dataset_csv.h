// An RFC 4180 CSV reader: a header row, then records. Fields are separated by ',' and records by
// LF or CRLF; a field in double quotes may hold ',', '"' (written "") and newlines. A UTF-8 BOM
// is skipped, and blank lines between records are ignored. Errors name "file:line" and the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace grpo::rollout {

struct CsvRecord {
  int64_t line = 0;  // 1-based line where the record starts
  std::vector<std::string> fields;
};

struct CsvTable {
  std::vector<std::string> header;  // column names (non-empty, unique)
  std::vector<CsvRecord> records;   // every record has header.size() fields
};

CsvTable parse_csv_table(const std::string& text, const std::string& name);

}  // namespace grpo::rollout
