// WorkerClient: HTTP to one rollout worker (`grpo worker` or a vLLM server) with the request and
// response shapes of docs/workers.md ("Completion request", "Completion response"): POST
// /v1/completions with token-id prompts, `n`, `logprobs: 0` and `return_token_ids`; load/unload of
// LoRA adapters; /health; /v1/models; /pause; /resume. Every request carries `Authorization: Bearer
// <cluster token>` and a transfer timeout. https:// URLs work; `pins` (tls.h) make a self-signed
// worker certificate with one of those fingerprints trusted.
//
// Calls are asynchronous (a callback runs in the thread that owns the QNetworkAccessManager, from
// its event loop); call_sync() runs a local event loop for callers that want to block. The
// parsing functions are free functions so tests can feed them the documented example verbatim.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cluster/tls.h"

class QNetworkAccessManager;
class QNetworkReply;

namespace grpo::cluster {

struct CompletionRequest {
  std::string model;                  // "policy-v<N>" or the base model id
  std::vector<int64_t> prompt;        // token ids
  int64_t max_tokens = 16;
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = -1;                 // -1: off (sent only when > 0)
  double min_p = 0.0;                 // sent only when > 0
  double repetition_penalty = 1.0;    // sent only when != 1
  std::optional<uint64_t> seed;
  int64_t n = 1;
  std::vector<int64_t> stop_token_ids;  // EOS ids (vLLM extra)
  std::vector<std::string> stop;        // stop strings
  // Not sent: requests with the same non-empty key go to one worker while it is up and within the
  // router's imbalance (a GRPO group: its latency is then one worker's, not the slowest's).
  std::string affinity;
};

struct CompletionChoice {
  int64_t index = 0;
  std::vector<int64_t> token_ids;
  std::vector<double> logprobs;       // logprobs.token_logprobs, aligned with token_ids
  std::string finish_reason;          // "stop" | "length" | ...
};

struct CompletionResponse {
  std::string model;
  std::vector<CompletionChoice> choices;  // sorted by index
  int64_t completion_tokens = 0;          // usage.completion_tokens (sum of token_ids when absent)
  std::string adapter_sha256;             // grpo.sha256: the weights hash the worker reports ("" = none)
};

// The body TRL's rollout worker sends (docs/workers.md, "Completion request").
nlohmann::json completion_request_json(const CompletionRequest& r);
// Parses a /v1/completions response; throws grpo::Error naming `where` (the worker URL) and the
// field that is missing or has the wrong type.
CompletionResponse parse_completion_response(const std::string& body, const std::string& where);

struct HttpResult {
  int status = 0;            // HTTP status; 0 when no response came (refused, reset, timeout)
  std::string body;
  std::string error;         // transport error text ("" when a response came; TLS: names URL and fingerprints)
  bool timed_out = false;
  bool ok() const { return status >= 200 && status < 300; }
  std::string describe() const;  // "HTTP 404: <body head>" or "connection refused" etc.
};

class WorkerClient {
public:
  // `nam` must live in the calling thread and outlive the client.
  WorkerClient(QNetworkAccessManager* nam, std::string base_url, std::string token, TlsPins pins = {});
  const std::string& url() const { return url_; }

  using Callback = std::function<void(const HttpResult&)>;
  // Starts a request; returns the reply so the caller can abort() it. `done` runs exactly once.
  QNetworkReply* get(const std::string& path, double timeout_s, Callback done);
  QNetworkReply* post(const std::string& path, const nlohmann::json& body, double timeout_s, Callback done);

  // Blocking forms: run a local event loop until the answer comes.
  HttpResult get_sync(const std::string& path, double timeout_s);
  HttpResult post_sync(const std::string& path, const nlohmann::json& body, double timeout_s);

private:
  QNetworkReply* start(const std::string& method, const std::string& path, const std::string& body,
                       double timeout_s, Callback done);
  QNetworkAccessManager* nam_;
  std::string url_, token_;
  TlsPins pins_;
};

}  // namespace grpo::cluster
