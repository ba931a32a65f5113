// http_call (http_call.h): one request on the caller's thread, with a deadline.
#include "core/cluster/http_call.h"

#include <QEventLoop>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QNetworkRequest>
#include <QTimer>
#include <QUrl>

namespace grpo::cluster {

HttpCallResult http_call(QNetworkAccessManager& nam, const std::string& method, const std::string& url,
                         const std::string& token, const std::string& body, double timeout_s, size_t max_body_bytes) {
  QNetworkRequest req(QUrl(QString::fromStdString(url)));
  if (!body.empty()) req.setHeader(QNetworkRequest::ContentTypeHeader, "application/json");
  if (!token.empty()) req.setRawHeader("Authorization", QByteArray::fromStdString("Bearer " + token));
  const int ms = static_cast<int>(timeout_s * 1000);
  req.setTransferTimeout(ms);
  QNetworkReply* reply = nam.sendCustomRequest(req, QByteArray::fromStdString(method), QByteArray::fromStdString(body));
  QEventLoop loop;
  QObject::connect(reply, &QNetworkReply::finished, &loop, &QEventLoop::quit);
  QTimer::singleShot(ms + 500, &loop, &QEventLoop::quit);
  if (!reply->isFinished()) loop.exec();
  HttpCallResult r;
  if (!reply->isFinished()) {
    reply->abort();
    r.error = "no answer within " + std::to_string(static_cast<int>(timeout_s)) + " s";
  } else {
    r.status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
    r.body = reply->read(static_cast<qint64>(max_body_bytes)).toStdString();
    if (r.status < 200 || r.status >= 300)
      r.error = (r.status ? "HTTP " + std::to_string(r.status) : reply->errorString().toStdString()) + ": " +
                r.body.substr(0, 512);
  }
  reply->deleteLater();
  return r;
}

}  // namespace grpo::cluster
