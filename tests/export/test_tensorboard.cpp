// TensorBoard event files and the CSV export against their specs: CRC32C check values from
// RFC 3720 (B.4) and the TFRecord mask (docs/formats.md, "Record framing"); Event/Summary/Value
// bytes as the protobuf wire format lays them out for event.proto's field numbers ("Event
// bytes"); a written file parses back record by record (length CRC, payload CRC) to exactly the
// logged values; corruption and truncation are reported with the record and offset.
// metrics.jsonl -> CSV keeps every value ("CSV export").
#include <QtTest>

#include <cmath>
#include <cstring>
#include <fstream>

#include "core/common/files.h"
#include "core/records/metrics_export.h"
#include "core/records/tensorboard.h"
#include "../common/error_of.h"

using namespace grpo::run;
using grpo::testing::error_of;

namespace {

std::string hex(const std::string& bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

}  // namespace

class TestTensorBoard : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void crc32c_check_values() {
    // RFC 3720 B.4 (iSCSI CRC32C) and the common "123456789" check value.
    QCOMPARE(crc32c("123456789", 9), 0xE3069283u);
    std::string zeros(32, '\0'), ones(32, '\xff'), inc(32, 0), dec(32, 0);
    for (int i = 0; i < 32; ++i) inc[i] = static_cast<char>(i), dec[i] = static_cast<char>(31 - i);
    QCOMPARE(crc32c(zeros.data(), 32), 0x8A9136AAu);
    QCOMPARE(crc32c(ones.data(), 32), 0x62A8AB43u);
    QCOMPARE(crc32c(inc.data(), 32), 0x46DD794Eu);
    QCOMPARE(crc32c(dec.data(), 32), 0x113FDB5Cu);
    // Incremental use equals one pass.
    QCOMPARE(crc32c("56789", 5, crc32c("1234", 4)), 0xE3069283u);
    // TFRecord mask: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
    const uint32_t c = 0xE3069283u;
    QCOMPARE(masked_crc32c("123456789", 9), ((c >> 15) | (c << 17)) + 0xa282ead8u);
  }

  void event_bytes_follow_the_protobuf_wire_format() {
    // Event{wall_time=1.5, step=3, summary{value{tag:"a", simple_value:2.0}}}:
    // 09 <double 1.5 LE> | 10 03 | 2a 0a (0a 08 (0a 01 'a' | 15 <float 2.0 LE>))
    QCOMPARE(hex(encode_scalars_event(1.5, 3, {{"a", 2.0f}})),
             std::string("09000000000000f83f" "1003" "2a0a" "0a08" "0a0161" "1500000040"));
    // Event{wall_time=0.0, file_version="brain.Event:2"}: step 0 is the proto3 default, not written.
    QCOMPARE(hex(encode_file_version_event(0.0)),
             std::string("090000000000000000") + "1a0d" + hex("brain.Event:2"));
    // A step that needs a multi-byte varint: 300 = ac 02.
    QVERIFY(hex(encode_scalars_event(0, 300, {})).find("10ac02") != std::string::npos);
  }

  void framing_is_length_crc_payload_crc() {
    const std::string payload = "hello";
    const std::string rec = frame_record(payload);
    QCOMPARE(rec.size(), size_t(8 + 4 + 5 + 4));
    uint64_t len;
    uint32_t len_crc, data_crc;
    std::memcpy(&len, rec.data(), 8);
    std::memcpy(&len_crc, rec.data() + 8, 4);
    std::memcpy(&data_crc, rec.data() + 17, 4);
    QCOMPARE(len, uint64_t(5));
    QCOMPARE(len_crc, masked_crc32c(rec.data(), 8));
    QCOMPARE(rec.substr(12, 5), payload);
    QCOMPARE(data_crc, masked_crc32c("hello", 5));
  }

  void written_file_reads_back_to_the_logged_values() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString() + "/run";
    TensorBoardWriter w(dir);
    QVERIFY(w.path().empty());  // nothing before the first write
    const std::vector<std::map<std::string, double>> steps = {
        {{"reward", 0.25}, {"loss", -0.0123456789}, {"perf/step_s", 1.5}},
        {{"reward", 0.5}, {"loss", 1e-9}, {"clip_ratio/high_mean", 0.0}, {"nan_is_skipped", NAN}},
    };
    w.add_scalars(1, 1000.25, steps[0]);
    w.add_metrics_record({{"step", 2}, {"time", 1001.5}, {"policy_version", 1}, {"verdict", "balanced"},
                          {"reward", 0.5}, {"loss", 1e-9}, {"clip_ratio/high_mean", 0.0}, {"kl", nullptr}});
    const std::string name = w.path().substr(dir.size() + 1);
    QVERIFY2(name.rfind("events.out.tfevents.", 0) == 0, name.c_str());
    QCOMPARE(event_files(dir), std::vector<std::string>{w.path()});

