// WorkerClient: the request/response shapes of docs/workers.md over QNetworkAccessManager.
#include "core/common/json_limits.h"
#include "core/cluster/worker_client.h"

#include <QEventLoop>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QNetworkRequest>
#include <QUrl>

#include <algorithm>
#include <cmath>

#include "core/common/error.h"

namespace grpo::cluster {

nlohmann::json completion_request_json(const CompletionRequest& r) {
  nlohmann::json j = {{"model", r.model}, {"prompt", r.prompt}, {"n", r.n}, {"max_tokens", r.max_tokens},
                      {"temperature", r.temperature}, {"top_p", r.top_p}, {"logprobs", 0},
                      {"return_token_ids", true}};
  if (r.top_k > 0) j["top_k"] = r.top_k;
  if (r.min_p > 0) j["min_p"] = r.min_p;
  if (r.repetition_penalty != 1.0) j["repetition_penalty"] = r.repetition_penalty;
  if (r.seed) j["seed"] = *r.seed;
  if (!r.stop_token_ids.empty()) j["stop_token_ids"] = r.stop_token_ids;
  if (!r.stop.empty()) j["stop"] = r.stop;
  return j;
}

namespace {

// The member `key` of `obj`, which must be there. A pointer, not a reference: callers pass
// temporaries for `key` and `path`, and a returned reference next to them reads as dangling to
// GCC 14's -Wdangling-reference (the member lives in `obj`, which outlives the call).
const nlohmann::json* field(const nlohmann::json& obj, const std::string& key, const std::string& where,
                            const std::string& path) {
  if (!obj.is_object() || !obj.contains(key))
    throw Error(where, "completion response: missing field " + path + key,
                "the worker must answer in vLLM's CompletionResponse shape with return_token_ids");
  return &obj[key];
}

[[noreturn]] void wrong_type(const std::string& where, const std::string& path, const std::string& expected) {
  throw Error(where, "completion response: field " + path + " is not " + expected);
}

}  // namespace

CompletionResponse parse_completion_response(const std::string& body, const std::string& where) {
  check_json_depth(body, where);
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw Error(where, "completion response is not a JSON object: " + body.substr(0, 200));
  CompletionResponse out;
  const auto& model = *field(j, "model", where, "");
  if (!model.is_string()) wrong_type(where, "model", "a string");
  out.model = model.get<std::string>();
  const auto& choices = *field(j, "choices", where, "");
  if (!choices.is_array() || choices.empty()) wrong_type(where, "choices", "a non-empty array");
  int64_t tokens = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    const auto& c = choices[i];
    const std::string p = "choices[" + std::to_string(i) + "].";
    CompletionChoice ch;
    ch.index = c.is_object() && c.contains("index") && c["index"].is_number_integer() ? c["index"].get<int64_t>()
                                                                                      : static_cast<int64_t>(i);
    const auto& ids = *field(c, "token_ids", where, p);
    if (!ids.is_array()) wrong_type(where, p + "token_ids", "an array of token ids (send return_token_ids: true)");
    for (const auto& t : ids) {
      if (!t.is_number_integer()) wrong_type(where, p + "token_ids[]", "an integer");
      ch.token_ids.push_back(t.get<int64_t>());
    }
    const auto& lp = *field(c, "logprobs", where, p);
    if (!lp.is_object()) wrong_type(where, p + "logprobs", "an object (send logprobs: 0)");
    const auto& tl = *field(lp, "token_logprobs", where, p + "logprobs.");
    if (!tl.is_array()) wrong_type(where, p + "logprobs.token_logprobs", "an array");
    for (const auto& v : tl) {
      // vLLM writes -inf as -9999.0 or null for impossible tokens; keep them as -inf.
      if (v.is_null()) ch.logprobs.push_back(-INFINITY);
      else if (v.is_number()) ch.logprobs.push_back(v.get<double>());
      else wrong_type(where, p + "logprobs.token_logprobs[]", "a number");
    }
    if (ch.logprobs.size() != ch.token_ids.size())
      throw Error(where, "completion response: " + p + "logprobs.token_logprobs has " +
                             std::to_string(ch.logprobs.size()) + " entries, token_ids has " +
                             std::to_string(ch.token_ids.size()),
                  "token_logprobs[i] must align with token_ids[i]");
    const auto& fr = *field(c, "finish_reason", where, p);
    ch.finish_reason = fr.is_string() ? fr.get<std::string>() : "";
    tokens += static_cast<int64_t>(ch.token_ids.size());
    out.choices.push_back(std::move(ch));
  }
  std::sort(out.choices.begin(), out.choices.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
  out.completion_tokens = tokens;
  if (j.contains("usage") && j["usage"].is_object() && j["usage"].contains("completion_tokens") &&
      j["usage"]["completion_tokens"].is_number_integer())
    out.completion_tokens = j["usage"]["completion_tokens"].get<int64_t>();
  // Our worker's addition (grpo worker): which weights produced the answer, as
  // "grpo": {"adapter": name, "sha256": hex}; vLLM sends nothing like it.
  if (j.contains("grpo") && j["grpo"].is_object() && j["grpo"].contains("sha256") && j["grpo"]["sha256"].is_string())
    out.adapter_sha256 = j["grpo"]["sha256"].get<std::string>();
  return out;
}

std::string HttpResult::describe() const {
  if (status == 0) return timed_out ? "timed out" : (error.empty() ? "no response" : error);
  std::string head = body.substr(0, 300);
  return "HTTP " + std::to_string(status) + (head.empty() ? "" : ": " + head);
}

WorkerClient::WorkerClient(QNetworkAccessManager* nam, std::string base_url, std::string token, TlsPins pins)
    : nam_(nam), url_(std::move(base_url)), token_(std::move(token)), pins_(std::move(pins)) {
  while (!url_.empty() && url_.back() == '/') url_.pop_back();
  const QUrl u(QString::fromStdString(url_));
  check(u.isValid() && (u.scheme() == "http" || u.scheme() == "https") && !u.host().isEmpty(), "worker url",
        "'" + url_ + "' is not an http(s)://HOST:PORT URL", "e.g. http://10.0.0.5:8000");
}

QNetworkReply* WorkerClient::get(const std::string& path, double timeout_s, Callback done) {
  return start("GET", path, "", timeout_s, std::move(done));
}

QNetworkReply* WorkerClient::post(const std::string& path, const nlohmann::json& body, double timeout_s,
                                  Callback done) {
  return start("POST", path, body.dump(), timeout_s, std::move(done));
}

QNetworkReply* WorkerClient::start(const std::string& method, const std::string& path, const std::string& body,
                                   double timeout_s, Callback done) {
  QNetworkRequest req(QUrl(QString::fromStdString(url_ + path)));
  req.setRawHeader("Authorization", QByteArray::fromStdString("Bearer " + token_));
  req.setHeader(QNetworkRequest::ContentTypeHeader, "application/json");
  req.setTransferTimeout(std::max(1, static_cast<int>(timeout_s * 1000)));
  QNetworkReply* reply = send_request(*nam_, req, QByteArray::fromStdString(method), QByteArray::fromStdString(body), pins_);
  QObject::connect(reply, &QNetworkReply::finished, reply, [reply, done = std::move(done)] {
    HttpResult r;
    r.status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
    if (reply->isOpen()) r.body = reply->readAll().toStdString();
    if (r.status == 0) {
      r.error = network_error(reply);
      r.timed_out = tls_refusal(reply).empty() && (reply->error() == QNetworkReply::TimeoutError ||
                                                   reply->error() == QNetworkReply::OperationCanceledError);
    }
    reply->deleteLater();
    done(r);
  });
  return reply;
}

HttpResult WorkerClient::get_sync(const std::string& path, double timeout_s) {
  QEventLoop loop;
  HttpResult out;
  get(path, timeout_s, [&](const HttpResult& r) { out = r; loop.quit(); });
  loop.exec();
  return out;
}

HttpResult WorkerClient::post_sync(const std::string& path, const nlohmann::json& body, double timeout_s) {
  QEventLoop loop;
  HttpResult out;
  post(path, body, timeout_s, [&](const HttpResult& r) { out = r; loop.quit(); });
  loop.exec();
  return out;
}

}  // namespace grpo::cluster
