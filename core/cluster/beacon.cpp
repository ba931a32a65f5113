// Beacon signing and verification (HMAC-SHA256 through QMessageAuthenticationCode).
#include "core/common/json_limits.h"
#include "core/cluster/beacon.h"

#include <QByteArray>
#include <QCryptographicHash>
#include <QMessageAuthenticationCode>
#include <QRandomGenerator>

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/cluster/cluster_token.h"

namespace grpo::cluster {
namespace {

QByteArray to_qba(const std::string& s) { return QByteArray(s.data(), static_cast<qsizetype>(s.size())); }

std::string hmac_hex(const std::string& key, const std::string& data) {
  return QMessageAuthenticationCode::hash(to_qba(data), to_qba(key), QCryptographicHash::Sha256).toHex().toStdString();
}

std::string random_hex(int bytes) {
  QByteArray b(bytes, Qt::Uninitialized);
  for (int i = 0; i < bytes; ++i) b[i] = static_cast<char>(QRandomGenerator::system()->bounded(256));
  return b.toHex().toStdString();
}

}  // namespace

std::string beacon_key(const std::string& cluster_token) {
  return QMessageAuthenticationCode::hash("grpo-studio beacon v1", to_qba(cluster_token), QCryptographicHash::Sha256)
      .toStdString();
}

std::string sign_beacon(Beacon b, const std::string& key) {
  if (b.nonce.empty()) b.nonce = random_hex(16);
  const nlohmann::json payload = {{"name", b.name}, {"url", b.url}, {"model", b.model}, {"devices", b.devices},
                                  {"version", b.version}, {"load", b.load}, {"time", b.time}, {"nonce", b.nonce}};
  const std::string text = payload.dump();
  return nlohmann::json{{"grpo_beacon", 1}, {"payload", text}, {"sig", hmac_hex(key, text)}}.dump();
}

BeaconVerifier::BeaconVerifier(std::string key, double max_skew_s) : key_(std::move(key)), max_skew_s_(max_skew_s) {}

bool BeaconVerifier::verify(const std::string& datagram, double now_s, Beacon& out, std::string& why) {
  if (json_depth(datagram) > kMaxJsonDepth) {
    why = "malformed: nested deeper than " + std::to_string(kMaxJsonDepth) + " levels";
    return false;
  }
  nlohmann::json outer = nlohmann::json::parse(datagram, nullptr, false);
  if (outer.is_discarded() || !outer.is_object() || !outer.contains("payload") || !outer["payload"].is_string()) {
    why = "malformed: not a beacon datagram";
    return false;
  }
  if (!outer.contains("sig") || !outer["sig"].is_string() || outer["sig"].get<std::string>().empty()) {
    why = "unsigned";
    return false;
  }
  const std::string text = outer["payload"].get<std::string>();
  if (!tokens_equal(hmac_hex(key_, text), outer["sig"].get<std::string>())) {
    why = "bad signature";
    return false;
  }
  nlohmann::json p = json_depth(text) > kMaxJsonDepth ? nlohmann::json(nlohmann::json::value_t::discarded)
                                                      : nlohmann::json::parse(text, nullptr, false);
  Beacon b;
  try {
    if (p.is_discarded() || !p.is_object()) throw std::runtime_error("payload is not a JSON object");
    b.name = p.at("name").get<std::string>();
    b.url = p.at("url").get<std::string>();
    b.model = p.value("model", "");
    b.devices = p.value("devices", "");
    b.version = p.value("version", "");
    b.load = p.value("load", 0.0);
    b.time = p.at("time").get<double>();
    b.nonce = p.at("nonce").get<std::string>();
  } catch (const std::exception& e) {
    why = std::string("malformed: ") + e.what();
    return false;
  }
  if (!std::isfinite(b.time) || std::fabs(now_s - b.time) > max_skew_s_) {
    why = "stale";
    return false;
  }
  // Forget nonces older than the window: a beacon that old is refused as stale anyway.
  while (!seen_order_.empty() && seen_order_.front().first < now_s - 2 * max_skew_s_) {
    seen_.erase(seen_order_.front().second);
    seen_order_.pop_front();
  }
  if (seen_.count(b.nonce)) {
    why = "replayed";
    return false;
  }
  seen_.insert(b.nonce);
  seen_order_.emplace_back(now_s, b.nonce);
  out = std::move(b);
  return true;
}

}  // namespace grpo::cluster
