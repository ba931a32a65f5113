// Tests for the Parquet reader (core/io/parquet.h): every reference file under tests/data/parquet
// (written by parquet-wasm, i.e. Apache Arrow's Rust writer, and by hyparquet-writer; every codec,
// data page v1 and v2, dictionary and plain, DELTA_* encodings, nested lists/structs/maps) must
// read exactly as hyparquet reads it (the committed .jsonl); schema and column order; nulls and
// nested chat messages; row-group streaming and limits; corrupted files give a grpo::Error naming
// the file (and row group and column inside the data); random mutations never crash.
#include "tests/common/test_paths.h"
#include <QtTest>

#include <fstream>
#include <random>
#include <set>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/io/parquet.h"
#include "tests/common/error_of.h"

using namespace grpo::io;
using grpo::testing::error_of;

namespace {

const std::string kDir = std::string(GRPO_TEST_DATA) + "/parquet";

std::string data_path(const std::string& name) { return kDir + "/" + name; }

std::vector<ParquetRow> read_jsonl(const std::string& path) {
  std::vector<ParquetRow> rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) rows.push_back(ParquetRow::parse(line));
  return rows;
}

std::vector<ParquetRow> read_all(const ParquetFile& f) {
  std::vector<ParquetRow> rows;
  f.for_each_row([&](ParquetRow&& r) {
    rows.push_back(std::move(r));
    return true;
  });
  return rows;
}

// Zigzag varint at `pos`, its value and byte length.
int64_t read_varint(const std::string& b, size_t pos, size_t& len) {
  uint64_t v = 0;
  len = 0;
  for (int shift = 0;; shift += 7) {
    auto c = static_cast<unsigned char>(b[pos + len++]);
    v |= uint64_t(c & 0x7F) << shift;
    if (!(c & 0x80)) break;
  }
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

// Overwrites the varint at `pos` with the largest value of the same byte length.
void max_varint(std::string& b, size_t pos, size_t len) {
  for (size_t k = 0; k < len; ++k) b[pos + k] = static_cast<char>(k + 1 < len ? 0xFE : 0x7E);
}

}  // namespace

class TestParquet : public QObject {
  Q_OBJECT

private Q_SLOTS:
  // ---- reference files ----
  void everyReferenceFileReadsAsHyparquet() {
    auto manifest = nlohmann::json::parse(grpo::read_file(data_path("expected.json")));
    QVERIFY(manifest.size() >= 25);
    QDir dir(QString::fromStdString(kDir));
    for (const QString& f : dir.entryList({"*.parquet"}, QDir::Files))
      QVERIFY2(manifest.contains(f.toStdString()), qPrintable(f + " is not in expected.json"));
    for (auto& [file, expected_name] : manifest.items()) {
      const std::string path = data_path(file);
      std::vector<ParquetRow> expected = read_jsonl(data_path(expected_name.get<std::string>()));
      ParquetFile f = ParquetFile::open(path);
      std::vector<ParquetRow> rows = read_all(f);
      QVERIFY2(rows.size() == expected.size(),
               (file + ": " + std::to_string(rows.size()) + " rows, expected " + std::to_string(expected.size())).c_str());
      QCOMPARE(static_cast<size_t>(f.num_rows()), rows.size());
      for (size_t i = 0; i < rows.size(); ++i)
        QVERIFY2(rows[i] == expected[i],
                 (file + " row " + std::to_string(i) + ":\n  ours:     " + rows[i].dump() + "\n  expected: " + expected[i].dump()).c_str());
      // Reading group by group gives the same rows.
      size_t k = 0;
      for (size_t g = 0; g < f.row_groups().size(); ++g)
        for (auto& r : f.read_row_group(g)) QVERIFY2(r == expected[k++], (file + " group " + std::to_string(g)).c_str());
      QCOMPARE(k, expected.size());
    }
  }

