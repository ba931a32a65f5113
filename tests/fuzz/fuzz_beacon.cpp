// Fuzz target: discovery beacons. Odd first byte: the input is a raw datagram (what anyone on
// the network can send). Even: the input is a payload signed with the test key, so the fuzzer
// also reaches the parser behind the signature check (what a holder of the key can send).
#include <QByteArray>
#include <QCryptographicHash>
#include <QMessageAuthenticationCode>

#include <nlohmann/json.hpp>

#include "core/cluster/beacon.h"
#include "tests/fuzz/fuzz_target.h"

FUZZ_BODY({
  using namespace grpo::cluster;
  if (input.empty()) return 0;
  static const std::string key = beacon_key("fuzz-cluster-token");
  BeaconVerifier verifier(key, 30.0);
  Beacon out;
  std::string why;
  const std::string rest = input.substr(1);
  if (input[0] & 1) {
    verifier.verify(rest, 1.7e9, out, why);
  } else {
    // Sign the fuzzer's payload text (made valid UTF-8, as a JSON string must be) with the key.
    const auto safe = nlohmann::json(rest).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    const std::string text = nlohmann::json::parse(safe).get<std::string>();
    const std::string sig = QMessageAuthenticationCode::hash(QByteArray::fromStdString(text),
                                                             QByteArray::fromStdString(key), QCryptographicHash::Sha256)
                                .toHex()
                                .toStdString();
    const nlohmann::json datagram = {{"grpo_beacon", 1}, {"payload", text}, {"sig", sig}};
    verifier.verify(datagram.dump(), 1.7e9, out, why);
  }
})
