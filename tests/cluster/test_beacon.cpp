// Discovery beacons: HMAC-SHA256 signatures checked against Python's hmac module, tampered,
// unsigned, replayed and stale beacons refused; beacons over loopback UDP reach a
// WorkerDirectory, a forged one is ignored, and a silent worker is forgotten.
#include <QSignalSpy>
#include <QUdpSocket>
#include <QtTest>

#include <nlohmann/json.hpp>

#include "core/cluster/beacon.h"
#include "core/cluster/discovery.h"
#include "core/cluster/worker_announcer.h"
#include "core/common/error.h"
#include "core/common/timing.h"
#include "tests/common/error_of.h"

using namespace grpo::cluster;

namespace {

const std::string kToken = "0123abcd0123abcd0123abcd0123abcd0123abcd0123abcd0123abcd0123abcd";

// Made with Python: hmac.new(token, b"grpo-studio beacon v1", sha256) as the key, then the
// datagram signed with hmac.new(key, payload, sha256).hexdigest().
const char* kPythonKeyHex = "dc6736cb32fdde226c17c69117433a5d3616452e158a147e5e7dd195037adc89";
const char* kPythonDatagram =
    R"({"grpo_beacon": 1, "payload": "{\"name\":\"py-worker\",\"url\":\"http://127.0.0.1:8011\",\"model\":\"sha:abc\",\"devices\":\"cpu\",\"version\":\"0.1\",\"load\":2,\"time\":1764400000.5,\"nonce\":\"00ff\"}", "sig": "74d120b518e0ea2312e43f316df01539228dbb609453ed2f699c77ab78218915"})";
const double kPythonTime = 1764400000.5;

Beacon sample(const std::string& url = "http://127.0.0.1:9000") {
  Beacon b;
  b.name = "w1";
  b.url = url;
  b.model = "fp";
  b.devices = "cpu x2";
  b.version = "test";
  b.load = 1;
  b.time = grpo::wall_time_s();
  return b;
}

}  // namespace

