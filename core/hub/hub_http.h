// What `grpo download` and `grpo push` share about talking to the Hub over QtNetwork: the endpoint
// and token as huggingface_hub reads them (checked before any request), the request every call
// starts from (User-Agent, no compression, an idle timeout, redirects by hand, the token only
// where it may go), one blocking exchange with a bound on the answer, bounded JSON, and the
// Hub's error headers (X-Error-Code, X-Error-Message) turned into words.
// Qt-only (grpo_hub_net); no torch.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <QByteArray>
#include <QList>
#include <QNetworkReply>
#include <QNetworkRequest>
#include <QPair>
#include <QString>
#include <QUrl>

#include <nlohmann/json.hpp>

#include "core/common/error.h"

class QIODevice;
class QNetworkAccessManager;

namespace grpo::hub {

// `endpoint` ("" = hub_endpoint(), i.e. HF_ENDPOINT) without trailing '/', checked to be an
// http(s) URL with a host. Throws grpo::Error naming HF_ENDPOINT.
std::string checked_endpoint(const std::string& endpoint);
// `token` (nullopt = hub_token(): HF_TOKEN, then the token file), checked for characters a
// header cannot carry. The value is never part of an error message.
std::string checked_token(const std::optional<std::string>& token);
// Throws `e` again with every occurrence of `token` replaced by "<token>": a server may echo what it
// was sent (the Authorization header) in an error message or a body we quote. Call it from the
// handler of `e`; an empty token or one that is not in the message rethrows `e` as it is.
[[noreturn]] void rethrow_without_token(const Error& e, const std::string& token);

// A request to `url` (already encoded): manual redirects, an idle timeout, our User-Agent,
// Accept-Encoding identity, and "Authorization: Bearer <token>" when `token` is not empty.
QNetworkRequest hub_request(const QString& url, const std::string& token, int idle_timeout_ms);

int http_status(QNetworkReply* r);

// A decimal byte count from a header ("1234"); nullopt for anything else (sign, spaces inside,
// more than 19 digits).
std::optional<uint64_t> parse_decimal_size(const QByteArray& v);

// scheme://host[:port]/path of a URL, without its query (a presigned storage URL's signature
// stays out of messages).
std::string url_for_message(const QString& url);
// Whether `b` is the same origin (scheme, host, port) as `a`: the token goes only there.
bool same_origin(const QString& a, const QString& b);

// One HTTP exchange, blocking in a local event loop (needs a QCoreApplication in the process).
struct HttpExchange {
  QByteArray verb = "GET";
  QNetworkRequest request;
  QByteArray body;                  // sent when `device` is null (and verb is not GET/HEAD)
  QIODevice* device = nullptr;      // an open, seekable body (a file or a slice of one)
  size_t max_answer_bytes = 1u << 20;  // a longer answer is cut off: too_large
  std::function<void(uint64_t sent)> on_sent;  // body bytes sent so far
};
struct HttpAnswer {
  int status = 0;                   // 0: no HTTP status (connection refused, cut, timed out)
  QNetworkReply::NetworkError error = QNetworkReply::NoError;
  std::string error_string;         // Qt's words for `error`
  QByteArray body;
  bool too_large = false;
  QList<QPair<QByteArray, QByteArray>> headers;
  QUrl url;                         // where the request went (the Hub, or a storage URL it named)
  QByteArray header(const QByteArray& name) const;  // case-insensitive; "" when absent
  // No HTTP answer, or an answer cut short: worth another try on an idempotent call.
  bool transport_failed() const { return status == 0 || (error != QNetworkReply::NoError && status < 300 && !too_large); }
};
HttpAnswer http_exchange(QNetworkAccessManager& nam, const HttpExchange& x);

// `text` as a JSON value, refusing a body over `max_bytes`, nested deeper than `max_depth`, or
// not JSON: grpo::Error naming `what` ("the preupload answer").
nlohmann::json parse_answer_json(const QByteArray& text, const std::string& what, size_t max_bytes, int max_depth);

// The Hub's own words for a failed answer: "HTTP 404 (Repository not found)" from the status,
// X-Error-Message (or a JSON body's "error" string), cut to 300 characters; for status 0 the
// network error and a hint about HF_ENDPOINT.
std::string describe_answer(const HttpAnswer& a, const std::string& endpoint);

}  // namespace grpo::hub
