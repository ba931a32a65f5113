// Shared HTTP pieces of the Hub client (see hub_http.h).
#include "core/hub/hub_http.h"

#include <memory>

#include <QCoreApplication>
#include <QEventLoop>
#include <QIODevice>
#include <QNetworkAccessManager>
#include <QUrl>

#include "core/common/error.h"
#include "core/common/json_limits.h"
#include "core/common/strings.h"
#include "core/hub/hf_cache.h"

namespace grpo::hub {

std::string checked_endpoint(const std::string& endpoint) {
  std::string e = endpoint.empty() ? hub_endpoint() : endpoint;
  while (!e.empty() && e.back() == '/') e.pop_back();
  const QUrl ep(QString::fromStdString(e));
  if (e.size() <= 2048 && ep.isValid() && (ep.scheme() == "https" || ep.scheme() == "http") && !ep.host().isEmpty())
    return e;
  std::string shown = "\"";  // built step by step: GCC 12 misreads "\"" + e.substr(...) as an overlapping copy
  shown.append(e, 0, 200);
  shown += "\" is not an http(s) URL";
  throw Error("HF_ENDPOINT", shown);
}

std::string checked_token(const std::optional<std::string>& token) {
  std::string t = token ? *token : hub_token().value_or("");
  check(t.size() <= 4096, "token", "is longer than any Hugging Face token", "check HF_TOKEN or the token file");
  for (char c : t)
    check(c > ' ' && c < 127, "token", "has characters a token cannot have",
          "check HF_TOKEN or the token file (HF_TOKEN_PATH, default $HF_HOME/token)");
  return t;
}

QNetworkRequest hub_request(const QString& url, const std::string& token, int idle_timeout_ms) {
  QNetworkRequest r{QUrl::fromEncoded(url.toUtf8(), QUrl::StrictMode)};
  r.setAttribute(QNetworkRequest::RedirectPolicyAttribute, QNetworkRequest::ManualRedirectPolicy);
  r.setTransferTimeout(idle_timeout_ms);
  r.setRawHeader("User-Agent", "grpo-studio; hf_hub-compatible");
  r.setRawHeader("Accept-Encoding", "identity");
  if (!token.empty()) r.setRawHeader("Authorization", QByteArray("Bearer ") + token.c_str());
  return r;
}

int http_status(QNetworkReply* r) { return r->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt(); }

std::optional<uint64_t> parse_decimal_size(const QByteArray& v) {
  const std::string s = trim(v.toStdString());
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

std::string url_for_message(const QString& url) {
  const QUrl u(url);
  if (!u.isValid()) return "(an invalid URL)";
  return u.toString(QUrl::RemoveQuery | QUrl::RemoveFragment | QUrl::RemoveUserInfo).left(300).toStdString();
}

bool same_origin(const QString& a, const QString& b) {
  const QUrl x(a), y(b);
  return x.scheme() == y.scheme() && x.host() == y.host() && x.port(x.scheme() == "https" ? 443 : 80) ==
                                                                  y.port(y.scheme() == "https" ? 443 : 80);
}

QByteArray HttpAnswer::header(const QByteArray& name) const {
  const QByteArray want = name.toLower();
  for (const auto& [k, v] : headers)
    if (k.toLower() == want) return v;
  return {};
}

HttpAnswer http_exchange(QNetworkAccessManager& nam, const HttpExchange& x) {
  check(QCoreApplication::instance() != nullptr, "hub", "internal: no QCoreApplication for the network");
  QEventLoop loop;
  QNetworkReply* r = nullptr;
  if (x.verb == "GET") r = nam.get(x.request);
  else if (x.verb == "HEAD") r = nam.head(x.request);
  else if (x.device) r = nam.sendCustomRequest(x.request, x.verb, x.device);
  else r = nam.sendCustomRequest(x.request, x.verb, x.body);
  std::unique_ptr<QNetworkReply, void (*)(QNetworkReply*)> hold(r, [](QNetworkReply* p) { p->deleteLater(); });
  HttpAnswer a;
  a.url = x.request.url();
  QObject::connect(r, &QNetworkReply::readyRead, r, [&] {
    const QByteArray chunk = r->readAll();
    if (a.too_large) return;
    if (static_cast<size_t>(a.body.size()) + static_cast<size_t>(chunk.size()) > x.max_answer_bytes) {
      a.too_large = true;
      a.body.clear();
      r->abort();
      return;
    }
    a.body += chunk;
  });
  if (x.on_sent)
    QObject::connect(r, &QNetworkReply::uploadProgress, r, [&](qint64 sent, qint64) {
      if (sent > 0) x.on_sent(static_cast<uint64_t>(sent));
    });
  QObject::connect(r, &QNetworkReply::finished, &loop, &QEventLoop::quit);
  if (!r->isFinished()) loop.exec();
  if (!a.too_large) {
    const QByteArray rest = r->readAll();
    if (static_cast<size_t>(a.body.size()) + static_cast<size_t>(rest.size()) > x.max_answer_bytes) {
      a.too_large = true;
      a.body.clear();
    } else {
      a.body += rest;
    }
  }
  a.status = http_status(r);
  a.error = r->error();
  a.error_string = r->errorString().toStdString();
  for (const auto& p : r->rawHeaderPairs()) a.headers.push_back(p);
  return a;
}

void rethrow_without_token(const Error& e, const std::string& token) {
  if (token.empty() || std::string(e.what()).find(token) == std::string::npos) throw;
  auto redact = [&token](std::string s) {
    for (size_t at = s.find(token); at != std::string::npos; at = s.find(token, at)) s.replace(at, token.size(), "<token>");
    return s;
  };
  throw Error(redact(e.context()), redact(e.message()), redact(e.hint()));
}

nlohmann::json parse_answer_json(const QByteArray& text, const std::string& what, size_t max_bytes, int max_depth) {
  check(static_cast<size_t>(text.size()) <= max_bytes, what,
        "is larger than " + format_bytes(double(max_bytes)), "is HF_ENDPOINT a Hugging Face Hub?");
  const std::string_view view(text.constData(), static_cast<size_t>(text.size()));
  check(json_depth(view, max_depth) <= max_depth, what,
        "nests deeper than " + std::to_string(max_depth) + " levels", "is HF_ENDPOINT a Hugging Face Hub?");
  nlohmann::json j = nlohmann::json::parse(view, nullptr, false);
  check(!j.is_discarded(), what, "is not JSON (\"" + text.left(80).toStdString() + "\")",
        "is HF_ENDPOINT a Hugging Face Hub?");
  return j;
}

std::string describe_answer(const HttpAnswer& a, const std::string& endpoint) {
  if (a.status == 0) {
    // A storage URL the Hub handed out (LFS uploads) is not HF_ENDPOINT: name its origin instead.
    if (!a.url.isEmpty() && !same_origin(a.url.toString(), QString::fromStdString(endpoint)))
      return a.error_string + " (the Hub's storage at " +
             a.url.adjusted(QUrl::RemovePath | QUrl::RemoveQuery | QUrl::RemoveFragment | QUrl::RemoveUserInfo)
                 .toString()
                 .toStdString() +
             ")";
    return a.error_string + " (is " + endpoint + " reachable? HF_ENDPOINT sets another)";
  }
  std::string msg = a.header("X-Error-Message").left(300).toStdString();
  if (msg.empty() && !a.body.isEmpty() && a.body.size() < 65536) {
    const auto j = nlohmann::json::parse(a.body.constData(), a.body.constData() + a.body.size(), nullptr, false);
    if (j.is_object() && j.contains("error") && j["error"].is_string()) msg = j["error"].get<std::string>().substr(0, 300);
  }
  for (auto& c : msg)
    if (static_cast<unsigned char>(c) < ' ') c = ' ';
  std::string s = "HTTP " + std::to_string(a.status) + (msg.empty() ? "" : " (" + msg + ")");
  if (a.too_large) s += ", with an answer too large to read";
  return s;
}

}  // namespace grpo::hub