class TestBeacon : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void keyAndSignatureMatchPythonHmac() {
    const std::string key = beacon_key(kToken);
    QCOMPARE(QByteArray::fromStdString(key).toHex(), QByteArray(kPythonKeyHex));
    BeaconVerifier v(key);
    Beacon b;
    std::string why;
    QVERIFY2(v.verify(kPythonDatagram, kPythonTime + 1, b, why), why.c_str());
    QCOMPARE(b.name, std::string("py-worker"));
    QCOMPARE(b.url, std::string("http://127.0.0.1:8011"));
    QCOMPARE(b.load, 2.0);
    QCOMPARE(b.nonce, std::string("00ff"));
  }

  void signedBeaconRoundTrips() {
    const std::string key = beacon_key(kToken);
    BeaconVerifier v(key);
    Beacon out;
    std::string why;
    const Beacon in = sample();
    QVERIFY2(v.verify(sign_beacon(in, key), grpo::wall_time_s(), out, why), why.c_str());
    QCOMPARE(out.url, in.url);
    QCOMPARE(out.devices, in.devices);
    QVERIFY(!out.nonce.empty());
  }

  void refusesTamperedUnsignedWrongKeyReplayedAndStale() {
    const std::string key = beacon_key(kToken);
    BeaconVerifier v(key);
    Beacon out;
    std::string why;
    const double now = grpo::wall_time_s();
    // Tampered: the URL changed after signing.
    std::string d = sign_beacon(sample(), key);
    const auto pos = d.find("9000");
    QVERIFY(pos != std::string::npos);
    d.replace(pos, 4, "9001");
    QVERIFY(!v.verify(d, now, out, why));
    QCOMPARE(why, std::string("bad signature"));
    // Unsigned.
    auto j = nlohmann::json::parse(sign_beacon(sample(), key));
    j.erase("sig");
    QVERIFY(!v.verify(j.dump(), now, out, why));
    QCOMPARE(why, std::string("unsigned"));
    // Signed with another cluster's key.
    QVERIFY(!v.verify(sign_beacon(sample(), beacon_key("another-token")), now, out, why));
    QCOMPARE(why, std::string("bad signature"));
    // Replayed: the same datagram twice.
    const std::string once = sign_beacon(sample(), key);
    QVERIFY(v.verify(once, now, out, why));
    QVERIFY(!v.verify(once, now + 1, out, why));
    QCOMPARE(why, std::string("replayed"));
    // Stale (and from the future).
    Beacon old = sample();
    old.time = now - 120;
    QVERIFY(!v.verify(sign_beacon(old, key), now, out, why));
    QCOMPARE(why, std::string("stale"));
    old.time = now + 120;
    QVERIFY(!v.verify(sign_beacon(old, key), now, out, why));
    QCOMPARE(why, std::string("stale"));
    // The Python datagram, an hour later.
    QVERIFY(!v.verify(kPythonDatagram, kPythonTime + 3600, out, why));
    QCOMPARE(why, std::string("stale"));
    // Not JSON at all.
    QVERIFY(!v.verify("hello", now, out, why));
    QVERIFY(why.rfind("malformed", 0) == 0);
  }

  void parsesHostPort() {
    QCOMPARE(parse_host_port("239.255.77.42:29517", "x").port, uint16_t(29517));
    QCOMPARE(parse_host_port("[::1]:5", "x").host, std::string("::1"));
    const std::string err = grpo::testing::error_of([] { parse_host_port("localhost:80", "discovery_address"); });
    QVERIFY2(err.find("discovery_address") != std::string::npos && err.find("not an IP") != std::string::npos,
             err.c_str());
    QVERIFY(grpo::testing::error_of([] { parse_host_port("1.2.3.4:99999", "x"); }) != "(no error)");
  }

  // Loopback unicast: a sender finds the directory, a forged datagram is ignored, and the worker
  // is forgotten once its beacons stop.
  void loopbackDiscoveryAndForgetting() {
    const std::string key = beacon_key(kToken);
    WorkerDirectory dir(key, {"127.0.0.1", 0}, /*forget_after_s=*/1.0);
    QVERIFY(dir.port() != 0);
    QSignalSpy joined(&dir, &WorkerDirectory::workerJoined), left(&dir, &WorkerDirectory::workerLeft);
    BeaconSender sender(key, {"127.0.0.1", dir.port()}, [] { return sample("http://127.0.0.1:9100"); }, 0.2);
    sender.start();
    QTRY_COMPARE_WITH_TIMEOUT(joined.count(), 1, 10000);
    QCOMPARE(joined.at(0).at(0).toString(), QString("http://127.0.0.1:9100"));
    QCOMPARE(dir.workers().size(), size_t(1));

    // A forged beacon (wrong key) for another URL is counted as rejected and never listed.
    QUdpSocket forger;
    const std::string forged = sign_beacon(sample("http://127.0.0.1:9666"), beacon_key("not-the-token"));
    forger.writeDatagram(forged.data(), static_cast<qint64>(forged.size()), QHostAddress::LocalHost, dir.port());
    QTRY_VERIFY_WITH_TIMEOUT(dir.rejected() >= 1, 10000);
    QCOMPARE(dir.last_rejection(), std::string("bad signature"));
    QCOMPARE(dir.workers().size(), size_t(1));

    // Several beacons of one worker are one worker.
    QTRY_VERIFY_WITH_TIMEOUT(sender.sent() >= 3, 10000);
    QCOMPARE(joined.count(), 1);
    sender.stop();
    QTRY_COMPARE_WITH_TIMEOUT(left.count(), 1, 10000);
    QCOMPARE(left.at(0).at(0).toString(), QString("http://127.0.0.1:9100"));
    QVERIFY(dir.workers().empty());
  }

  // The worker side: an announcer on its own thread; a worker listening on 0.0.0.0 is listed at
  // the address its beacons come from.
  void announcerThreadIsHeardAtItsSourceAddress() {
    WorkerDirectory dir(beacon_key(kToken), {"127.0.0.1", 0}, 5.0);
    QSignalSpy joined(&dir, &WorkerDirectory::workerJoined);
    {
      WorkerAnnouncer announcer(kToken, "127.0.0.1:" + std::to_string(dir.port()),
                                [] { return sample("http://0.0.0.0:9200"); }, 0.2);
      QTRY_COMPARE_WITH_TIMEOUT(joined.count(), 1, 10000);
      QTRY_VERIFY_WITH_TIMEOUT(announcer.sent() >= 2, 10000);
    }  // stops and joins its thread
    QCOMPARE(joined.at(0).at(0).toString(), QString("http://127.0.0.1:9200"));
    // The beacon a worker builds from its status (the shape of WorkerServer::status_json()).
    const Beacon fromStatus = beacon_from_status(
        {{"name", "w7"}, {"url", "http://127.0.0.1:8000"}, {"model_fingerprint", "abcd"}, {"devices", {"cpu", "cuda:0"}},
         {"version", "0.1"}, {"load", {{"queued", 2}, {"running", 3}, {"connections", 9}}}});
    QCOMPARE(fromStatus.name, std::string("w7"));
    QCOMPARE(fromStatus.model, std::string("abcd"));
    QCOMPARE(fromStatus.devices, std::string("cpu, cuda:0"));
    QCOMPARE(fromStatus.load, 5.0);
    CHECK_ERROR_CONTAINS(grpo::testing::error_of([] { WorkerAnnouncer bad(kToken, "nohost", [] { return Beacon{}; }); }),
                         "--announce");
  }
};

QTEST_GUILESS_MAIN(TestBeacon)
#include "test_beacon.moc"
