// Tests for core/common: error composition, nearest-name hints, atomic files, the BLAS line.
#include <QtTest>

#include <unistd.h>

#include "tests/common/error_of.h"
#include "tests/common/run_cli.h"
#include "core/common/blas_kernels.h"
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

  // The BLAS line names the library, its kernel set and who chose it, and advises the AVX-512
  // sets only where the CPU and the OS run them and another set is in use.
  void blasLineNamesTheKernelsAndWhoChose() {
    using grpo::blas_description;
    grpo::CpuId avx512;
    avx512.avx512f = avx512.avx512cd = avx512.avx512bw = avx512.avx512dq = avx512.avx512vl = avx512.os_avx512 = true;
    const grpo::CpuId avx2;  // nothing of AVX-512
    const std::string cfg = "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64";
    const std::string advice =
        "; this CPU runs AVX-512, for which OpenBLAS has kernels up to twice as fast: OPENBLAS_CORETYPE unset or SkylakeX)";
    QCOMPARE(blas_description(cfg, "Haswell", "Haswell", avx512),
             "OpenBLAS 0.3.21 DYNAMIC_ARCH, Haswell kernels (OPENBLAS_CORETYPE=Haswell" + advice);
    QCOMPARE(blas_description(cfg, "Haswell", nullptr, avx512),
             "OpenBLAS 0.3.21 DYNAMIC_ARCH, Haswell kernels (OpenBLAS's choice" + advice);
    QCOMPARE(blas_description(cfg, "Cooperlake", nullptr, avx512),
             std::string("OpenBLAS 0.3.21 DYNAMIC_ARCH, Cooperlake kernels (OpenBLAS's choice)"));
    QCOMPARE(blas_description(cfg, "SKYLAKEX", "skylakex", avx512),
             std::string("OpenBLAS 0.3.21 DYNAMIC_ARCH, SKYLAKEX kernels (OPENBLAS_CORETYPE=skylakex)"));
    QCOMPARE(blas_description(cfg, "Haswell", "Haswell", avx2),
             std::string("OpenBLAS 0.3.21 DYNAMIC_ARCH, Haswell kernels (OPENBLAS_CORETYPE=Haswell)"));
    // Each missing piece of the subset, or an OS that does not save ZMM state, removes the advice.
    for (bool grpo::CpuId::*part : {&grpo::CpuId::avx512f, &grpo::CpuId::avx512cd, &grpo::CpuId::avx512bw,
                                    &grpo::CpuId::avx512dq, &grpo::CpuId::avx512vl, &grpo::CpuId::os_avx512}) {
      grpo::CpuId cpu = avx512;
      cpu.*part = false;
      QVERIFY(!grpo::runs_openblas_avx512(cpu));
      QCOMPARE(blas_description(cfg, "Zen", nullptr, cpu), std::string("OpenBLAS 0.3.21 DYNAMIC_ARCH, Zen kernels (OpenBLAS's choice)"));
    }
    QVERIFY(grpo::runs_openblas_avx512(avx512));
    // A build for one CPU, a config string of another shape, another BLAS.
    QCOMPARE(blas_description("OpenBLAS 0.3.29 NO_LAPACKE SKYLAKEX MAX_THREADS=128", "SkylakeX", nullptr, avx512),
             std::string("OpenBLAS 0.3.29, SkylakeX kernels (OpenBLAS's choice)"));
    QCOMPARE(blas_description("", "Zen", nullptr, avx2), std::string("OpenBLAS, Zen kernels (OpenBLAS's choice)"));
    QCOMPARE(blas_description(cfg, "", nullptr, avx512), std::string("not OpenBLAS"));
  }

  // `grpo --version` reports the OpenBLAS the CLI loaded: a kernel set pinned by OPENBLAS_CORETYPE,
  // or OpenBLAS's own choice when it is unset; the advice follows this machine's CPU.
  void cliVersionReportsTheLoadedBlas() {
    auto env = QProcessEnvironment::systemEnvironment();
    env.remove("OPENBLAS_CORETYPE");
    auto blas_line = [&](const CliResult& r) {
      const auto at = r.out.find("\nblas: ");
      return at == std::string::npos ? std::string() : r.out.substr(at + 7, r.out.find('\n', at + 1) - at - 7);
    };
    auto r = run_cli({"--version"}, 60000, env);
    QVERIFY2(r.code == 0, r.out.c_str());
    const std::string own = blas_line(r);
    QVERIFY2(!own.empty(), r.out.c_str());
    if (own == "not OpenBLAS") QSKIP("the CLI's BLAS is not OpenBLAS");
    QVERIFY2(own.find(" kernels (OpenBLAS's choice") != std::string::npos, own.c_str());
    QVERIFY2(own.rfind("OpenBLAS 0.", 0) == 0, own.c_str());
#if defined(__x86_64__)
    env.insert("OPENBLAS_CORETYPE", "Haswell");
    r = run_cli({"--version"}, 60000, env);
    QVERIFY2(r.code == 0, r.out.c_str());
    const std::string pinned = blas_line(r);
    QVERIFY2(pinned.find(", Haswell kernels (OPENBLAS_CORETYPE=Haswell") != std::string::npos, pinned.c_str());
    const bool advised = pinned.find("this CPU runs AVX-512") != std::string::npos;
    QCOMPARE(advised, grpo::runs_openblas_avx512(grpo::cpu_id()));
#endif
  }
};

QTEST_GUILESS_MAIN(TestCommon)
#include "test_common.moc"
