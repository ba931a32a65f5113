// HTTP/1.1 messages for the worker's server: the request as parsed from the wire (request line,
// case-insensitive headers, Content-Length body), the response and its serialisation, and the
// JSON error body in vLLM's shape {"error":{"message","type","param","code"}} (code = the HTTP
// status, as vLLM's create_error_response sets it). Pure C++: no sockets here, so the parser is
// tested byte by byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace grpo::cluster {

struct HttpLimits {
  size_t max_header_bytes = 16 * 1024;   // request line + headers; more -> 431
  size_t max_headers = 100;              // header lines; more -> 431
  size_t max_body_bytes = 32u << 20;     // Content-Length above this -> 413
};

struct HttpRequest {
  std::string method;   // "GET", "POST", ... (case-sensitive, as RFC 9110 says)
  std::string target;   // as sent: "/pause?mode=keep"
  std::string path;     // "/pause"
  std::string query;    // "mode=keep" (raw, undecoded)
  int version_minor = 1;  // HTTP/1.<minor>
  std::vector<std::pair<std::string, std::string>> headers;  // names as sent, values trimmed
  std::string body;
  std::optional<uint64_t> content_length;
  bool chunked = false;  // Transfer-Encoding present (we do not accept request bodies in chunks)
  std::string peer;      // the client's address as the server saw it ("10.0.0.5", "::1"); set by HttpServer

  // First value of a header, compared case-insensitively; nullopt when absent.
  std::optional<std::string> header(std::string_view name) const;
  // A percent-decoded query parameter ("mode" in "?mode=keep"); nullopt when absent.
  std::optional<std::string> query_param(std::string_view name) const;
  // An integer query parameter in [lo, hi]; `fallback` when absent. Anything else: HttpError 400
  // naming the parameter and the range.
  int64_t int_param(const char* name, int64_t fallback, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) const;
  // HTTP/1.1 defaults to keep-alive unless "Connection: close"; 1.0 needs "Connection: keep-alive".
  bool keep_alive() const;
  bool expects_continue() const;  // "Expect: 100-continue"
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers

  static HttpResponse json(int status, const nlohmann::json& body);
  static HttpResponse text(int status, std::string body);
  // vLLM's error body. `type` defaults to the name vLLM uses for the status
  // (400 BadRequestError, 404 NotFoundError, ...).
  static HttpResponse error(int status, const std::string& message, std::string type = {});
  // 503 with "Retry-After: 1": a limit is reached for now (connections, queues); come back.
  static HttpResponse busy(const std::string& message);
};

// Thrown by route handlers for a client-visible failure with its status.
class HttpError : public std::runtime_error {
public:
  HttpError(int status, const std::string& message, std::string type = {})
      : std::runtime_error(message), status_(status), type_(std::move(type)) {}
  int status() const { return status_; }
  const std::string& type() const { return type_; }
  HttpResponse response() const { return HttpResponse::error(status_, what(), type_); }

private:
  int status_;
  std::string type_;
};

const char* reason_phrase(int status);
const char* error_type_for(int status);  // "BadRequestError", "NotFoundError", ...

// The bytes of a response. `close` adds "Connection: close" (else keep-alive).
std::string serialize_response(const HttpResponse& r, bool close, std::string_view server_name = "grpo");

// Result of looking for a complete request head at the start of a buffer.
struct HeadParse {
  enum class Status { Incomplete, Ok, Error } status = Status::Incomplete;
  size_t head_bytes = 0;  // Ok: bytes of request line + headers + the blank line
  int error_status = 0;   // Error: 400, 431, 501, 505
  std::string error_message;
};

// Parses the request line and headers at the start of `buffer` into `out` (body untouched).
// Incomplete while the blank line has not arrived and the limits are not exceeded.
HeadParse parse_request_head(std::string_view buffer, const HttpLimits& limits, HttpRequest& out);

std::string percent_decode(std::string_view s);

}  // namespace grpo::cluster