  void referenceFilesCoverCodecsAndPageVersions() {
    for (const char* codec : {"uncompressed", "snappy", "gzip", "zstd"})
      for (const char* page : {"v1", "v2"})
        for (const char* dict : {"dict", "plain"}) {
          std::string name = std::string("types_") + codec + "_" + page + "_" + dict + ".parquet";
          ParquetFile f = ParquetFile::open(data_path(name));
          QCOMPARE(f.row_groups().size(), size_t(4));
          QVERIFY2(f.created_by().find("parquet-wasm") != std::string::npos, f.created_by().c_str());
        }
    QVERIFY(ParquetFile::open(data_path("hyparquet_types.parquet")).created_by().find("hyparquet-writer") != std::string::npos);
  }

  // ---- schema ----
  void schemaAndColumnOrder() {
    ParquetFile f = ParquetFile::open(data_path("types_zstd_v2_dict.parquet"));
    QCOMPARE(f.field_names(), (std::vector<std::string>{"id", "n32", "f32", "f64", "flag", "s", "messages"}));
    QCOMPARE(f.selected_fields(), f.field_names());
    QCOMPARE(f.num_rows(), int64_t(40));
    std::vector<std::string> paths;
    for (const auto& c : f.columns()) paths.push_back(c.path);
    QCOMPARE(paths, (std::vector<std::string>{"id", "n32", "f32", "f64", "flag", "s", "messages.list.element.role",
                                               "messages.list.element.content"}));
    const ParquetColumn& role = f.columns()[6];
    QCOMPARE(role.type, PhysicalType::BYTE_ARRAY);
    QCOMPARE(role.logical, LogicalType::STRING);
    QCOMPARE(role.max_def, 4);  // messages (optional), list (repeated), element (optional), role (optional)
    QCOMPARE(role.max_rep, 1);
    QCOMPARE(f.columns()[0].type, PhysicalType::INT64);
    QCOMPARE(f.columns()[0].max_def, 1);
    QCOMPARE(f.field_type("messages"), std::string("list<struct<role: string, content: string>>"));
    QCOMPARE(f.field_type("id"), std::string("int64"));
    QCOMPARE(f.field_type("f32"), std::string("float"));
    QCOMPARE(f.field_type("flag"), std::string("bool"));
    QCOMPARE(f.field_type("s"), std::string("string"));
    int64_t total = 0;
    for (const auto& g : f.row_groups()) {
      total += g.num_rows;
      QVERIFY(g.compressed_size > 0);
    }
    QCOMPARE(total, int64_t(40));
    const ParquetNode& messages = f.schema()[static_cast<size_t>(f.schema()[0].children[6])];
    QCOMPARE(messages.logical, LogicalType::LIST);
    QCOMPARE(messages.repetition, Repetition::OPTIONAL);

    ParquetFile chat = ParquetFile::open(data_path("chat_prompt.parquet"));
    QCOMPARE(chat.field_names(), (std::vector<std::string>{"prompt", "solution", "level"}));
    QCOMPARE(chat.field_type("prompt"), std::string("list<struct<role: string, content: string>>"));
    QCOMPARE(chat.columns()[0].path, std::string("prompt.list.item.role"));
    QCOMPARE(chat.columns()[0].max_def, 1);  // only the repeated level is optional-like

    ParquetFile nested = ParquetFile::open(data_path("nested.parquet"));
    QCOMPARE(nested.field_type("info"), std::string("struct<a: int32, tags: list<string>>"));
    QCOMPARE(nested.field_type("grid"), std::string("list<list<int32>>"));
    QCOMPARE(nested.field_type("scores"), std::string("list<double>"));
    QVERIFY(error_of([&] { (void)nested.field_type("nope"); }).find("no column named \"nope\"") != std::string::npos);

    ParquetFile maps = ParquetFile::open(data_path("map.parquet"));
    QCOMPARE(maps.field_type("attrs"), std::string("map<string, int32>"));
    QCOMPARE(maps.field_type("names"), std::string("map<int32, string>"));
    QCOMPARE(ParquetFile::open(data_path("logical_types.parquet")).field_type("dec"), std::string("decimal(10, 2)"));
  }

