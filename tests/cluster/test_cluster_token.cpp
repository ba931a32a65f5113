// Cluster token: made on first use with mode 0600, read back unchanged, refused when others can
// read it or when empty, and compared only in full.
#include <QTemporaryDir>
#include <QtTest>

#include <sys/stat.h>

#include "core/cluster/cluster_token.h"
#include "core/common/error.h"
#include "core/common/files.h"
#include "tests/common/error_of.h"

using namespace grpo::cluster;
using grpo::testing::error_of;

class TestClusterToken : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void createdOnceWithMode0600() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("sub/cluster-token").toStdString();
    const std::string t1 = load_or_create_token(path);
    QCOMPARE(t1.size(), std::size_t(64));
    QVERIFY(t1.find_first_not_of("0123456789abcdef") == std::string::npos);
    struct stat st {};
    QCOMPARE(::stat(path.c_str(), &st), 0);
    QCOMPARE(int(st.st_mode & 0777), 0600);
    QCOMPARE(load_or_create_token(path), t1);
    QCOMPARE(read_token_file(path), t1);
    QTemporaryDir other;
    QVERIFY(load_or_create_token(other.filePath("t").toStdString()) != t1);
  }
  void refusesOpenPermissionsAndEmptyFiles() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("t").toStdString();
    grpo::write_file_atomic(path, "abc\n");
    ::chmod(path.c_str(), 0644);
    const std::string err = error_of([&] { read_token_file(path); });
    QVERIFY2(err.find("chmod 600") != std::string::npos, err.c_str());
    QVERIFY(err.find("abc") == std::string::npos);  // never echo the secret
    ::chmod(path.c_str(), 0600);
    QCOMPARE(read_token_file(path), std::string("abc"));
    grpo::write_file_atomic(path, "  \n");
    ::chmod(path.c_str(), 0600);
    QVERIFY(error_of([&] { read_token_file(path); }).find("empty") != std::string::npos);
    QVERIFY(error_of([&] { read_token_file(dir.filePath("missing").toStdString()); }).find("missing") !=
            std::string::npos);
  }
  void comparesWholeTokens() {
    QVERIFY(tokens_equal("abcd", "abcd"));
    QVERIFY(!tokens_equal("abcd", "abce"));
    QVERIFY(!tokens_equal("abcd", "abc"));
    QVERIFY(!tokens_equal("", "a"));
    QVERIFY(bearer_matches("Bearer s3cret", "s3cret"));
    QVERIFY(!bearer_matches("bearer s3cret", "s3cret"));
    QVERIFY(!bearer_matches("Bearer s3cre", "s3cret"));
    QVERIFY(!bearer_matches("Bearer ", ""));
    QVERIFY(!bearer_matches("Basic s3cret", "s3cret"));
  }
};

QTEST_GUILESS_MAIN(TestClusterToken)
#include "test_cluster_token.moc"
