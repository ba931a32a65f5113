// Discovery beacons (docs/workers.md, "Discovery beacons"): a small JSON announcement a worker
// sends over UDP every few seconds, signed with HMAC-SHA256 under a key derived from the cluster
// token. A beacon is accepted only when its signature matches, its nonce has not been seen before
// (replay) and its time is within the allowed skew of ours (stale or from the future).
//
// Wire form (one datagram): {"grpo_beacon":1,"payload":"<JSON text>","sig":"<hex HMAC of payload>"}
// The payload text is signed byte for byte, so no re-serialisation can change what was signed.
#pragma once

#include <cstdint>
#include <deque>
#include <set>
#include <string>

namespace grpo::cluster {

struct Beacon {
  std::string name;          // worker name (--name, default host name)
  std::string url;           // http://host:port the worker serves on
  std::string model;         // model fingerprint (e.g. a hash of config.json + weights index)
  std::string devices;       // e.g. "cpu x16" or "cuda:0 NVIDIA H200"
  std::string version;       // grpo version string
  double load = 0;           // in-flight requests (or any non-negative load figure)
  double time = 0;           // sender's wall time, seconds since the epoch
  std::string nonce;         // random per beacon (hex)
};

// HMAC-SHA256(token, "grpo-studio beacon v1"): the beacon key never equals the bearer token, so
// a captured signature reveals nothing usable as the HTTP credential.
std::string beacon_key(const std::string& cluster_token);

// Signs `b` (a fresh nonce is made when b.nonce is empty) and returns the datagram bytes.
std::string sign_beacon(Beacon b, const std::string& key);

// Checks beacons: signature, freshness and replay. Not thread-safe (one owner).
class BeaconVerifier {
public:
  explicit BeaconVerifier(std::string key, double max_skew_s = 30.0);
  // Returns true and fills `out` for a valid beacon; otherwise false and `why` says which rule
  // refused it ("unsigned", "bad signature", "replayed", "stale", "malformed: ...").
  bool verify(const std::string& datagram, double now_s, Beacon& out, std::string& why);

private:
  std::string key_;
  double max_skew_s_;
  std::set<std::string> seen_;            // nonces inside the skew window
  std::deque<std::pair<double, std::string>> seen_order_;  // (time, nonce), oldest first
};

}  // namespace grpo::cluster