  // ---- values ----
  void nullsAndNestedMessages() {
    auto rows = read_all(ParquetFile::open(data_path("types_snappy_v1_dict.parquet")));
    QCOMPARE(rows.size(), size_t(40));
    QVERIFY(rows[3]["n32"].is_null());     // i % 7 == 3
    QVERIFY(rows[2]["f32"].is_null());     // i % 5 == 2
    QVERIFY(rows[1]["flag"].is_null());    // i % 4 == 1
    QVERIFY(rows[5]["s"].is_null());       // i % 6 == 5
    QVERIFY(rows[4]["messages"].is_null());  // i % 9 == 4: null list
    QCOMPARE(rows[8]["messages"], ParquetRow::array());  // empty list
    QVERIFY(rows[12]["messages"][0].is_null());         // null element
    QCOMPARE(rows[5]["n32"].get<int64_t>(), int64_t(-2147483648LL));
    QCOMPARE(rows[6]["n32"].get<int64_t>(), int64_t(2147483647));
    QCOMPARE(rows[39]["id"].get<int64_t>(), int64_t(39) * 4294967311LL - 123456789LL);
    QCOMPARE(rows[7]["f64"].get<double>(), 1e300);
    QCOMPARE(rows[0]["f32"].get<double>(), double(-3.3f));
    const auto& m = rows[1]["messages"];
    QCOMPARE(m.size(), size_t(2));
    QCOMPARE(m[0]["role"].get<std::string>(), std::string("system"));
    QCOMPARE(m[1]["content"].get<std::string>(), std::string("assistant says 日本語のテキスト #1.1"));
    QCOMPARE(rows[0].begin().key(), std::string("id"));  // file order
    QVERIFY(rows[10]["messages"][0]["content"].is_null());  // (i + j) % 11 == 10

    auto gsm = read_parquet_rows(data_path("gsm8k_like.parquet"));
    QCOMPARE(gsm.size(), size_t(40));
    for (const auto& r : gsm) {
      const std::string a = r["answer"].get<std::string>();
      QVERIFY2(a.find("\n#### ") != std::string::npos, a.c_str());
      QVERIFY(r["question"].is_string());
    }
  }

  // ---- selection and streaming ----
  void columnSelection() {
    ParquetOptions o;
    o.columns = {"messages", "id"};
    ParquetFile f = ParquetFile::open(data_path("types_gzip_v1_plain.parquet"), o);
    QCOMPARE(f.selected_fields(), (std::vector<std::string>{"id", "messages"}));
    auto rows = read_all(f);
    QCOMPARE(rows.size(), size_t(40));
    QCOMPARE(rows[1].size(), size_t(2));
    QCOMPARE(rows[1].begin().key(), std::string("id"));
    auto full = read_jsonl(data_path("types.jsonl"));
    QCOMPARE(rows[1]["messages"], full[1]["messages"]);

    o.columns = {"mesages"};
    std::string e = error_of([&] { ParquetFile::open(data_path("types_gzip_v1_plain.parquet"), o); });
    CHECK_ERROR_CONTAINS(e, "types_gzip_v1_plain.parquet", "no column named \"mesages\"", "did you mean \"messages\"");
  }

  void rowGroupStreaming() {
    ParquetFile f = ParquetFile::open(data_path("types_uncompressed_v2_dict.parquet"));
    size_t callbacks = 0, rows = 0;
    f.for_each_row_group([&](size_t g, std::vector<ParquetRow>& group) {
      [&] { QCOMPARE(g, callbacks); QCOMPARE(int64_t(group.size()), f.row_groups()[g].num_rows); }();
      ++callbacks;
      rows += group.size();
      return true;
    });
    QCOMPARE(callbacks, f.row_groups().size());
    QCOMPARE(callbacks, size_t(4));
    QCOMPARE(rows, size_t(40));
    // Stopping early.
    callbacks = 0;
    f.for_each_row_group([&](size_t, std::vector<ParquetRow>&) { return ++callbacks < 2; });
    QCOMPARE(callbacks, size_t(2));
    size_t seen = 0;
    f.for_each_row([&](ParquetRow&&) { return ++seen < 15; });
    QCOMPARE(seen, size_t(15));
    QVERIFY(!f.for_each_row_in_group(1, [](ParquetRow&&) { return false; }));
    // read_parquet_rows with a limit spanning row groups.
    auto some = read_parquet_rows(data_path("types_uncompressed_v2_dict.parquet"), 15);
    auto all = read_jsonl(data_path("types.jsonl"));
    QCOMPARE(some.size(), size_t(15));
    QCOMPARE(some[14], all[14]);
    QCOMPARE(read_parquet_rows(data_path("gsm8k_like.parquet"), 0).size(), size_t(0));
    size_t streamed = 0;
    for_each_parquet_row(data_path("gsm8k_like.parquet"), [&](ParquetRow&&) { return ++streamed > 0; });
    QCOMPARE(streamed, size_t(40));
    CHECK_ERROR_CONTAINS(error_of([&] { f.read_row_group(4); }), "row group 4 does not exist");
  }

