// Tests' HTTP client: one raw HTTP/1.1 request on its own loopback connection, so paths such as
// /grpo/bucket/../x reach the server unnormalised. Every wait is bounded (10 s).
#pragma once

#include <QByteArray>
#include <QTcpSocket>

#include <chrono>

#include <nlohmann/json.hpp>

namespace grpo::testing {

struct Http {
  int status = 0;
  QByteArray body;
  nlohmann::json j() const { return nlohmann::json::parse(body.toStdString(), nullptr, false); }
};

// One request on its own connection ("Connection: close"); every wait bounded (10 s).
inline Http request(int port, const QByteArray& method, const QByteArray& path, const QByteArray& token,
                    const QByteArray& body = {}) {
  Http r;
  QTcpSocket s;
  s.connectToHost("127.0.0.1", port);
  if (!s.waitForConnected(10000)) return r;
  QByteArray req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!token.isEmpty()) req += "Authorization: Bearer " + token + "\r\n";
  if (method == "POST") req += "Content-Type: application/json\r\nContent-Length: " + QByteArray::number(body.size()) + "\r\n";
  req += "\r\n" + body;
  s.write(req);
  QByteArray in;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (s.bytesAvailable() == 0 && !s.waitForReadyRead(200) && s.state() != QAbstractSocket::ConnectedState) break;
    in += s.readAll();
  }
  in += s.readAll();
  const int sp = in.indexOf(' '), head_end = in.indexOf("\r\n\r\n");
  if (sp < 0 || head_end < 0) return r;
  r.status = in.mid(sp + 1, 3).toInt();
  r.body = in.mid(head_end + 4);
  return r;
}

}  // namespace grpo::testing
