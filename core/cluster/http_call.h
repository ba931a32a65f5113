// One blocking HTTP request with the cluster token and a deadline, on the calling thread (its own
// QEventLoop; the thread needs no running loop, the process a QCoreApplication): what a worker's
// join heartbeat (worker_joiner.h) and `grpo workers` send to a trainer's endpoint. The answer's
// body is read up to max_body_bytes.
#pragma once

#include <cstddef>
#include <string>

class QNetworkAccessManager;

namespace grpo::cluster {

struct HttpCallResult {
  int status = 0;     // 0: no HTTP answer (refused, timed out, TLS failed: see error)
  std::string body;
  std::string error;  // "" for a 2xx answer; otherwise why not, with the start of the body
  bool ok() const { return error.empty(); }
};

HttpCallResult http_call(QNetworkAccessManager& nam, const std::string& method, const std::string& url,
                         const std::string& token, const std::string& body = {}, double timeout_s = 10,
                         size_t max_body_bytes = 1 << 20);

}  // namespace grpo::cluster