  void limitsAreErrors() {
    ParquetOptions o;
    o.limits.max_row_group_bytes = 2000;
    std::string e = error_of([&] { read_all(ParquetFile::open(data_path("types_snappy_v2_plain.parquet"), o)); });
    CHECK_ERROR_CONTAINS(e, "types_snappy_v2_plain.parquet: row group 0, column \"", "exceeds the row group limit", "hint:");
    o = {};
    o.limits.max_page_bytes = 16;
    e = error_of([&] { read_all(ParquetFile::open(data_path("gsm8k_like.parquet"), o)); });
    CHECK_ERROR_CONTAINS(e, "gsm8k_like.parquet: row group 0, column \"question\": page 0", "uncompressed size");
    o = {};
    o.limits.max_footer_bytes = 100;
    e = error_of([&] { ParquetFile::open(data_path("gsm8k_like.parquet"), o); });
    CHECK_ERROR_CONTAINS(e, "gsm8k_like.parquet: footer of", "exceeds the limit");
  }

  // ---- corrupt files ----
  void corruptFilesNameTheFile() {
    const std::string bytes = grpo::read_file(data_path("types_snappy_v1_dict.parquet"));
    const std::string name = "bad.parquet";
    auto open_and_read = [&](const std::string& b) {
      return error_of([&] { read_all(ParquetFile::from_bytes(b, name)); });
    };
    QCOMPARE(open_and_read(bytes), std::string("(no error)"));
    CHECK_ERROR_CONTAINS(open_and_read(""), name, "too short");
    CHECK_ERROR_CONTAINS(open_and_read(bytes.substr(0, bytes.size() - 1)), name, "does not end with the magic bytes PAR1");
    CHECK_ERROR_CONTAINS(open_and_read(bytes.substr(0, 100)), name, "PAR1");
    std::string b = bytes;
    b.replace(b.size() - 4, 4, std::string(4, '\0'));
    CHECK_ERROR_CONTAINS(open_and_read(b), name, "does not end with the magic bytes PAR1");
    b = bytes;
    b.replace(0, 4, std::string(4, '\0'));
    CHECK_ERROR_CONTAINS(open_and_read(b), name, "does not start with the magic bytes PAR1");
    b = bytes;
    b[b.size() - 5] = static_cast<char>(0x7F);  // footer length's high byte
    CHECK_ERROR_CONTAINS(open_and_read(b), name, "footer length", "exceeds the file");
    b = bytes;
    b.replace(b.size() - 8, 4, std::string("\x10\0\0\0", 4));  // a 16-byte footer: garbage Thrift
    CHECK_ERROR_CONTAINS(open_and_read(b), name + ": footer: thrift");
    b = bytes;
    b.replace(b.size() - 4, 4, "PARE");
    CHECK_ERROR_CONTAINS(open_and_read(b), name, "encrypted");

    // The first page header (column "id" of row group 0, at byte 4): type, uncompressed size,
    // compressed size, each a 0x15 field header then a zigzag varint.
    QCOMPARE(static_cast<unsigned char>(bytes[4]), 0x15);
    size_t len1, len2, len3;
    read_varint(bytes, 5, len1);
    size_t usize_pos = 5 + len1 + 1;
    read_varint(bytes, usize_pos, len2);
    size_t csize_pos = usize_pos + len2 + 1;
    QCOMPARE(static_cast<unsigned char>(bytes[csize_pos - 1]), 0x15);
    int64_t csize = read_varint(bytes, csize_pos, len3);
    QVERIFY(csize > 0);
    b = bytes;
    max_varint(b, csize_pos, len3);
    CHECK_ERROR_CONTAINS(open_and_read(b), name + ": row group 0, column \"id\": page 0 (byte 0 of the column chunk): page header: compressed size",
                         "exceeds");
    b = bytes;
    max_varint(b, usize_pos, len2);
    CHECK_ERROR_CONTAINS(open_and_read(b), name + ": row group 0, column \"id\": page 0", "SNAPPY", "the page header says");
    b = bytes;
    b[4] = 0;  // the page header starts with a stop byte: no type or sizes
    CHECK_ERROR_CONTAINS(open_and_read(b), name + ": row group 0, column \"id\"", "page header");

    // The codec of column "s" (SNAPPY = 1, zigzag 2), right after its path_in_schema ["s"].
    const std::string pattern("\x18\x01s\x15\x02", 5);
    size_t at = bytes.find(pattern);  // row group 0's chunk of "s"
    QVERIFY(at != std::string::npos);
    b = bytes;
    b[at + 4] = 14;  // LZ4_RAW = 7
    CHECK_ERROR_CONTAINS(open_and_read(b), name + ": row group 0, column \"s\"", "LZ4_RAW", "SNAPPY, GZIP and ZSTD");
    b[at + 4] = 8;  // BROTLI = 4
    CHECK_ERROR_CONTAINS(open_and_read(b), "BROTLI");
    b[at + 4] = 84;  // 42: no such codec
    CHECK_ERROR_CONTAINS(open_and_read(b), name + ": row group 0, column \"s\"", "compression codec", "42");

    // A file path that does not exist, and a directory.
    CHECK_ERROR_CONTAINS(error_of([] { ParquetFile::open("/nonexistent/x.parquet"); }), "/nonexistent/x.parquet", "cannot open");
    CHECK_ERROR_CONTAINS(error_of([] { ParquetFile::open(kDir); }), "is a directory");
  }

