// TLS for the cluster's HTTP (Qt's OpenSSL backend): the server side loads a PEM certificate and
// key (HttpServerOptions::tls_cert_file/tls_key_file), the client side accepts https:// URLs and
// can pin the server's leaf certificate by its SHA-256 fingerprint, which is how self-signed
// certificates are trusted. One set of pins belongs to one cluster (beside its token file):
// `grpo train --tls-pin`, config key `cluster_tls_fingerprint`, `grpo worker --tls-pin`.
//
// Pinning: with pins, a reply whose leaf certificate's SHA-256 is one of them succeeds even when
// the certificate is self-signed or names another host (exactly those sslErrors are ignored); a
// leaf that matches no pin fails, also when a public CA signed it, with an error naming the URL
// and both fingerprints (tls_refusal()). Without pins, the system's CA certificates decide.
#pragma once

#include <string>
#include <vector>

class QByteArray;
class QNetworkAccessManager;
class QNetworkReply;
class QNetworkRequest;
class QSslCertificate;
class QSslConfiguration;

namespace grpo::cluster {

using TlsPins = std::vector<std::string>;  // SHA-256 fingerprints, 64 lower-case hex digits each

// "AB:CD:..." or "abcd..." (64 hex digits, colons and spaces ignored) -> lower-case hex; several
// may be separated by commas. Throws grpo::Error naming `what` when one is not a SHA-256.
TlsPins parse_tls_pins(const std::string& text, const std::string& what);

// The SHA-256 fingerprint of a certificate: 64 lower-case hex digits.
std::string certificate_fingerprint(const QSslCertificate& cert);
// The same for the first certificate of a PEM file; throws grpo::Error naming the file.
std::string certificate_file_fingerprint(const std::string& pem_file);

// The server's TLS configuration from PEM files (the certificate may be followed by its chain);
// throws grpo::Error naming the file and what is wrong (missing, no PEM certificate, no
// unencrypted key, no TLS support in this Qt). A key of another certificate fails each handshake.
QSslConfiguration server_tls_configuration(const std::string& cert_file, const std::string& key_file);

// Sends `method` (GET, POST, ...) with `body` through `nam`, with the pins applied to an https://
// request. Pinned requests carry a peer-verify name made from the pins, so QNetworkAccessManager
// never hands them a kept-alive connection that was accepted under other pins (or none).
// Redirects are never followed (the request carries the cluster token): a 3xx is the reply.
QNetworkReply* send_request(QNetworkAccessManager& nam, QNetworkRequest request, const QByteArray& method,
                            const QByteArray& body, const TlsPins& pins);

// Why send_request() refused the server's certificate, naming the URL, the server's fingerprint
// and the pins (or how to pin it); "" when it refused nothing.
std::string tls_refusal(QNetworkReply* reply);
// A failed reply's transport error for messages: tls_refusal() when there is one, else errorString().
std::string network_error(QNetworkReply* reply);

}  // namespace grpo::cluster