    const auto records = read_tfrecords(w.path());
    QCOMPARE(records.size(), size_t(3));
    const TfEvent first = decode_event(records[0], "record 0");
    QCOMPARE(first.file_version, std::string("brain.Event:2"));
    QVERIFY(first.values.empty());
    QVERIFY(first.wall_time > 1.6e9);  // the real clock, in seconds

    const TfEvent e1 = decode_event(records[1], "record 1");
    QCOMPARE(e1.step, int64_t(1));
    QCOMPARE(e1.wall_time, 1000.25);
    QCOMPARE(e1.values.size(), size_t(3));
    for (const auto& [tag, v] : e1.values) QCOMPARE(v, static_cast<float>(steps[0].at(tag)));

    const TfEvent e2 = decode_event(records[2], "record 2");
    QCOMPARE(e2.step, int64_t(2));
    QCOMPARE(e2.wall_time, 1001.5);
    std::map<std::string, float> got(e2.values.begin(), e2.values.end());
    // policy_version is a number too; verdict (a string), kl (null), step and time are not values.
    const std::map<std::string, float> want = {
        {"reward", 0.5f}, {"loss", 1e-9f}, {"clip_ratio/high_mean", 0.0f}, {"policy_version", 1.0f}};
    QCOMPARE(got, want);
  }

  void corruption_and_truncation_are_reported() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString();
    TensorBoardWriter w(dir);
    w.add_scalars(1, 1.0, {{"reward", 1.0}});
    const std::string good = grpo::read_file(w.path());

    std::string bad = good;
    bad[bad.size() - 6] ^= 0x01;  // inside the last payload
    grpo::write_file_atomic(dir + "/payload", bad);
    CHECK_ERROR_CONTAINS(error_of([&] { read_tfrecords(dir + "/payload"); }), "record 1", "payload CRC mismatch");

    bad = good;
    bad[2] ^= 0x01;  // the first record's length
    grpo::write_file_atomic(dir + "/length", bad);
    CHECK_ERROR_CONTAINS(error_of([&] { read_tfrecords(dir + "/length"); }), "record 0 at byte 0", "length CRC mismatch");

    grpo::write_file_atomic(dir + "/short", good.substr(0, good.size() - 3));
    CHECK_ERROR_CONTAINS(error_of([&] { read_tfrecords(dir + "/short"); }), "record 1", "runs past the end");

    CHECK_ERROR_CONTAINS(error_of([&] { decode_event(std::string("\x2a\x7f", 2), "ev"); }), "ev", "runs past the end");
  }

  void metrics_csv_is_a_wide_table() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString();
    const nlohmann::json r1 = {{"step", 1}, {"time", 100.5}, {"policy_version", 0}, {"reward", 0.125},
                               {"verdict", "trainer-bound"}};
    const nlohmann::json r2 = {{"step", 2}, {"time", 101.5}, {"policy_version", 1}, {"reward", 0.1},
                               {"eval/accuracy", 0.75}, {"kl", nullptr}, {"note", "a,\"b\""}};
    grpo::write_file_atomic(dir + "/metrics.jsonl", r1.dump() + "\n" + r2.dump() + "\n");
    const std::string csv = metrics_csv(dir);
    QCOMPARE(csv, std::string("step,time,policy_version,eval/accuracy,kl,note,reward,verdict\n"
                              "1,100.5,0,,,,0.125,trainer-bound\n"
                              "2,101.5,1,0.75,,\"a,\"\"b\"\"\",0.10000000000000001,\n"));
    CHECK_ERROR_CONTAINS(error_of([&] { metrics_csv(dir + "/nope"); }), "metrics.jsonl", "not found");
    grpo::write_file_atomic(dir + "/metrics.jsonl", "{\"step\":1}\nnot json\n");
    CHECK_ERROR_CONTAINS(error_of([&] { metrics_csv(dir); }), "metrics.jsonl:2", "one JSON object per line");
  }

  void tensorboard_from_metrics_jsonl() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString();
    grpo::write_file_atomic(dir + "/metrics.jsonl", R"({"step":1,"time":10,"reward":0.5})" "\n"
                                                    R"({"step":2,"time":11,"reward":0.75})" "\n");
    const std::string path = metrics_to_tensorboard(dir);
    const auto recs = read_tfrecords(path);
    QCOMPARE(recs.size(), size_t(3));
    const auto e = decode_event(recs[2], "r2");
    QCOMPARE(e.step, int64_t(2));
    QCOMPARE(e.values.size(), size_t(1));
    QCOMPARE(e.values[0].first, std::string("reward"));
    QCOMPARE(e.values[0].second, 0.75f);
  }
};

QTEST_GUILESS_MAIN(TestTensorBoard)
#include "test_tensorboard.moc"