  // Bounded random mutations of several reference files: only grpo::Error, naming the file.
  void randomMutationsNeverCrash() {
    const std::vector<std::string> files = {"types_snappy_v1_dict.parquet", "types_zstd_v2_plain.parquet",
                                            "types_gzip_v2_dict.parquet", "delta_encodings.parquet",
                                            "nested.parquet", "hyparquet_chat.parquet", "chat_prompt.parquet",
                                            "map.parquet", "logical_types.parquet"};
    std::mt19937_64 rng(20261201);
    ParquetOptions o;
    o.limits.max_row_group_bytes = 64ull << 20;
    o.limits.max_page_bytes = 16ull << 20;
    int errors = 0, clean = 0;
    for (int iter = 0; iter < 2000; ++iter) {
      std::string b = grpo::read_file(data_path(files[iter % files.size()]));
      const int kind = static_cast<int>(rng() % 4);
      const int flips = 1 + static_cast<int>(rng() % 8);
      for (int k = 0; k < flips; ++k) {
        // Half the mutations land in the footer (the last ~quarter of these small files).
        size_t pos = (kind == 0) ? b.size() - 1 - rng() % std::min<size_t>(b.size(), b.size() / 4 + 8) : rng() % b.size();
        if (kind == 3) b[pos] = static_cast<char>(b[pos] ^ (1u << (rng() % 8)));
        else b[pos] = static_cast<char>(rng());
      }
      if (kind == 2 && rng() % 2) b.erase(rng() % b.size(), 1 + rng() % 16);
      try {
        auto f = ParquetFile::from_bytes(b, "mutant.parquet", o);
        read_all(f);
        ++clean;
      } catch (const grpo::Error& e) {
        ++errors;
        QVERIFY2(std::string(e.what()).find("mutant.parquet") != std::string::npos, e.what());
      } catch (const std::exception& e) {
        QFAIL((std::string("not a grpo::Error: ") + e.what()).c_str());
      }
    }
    qInfo("2000 mutations: %d rejected with grpo::Error, %d still read", errors, clean);
    QVERIFY(errors > 500);
  }
};

QTEST_APPLESS_MAIN(TestParquet)
#include "test_parquet.moc"
