// Tests for core/common: error composition, nearest-name hints, atomic files.
#include <QtTest>

#include <unistd.h>

#include "tests/common/error_of.h"
#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/json_limits.h"
#include "core/common/strings.h"

class TestCommon : public QObject {
  Q_OBJECT
private Q_SLOTS:
  // JSON from outside is bounded in depth before it is parsed (issue 18).
  void jsonDepthIsCheckedBeforeParsing() {
    QCOMPARE(grpo::json_depth("1"), 0);
    QCOMPARE(grpo::json_depth("{\"a\": [1, {\"b\": []}]}"), 4);
    QCOMPARE(grpo::json_depth("{\"s\": \"[[[[{{{{ \\\" [[[[\"}"), 1);  // brackets in strings, escaped quotes
    QCOMPARE(grpo::json_depth("]]]][[]"), 2);  // stray closers do not lower it: the parser rejects such text
    QCOMPARE(grpo::json_depth(std::string(1000000, '['), 64), 65);    // stops early past the limit
    const std::string ok = std::string(64, '[') + std::string(64, ']');
    QCOMPARE(grpo::parse_json_bounded(ok, "x").is_array(), true);
    const std::string deep = std::string(65, '[') + std::string(65, ']');
    std::string e = grpo::testing::error_of([&] { grpo::parse_json_bounded(deep, "body.json"); });
    QVERIFY2(e.find("body.json") == 0 && e.find("deeper than 64 levels") != std::string::npos, e.c_str());
    e = grpo::testing::error_of([&] { grpo::parse_json_bounded("{\"a\": }", "cfg.json"); });
    QVERIFY2(e.find("cfg.json: invalid JSON") == 0, e.c_str());
    QCOMPARE(grpo::parse_ordered_json_bounded("{\"z\": 1, \"a\": 2}", "x").begin().key(), std::string("z"));
  }

  void errorComposesContextAndHint() {
    grpo::Error e("model.safetensors", "tensor x: bad shape", "wrong base model?");
    QCOMPARE(QString(e.what()), QString("model.safetensors: tensor x: bad shape (hint: wrong base model?)"));
    QCOMPARE(QString(e.within("run").what()),
             QString("run: model.safetensors: tensor x: bad shape (hint: wrong base model?)"));
  }
  void nearestNameSuggestsCloseKeysOnly() {
    std::vector<std::string> keys = {"learning_rate", "num_generations", "temperature"};
    QCOMPARE(grpo::nearest_name("learnig_rate", keys), std::string("learning_rate"));
    QCOMPARE(grpo::nearest_name("temprature", keys), std::string("temperature"));
    QCOMPARE(grpo::nearest_name("zzz", keys), std::string());
    QCOMPARE(grpo::edit_distance("kitten", "sitting"), size_t(3));
  }
  void utf8Validation() {
    QVERIFY(grpo::is_valid_utf8(""));
    QVERIFY(grpo::is_valid_utf8("plain ascii"));
    QVERIFY(grpo::is_valid_utf8("h\xc3\xa9llo \xe6\x97\xa5\xf0\x9f\x98\x80"));  // é 日 😀
    QVERIFY(!grpo::is_valid_utf8("\x2e\xff"));            // never a UTF-8 byte
    QVERIFY(!grpo::is_valid_utf8("\xc3"));                 // truncated sequence
    QVERIFY(!grpo::is_valid_utf8("\xc0\xaf"));            // overlong "/"
    QVERIFY(!grpo::is_valid_utf8("\xed\xa0\x80"));       // surrogate U+D800
    QVERIFY(!grpo::is_valid_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
    QVERIFY(!grpo::is_valid_utf8("a\x80" "b"));             // stray continuation byte
  }
  void splitJoinTrim() {
    auto parts = grpo::split("a,,b", ',');
    QCOMPARE(parts.size(), size_t(3));
    QCOMPARE(grpo::join(parts, "|"), std::string("a||b"));
    QCOMPARE(grpo::trim("  x y \n"), std::string("x y"));
  }
  void atomicWriteReplacesWholeFile() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    std::string p = grpo::path_join(dir.path().toStdString(), "f.txt");
    grpo::write_file_atomic(p, "first version");
    grpo::write_file_atomic(p, "second");
    QCOMPARE(grpo::read_file(p), std::string("second"));
    QVERIFY(QDir(dir.path()).entryList(QDir::Files).size() == 1);  // no temp file left behind
    QVERIFY_THROWS_EXCEPTION(grpo::Error, grpo::read_file(p + ".missing"));
    grpo::fsync_directory(dir.path().toStdString());  // what write_file_atomic does after its rename
  }
  // Small files from outside (SHA256SUMS from a peer) are read with a size limit (issue 18).
  void boundedReadNamesTheLimit() {
    QTemporaryDir dir;
    const std::string p = grpo::path_join(dir.path().toStdString(), "SHA256SUMS");
    grpo::write_file_atomic(p, std::string(100, 'x'));
    QCOMPARE(grpo::read_file(p, 100).size(), size_t(100));
    const std::string e = grpo::testing::error_of([&] { grpo::read_file(p, 99); });
    QVERIFY2(e.find(p + ": 100 bytes exceeds the limit of 99") == 0, e.c_str());
    QVERIFY(grpo::kMaxSha256SumsBytes >= 4096);
  }
};

QTEST_GUILESS_MAIN(TestCommon)
#include "test_common.moc"
