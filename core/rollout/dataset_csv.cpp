// RFC 4180 CSV reader (see dataset_csv.h).
#include "core/rollout/dataset_csv.h"

#include <set>

#include "core/common/error.h"

namespace grpo::rollout {

namespace {

// Splits the text into raw records, each a list of fields, tracking the starting line.
class CsvLexer {
public:
  CsvLexer(const std::string& text, const std::string& name) : s_(text), name_(name) {
    if (s_.compare(0, 3, "\xEF\xBB\xBF") == 0) pos_ = 3;
  }

  // Reads the next record; false at the end of the text. `column_name(i)` names field i in errors.
  template <typename NameFn>
  bool next(CsvRecord& rec, NameFn column_name) {
    while (pos_ < s_.size() && (s_[pos_] == '\n' || s_[pos_] == '\r')) newline();  // blank lines
    if (pos_ >= s_.size()) return false;
    rec.line = line_;
    rec.fields.clear();
    for (;;) {
      rec.fields.push_back(field(column_name(rec.fields.size())));
      if (pos_ >= s_.size()) return true;
      char c = s_[pos_];
      if (c == ',') {
        ++pos_;
        continue;
      }
      newline();  // c is '\r' or '\n' (field() stops only at these)
      return true;
    }
  }

private:
  void newline() {
    if (s_[pos_] == '\r' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '\n') ++pos_;
    ++pos_;
    ++line_;
  }

  std::string where() const { return name_ + ":" + std::to_string(line_); }

  std::string field(const std::string& column) {
    std::string out;
    if (pos_ < s_.size() && s_[pos_] == '"') {  // quoted field
      int64_t open_line = line_;
      ++pos_;
      for (;;) {
        if (pos_ >= s_.size())
          throw Error(name_ + ":" + std::to_string(open_line), "field " + column + ": unterminated quoted field",
                      "a field that starts with \" must end with \"; write a quote inside it as \"\"");
        char c = s_[pos_];
        if (c == '"') {
          if (pos_ + 1 < s_.size() && s_[pos_ + 1] == '"') {
            out += '"';
            pos_ += 2;
            continue;
          }
          ++pos_;
          break;
        }
        if (c == '\n') ++line_;
        out += c;
        ++pos_;
      }
      if (pos_ < s_.size() && s_[pos_] != ',' && s_[pos_] != '\n' && s_[pos_] != '\r')
        throw Error(where(), "field " + column + ": text after the closing quote",
                    "quote the whole field and write inner quotes as \"\"");
      return out;
    }
    while (pos_ < s_.size() && s_[pos_] != ',' && s_[pos_] != '\n' && s_[pos_] != '\r') {
      if (s_[pos_] == '"')
        throw Error(where(), "field " + column + ": quote inside an unquoted field",
                    "quote the whole field and write inner quotes as \"\"");
      out += s_[pos_++];
    }
    return out;
  }

  const std::string& s_;
  const std::string& name_;
  size_t pos_ = 0;
  int64_t line_ = 1;
};

}  // namespace

CsvTable parse_csv_table(const std::string& text, const std::string& name) {
  CsvLexer lexer(text, name);
  CsvTable table;
  CsvRecord header;
  auto column_number = [](size_t i) { return std::string("#").append(std::to_string(i + 1)); };
  if (!lexer.next(header, column_number))
    throw Error(name, "empty CSV file", "the first line must be a header naming the columns, e.g. prompt,answer");
  std::set<std::string> seen;
  for (size_t i = 0; i < header.fields.size(); ++i) {
    const std::string& col = header.fields[i];
    check(!col.empty(), name + ":" + std::to_string(header.line), "header: column " + column_number(i) + " has no name");
    check(seen.insert(col).second, name + ":" + std::to_string(header.line), "header: column \"" + col + "\" appears twice");
  }
  table.header = header.fields;

  auto column_name = [&](size_t i) {
    return i < table.header.size() ? "\"" + table.header[i] + "\"" : column_number(i);
  };
  CsvRecord rec;
  while (lexer.next(rec, column_name)) {
    if (rec.fields.size() != table.header.size())
      throw Error(name + ":" + std::to_string(rec.line),
                  "expected " + std::to_string(table.header.size()) + " fields (as in the header), got " +
                      std::to_string(rec.fields.size()),
                  "quote fields that contain commas or newlines");
    table.records.push_back(rec);
  }
  return table;
}

}  // namespace grpo::rollout
