// Tests for core/common: error composition, nearest-name hints, atomic files.
#include <QtTest>

#include <unistd.h>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/strings.h"

class TestCommon : public QObject {
  Q_OBJECT
private Q_SLOTS:
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
  }
};

QTEST_GUILESS_MAIN(TestCommon)
#include "test_common.moc"
