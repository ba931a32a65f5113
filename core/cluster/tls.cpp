// TLS helpers shared by every server and client of the cluster (see tls.h).
#include "core/cluster/tls.h"

#include <algorithm>

#include <QCryptographicHash>
#include <QList>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QNetworkRequest>
#include <QSslCertificate>
#include <QSslConfiguration>
#include <QSslError>
#include <QSslKey>
#include <QSslSocket>
#include <QStringList>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/strings.h"

namespace grpo::cluster {
namespace {

constexpr const char* kTlsErrorProperty = "grpo_tls_error";
constexpr const char* kPinHint = "pin it: --tls-pin FINGERPRINT (or cluster_tls_fingerprint in the run config)";

void require_tls_backend() {
  check(QSslSocket::supportsSsl(), "TLS",
        "this Qt has no working TLS backend (available: " +
            QSslSocket::availableBackends().join(", ").toStdString() + ")",
        "install Debian's libssl3 (Qt's OpenSSL plugin, part of libqt6network6, loads it)");
}

// The certificates of a PEM file (leaf first); throws naming the file when there is none.
QList<QSslCertificate> read_certificates(const std::string& pem_file) {
  const auto certs = QSslCertificate::fromData(QByteArray::fromStdString(read_file(pem_file)), QSsl::Pem);
  check(!certs.isEmpty() && !certs.front().isNull(), pem_file, "no PEM certificate in this file",
        "expected -----BEGIN CERTIFICATE----- (openssl req -x509 ... -out cert.pem)");
  return certs;
}

}  // namespace

TlsPins parse_tls_pins(const std::string& text, const std::string& what) {
  TlsPins out;
  for (const auto& part : split(text, ',')) {
    std::string hex;
    for (char c : part) {
      if (c == ':' || c == ' ' || c == '\t') continue;
      hex += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    if (hex.empty()) continue;
    const std::string given = trim(part);  // (a named string: GCC 12 warns -Wrestrict on "x" + temporary)
    check(hex.size() == 64 && hex.find_first_not_of("0123456789abcdef") == std::string::npos, what,
          "\"" + given + "\" is not a SHA-256 fingerprint (64 hex digits, colons allowed)",
          "print the server's with: openssl x509 -in cert.pem -noout -fingerprint -sha256");
    out.push_back(hex);
  }
  return out;
}

std::string certificate_fingerprint(const QSslCertificate& cert) {
  return cert.digest(QCryptographicHash::Sha256).toHex().toStdString();
}

std::string certificate_file_fingerprint(const std::string& pem_file) {
  return certificate_fingerprint(read_certificates(pem_file).front());
}

QSslConfiguration server_tls_configuration(const std::string& cert_file, const std::string& key_file) {
  require_tls_backend();
  check(!cert_file.empty() && !key_file.empty(), "--tls-cert/--tls-key", "TLS needs both a certificate and its key");
  const auto certs = read_certificates(cert_file);
  const QByteArray pem = QByteArray::fromStdString(read_file(key_file));
  QSslKey key;
  for (QSsl::KeyAlgorithm alg : {QSsl::Rsa, QSsl::Ec, QSsl::Dsa}) {
    key = QSslKey(pem, alg, QSsl::Pem, QSsl::PrivateKey);
    if (!key.isNull()) break;
  }
  check(!key.isNull(), key_file, "no unencrypted PEM private key (RSA, EC or DSA) in this file",
        "a passphrase-protected key cannot be used; make one with openssl req -x509 -noenc ...");
  QSslConfiguration conf = QSslConfiguration::defaultConfiguration();
  conf.setLocalCertificateChain(certs);
  conf.setPrivateKey(key);
  conf.setPeerVerifyMode(QSslSocket::VerifyNone);  // clients prove themselves with the bearer token
  conf.setProtocol(QSsl::TlsV1_2OrLater);
  return conf;
}

namespace {

// Watches one https:// reply: records why a certificate was refused; with pins, accepts exactly
// the pinned leaf certificate and refuses every other one.
void apply_tls_pins(QNetworkReply* reply, const TlsPins& pins) {
  // Pinned or not, record why a certificate was refused, with its fingerprint (what to pin).
  auto refuse = [reply, pins](const std::string& got, const std::string& why) {
    const std::string url = reply->url().toString(QUrl::RemoveUserInfo | QUrl::RemoveQuery).toStdString();
    std::string text = url + ": " + why + "; the server's certificate has SHA-256 fingerprint " +
                       (got.empty() ? "(none)" : got);
    text += pins.empty() ? " (if this is your server, " + std::string(kPinHint) + ")"
                         : ", the pinned fingerprint is " + join(pins, " or ");
    reply->setProperty(kTlsErrorProperty, QString::fromStdString(text));
  };
  auto leaf_of = [reply](const QList<QSslError>& errors) {
    QSslCertificate leaf = reply->sslConfiguration().peerCertificate();
    for (const auto& e : errors)
      if (leaf.isNull() && !e.certificate().isNull()) leaf = e.certificate();
    return leaf.isNull() ? std::string() : certificate_fingerprint(leaf);
  };
  QObject::connect(reply, &QNetworkReply::sslErrors, reply, [reply, pins, refuse, leaf_of](const QList<QSslError>& errors) {
    const std::string got = leaf_of(errors);
    if (!got.empty() && std::find(pins.begin(), pins.end(), got) != pins.end()) {
      reply->ignoreSslErrors(errors);  // exactly these errors, for exactly the pinned certificate
      return;
    }
    QStringList why;
    for (const auto& e : errors) why << e.errorString();
    refuse(got, pins.empty() ? "certificate not trusted (" + why.join("; ").toStdString() + ")"
                             : "certificate does not match the pin");
  });
  if (pins.empty()) return;
  // A certificate the system trusts must still be the pinned one.
  QObject::connect(reply, &QNetworkReply::encrypted, reply, [reply, pins, refuse, leaf_of] {
    const std::string got = leaf_of({});
    if (std::find(pins.begin(), pins.end(), got) != pins.end()) return;
    refuse(got, "certificate does not match the pin");
    reply->abort();
  });
}

}  // namespace

QNetworkReply* send_request(QNetworkAccessManager& nam, QNetworkRequest request, const QByteArray& method,
                            const QByteArray& body, const TlsPins& pins) {
  const bool https = request.url().scheme() == "https";
  // Never follow a redirect: the request carries the cluster token, which must not go to a host
  // (or a scheme) the caller did not name (issue 18). A 3xx comes back as the reply.
  request.setAttribute(QNetworkRequest::RedirectPolicyAttribute, QNetworkRequest::ManualRedirectPolicy);
  if (https && !pins.empty()) {
    QCryptographicHash h(QCryptographicHash::Sha256);
    for (const auto& p : pins) h.addData(QByteArray::fromStdString(p + ","));
    request.setPeerVerifyName("pinned-" + QString::fromLatin1(h.result().toHex().left(16)) + ".grpo.invalid");
  }
  QNetworkReply* reply = nam.sendCustomRequest(request, method, body);
  if (https) apply_tls_pins(reply, pins);
  return reply;
}

std::string tls_refusal(QNetworkReply* reply) { return reply->property(kTlsErrorProperty).toString().toStdString(); }

std::string network_error(QNetworkReply* reply) {
  const std::string refused = tls_refusal(reply);
  return refused.empty() ? reply->errorString().toStdString() : refused;
}

}  // namespace grpo::cluster
