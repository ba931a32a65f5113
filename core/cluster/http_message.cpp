#include "core/cluster/http_message.h"

#include <algorithm>
#include <cctype>

namespace grpo::cluster {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// RFC 9110 tchar.
bool is_tchar(char c) {
  if (std::isalnum(static_cast<unsigned char>(c))) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar); }

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

HeadParse fail(int status, std::string message) {
  HeadParse r;
  r.status = HeadParse::Status::Error;
  r.error_status = status;
  r.error_message = std::move(message);
  return r;
}

bool has_token(std::string_view list, std::string_view token) {
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string_view::npos) comma = list.size();
    if (iequals(trim_ows(list.substr(start, comma - start)), token)) return true;
    start = comma + 1;
  }
  return false;
}

// Validates the request line "METHOD SP target SP HTTP/1.x" into `out`.
std::optional<HeadParse> parse_request_line(std::string_view line, HttpRequest& out) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return fail(400, "malformed request line (expected \"METHOD /path HTTP/1.1\")");
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!is_token(method)) return fail(400, "malformed request line: bad method");
  if (target.empty() || target.front() != '/')
    return fail(400, "malformed request line: the target must be a path starting with '/'");
  for (char c : target)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return fail(400, "malformed request line: control character in the target");
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || !std::isdigit(static_cast<unsigned char>(version[5])) ||
      version[6] != '.' || !std::isdigit(static_cast<unsigned char>(version[7])))
    return fail(400, "malformed request line: bad HTTP version");
  if (version[5] != '1') return fail(505, "HTTP version " + std::string(version.substr(5)) + " not supported (use HTTP/1.1)");
  out.method = std::string(method);
  out.target = std::string(target);
  const size_t q = target.find('?');
  out.path = std::string(target.substr(0, q));
  out.query = q == std::string_view::npos ? std::string() : std::string(target.substr(q + 1));
  out.version_minor = version[7] - '0';
  return std::nullopt;
}

}  // namespace

std::optional<std::string> HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (iequals(k, name)) return v;
  return std::nullopt;
}

int64_t HttpRequest::int_param(const char* name, int64_t fallback, int64_t lo, int64_t hi) const {
  const auto s = query_param(name);
  if (!s) return fallback;
  try {
    size_t used = 0;
    const long long v = std::stoll(*s, &used);
    if (used == s->size() && v >= lo && v <= hi) return v;
  } catch (const std::exception&) {  // not a number, or out of long long's range
  }
  const bool bounded = lo != INT64_MIN || hi != INT64_MAX;
  throw HttpError(400, std::string(name) + "=\"" + *s + "\": expected an integer" +
                           (bounded ? " in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]" : ""));
}

std::optional<std::string> HttpRequest::query_param(std::string_view name) const {
  for (const auto& part : [&] {
         std::vector<std::string_view> parts;
         std::string_view q = query;
         while (!q.empty()) {
           const size_t amp = q.find('&');
           parts.push_back(q.substr(0, amp));
           if (amp == std::string_view::npos) break;
           q.remove_prefix(amp + 1);
         }
         return parts;
       }()) {
    const size_t eq = part.find('=');
    if (percent_decode(part.substr(0, eq)) == name)
      return eq == std::string_view::npos ? std::string() : percent_decode(part.substr(eq + 1));
  }
  return std::nullopt;
}

bool HttpRequest::keep_alive() const {
  const auto c = header("Connection");
  if (version_minor >= 1) return !(c && has_token(*c, "close"));
  return c && has_token(*c, "keep-alive");
}

bool HttpRequest::expects_continue() const {
  const auto e = header("Expect");
  return e && iequals(trim_ows(*e), "100-continue");
}

std::string percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else if (s[i] == '+') {
      out += ' ';
    } else {
      out += s[i];
    }
  }
  return out;
}

HeadParse parse_request_head(std::string_view buffer, const HttpLimits& limits, HttpRequest& out) {
  // RFC 9112 2.2: ignore empty lines before the request line; but only a few, and counted against
  // the head's size: a stream of bare CRLF was never refused and grew the buffer without bound
  // (issue 18).
  constexpr size_t kMaxEmptyLines = 8;
  size_t start = 0;
  while (buffer.substr(start, 2) == "\r\n") {
    start += 2;
    if (start / 2 > kMaxEmptyLines)
      return fail(400, "more than " + std::to_string(kMaxEmptyLines) + " empty lines before the request line");
  }
  const std::string_view rest = buffer.substr(start);
  const size_t end = rest.find("\r\n\r\n");
  const size_t first_eol = rest.find("\r\n");
  // Judge the request line as soon as it is complete, so garbage is refused without waiting.
  HttpRequest req;
  if (first_eol != std::string_view::npos) {
    if (first_eol > limits.max_header_bytes) return fail(431, "request line too long");
    if (auto err = parse_request_line(rest.substr(0, first_eol), req)) return *err;
  }
  if (end == std::string_view::npos) {
    if (buffer.size() > limits.max_header_bytes)
      return fail(431, "request headers larger than " + std::to_string(limits.max_header_bytes) + " bytes");
    return {};
  }
  if (start + end > limits.max_header_bytes)
    return fail(431, "request headers larger than " + std::to_string(limits.max_header_bytes) + " bytes");

  // Header lines lie between the request line's CRLF and the blank line (none when end == first_eol).
  std::string_view head = end > first_eol ? rest.substr(first_eol + 2, end - first_eol - 2) : std::string_view();
  std::optional<uint64_t> content_length;
  while (!head.empty()) {
    const size_t eol = head.find("\r\n");
    const std::string_view line = head.substr(0, eol);
    head = eol == std::string_view::npos ? std::string_view() : head.substr(eol + 2);
    if (line.empty()) continue;
    if (line.front() == ' ' || line.front() == '\t') return fail(400, "obsolete header line folding is not accepted");
    if (req.headers.size() >= limits.max_headers)
      return fail(431, "more than " + std::to_string(limits.max_headers) + " header fields");
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || !is_token(line.substr(0, colon)))
      return fail(400, "malformed header line (expected \"Name: value\")");
    const std::string_view value = trim_ows(line.substr(colon + 1));
    for (char c : value)
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f)
        return fail(400, "control character in header " + std::string(line.substr(0, colon)));
    const std::string name(line.substr(0, colon));
    if (iequals(name, "Content-Length")) {
      if (value.empty() || !std::all_of(value.begin(), value.end(), ::isdigit))
        return fail(400, "Content-Length must be a decimal number");
      if (value.size() > 18) return fail(400, "Content-Length has more than 18 digits: larger than any body this server takes");
      const uint64_t n = std::stoull(std::string(value));
      if (content_length && *content_length != n) return fail(400, "conflicting Content-Length headers");
      content_length = n;
    } else if (iequals(name, "Transfer-Encoding")) {
      req.chunked = true;
    }
    req.headers.emplace_back(name, std::string(value));
  }
  if (req.chunked && content_length) return fail(400, "both Transfer-Encoding and Content-Length given");
  if (req.version_minor >= 1 && !req.header("Host")) return fail(400, "HTTP/1.1 request without a Host header");
  req.content_length = content_length;
  out = std::move(req);
  HeadParse ok;
  ok.status = HeadParse::Status::Ok;
  ok.head_bytes = start + end + 4;
  return ok;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

const char* error_type_for(int status) {
  switch (status) {
    case 400: return "BadRequestError";
    case 401: return "AuthenticationError";
    case 403: return "PermissionDeniedError";
    case 404: return "NotFoundError";
    case 405: return "MethodNotAllowedError";
    case 408: return "RequestTimeoutError";
    case 413: return "RequestTooLargeError";
    case 429: return "RateLimitError";
    case 431: return "RequestTooLargeError";
    case 501: return "NotImplementedError";
    case 503: return "ServiceUnavailableError";
    default: return status >= 500 ? "InternalServerError" : "BadRequestError";
  }
}

HttpResponse HttpResponse::json(int status, const nlohmann::json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

HttpResponse HttpResponse::text(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = std::move(body);
  return r;
}

HttpResponse HttpResponse::error(int status, const std::string& message, std::string type) {
  if (type.empty()) type = error_type_for(status);
  return json(status, {{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", status}}}});
}

HttpResponse HttpResponse::busy(const std::string& message) {
  HttpResponse r = error(503, message);
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

std::string serialize_response(const HttpResponse& r, bool close, std::string_view server_name) {
  std::string out;
  out.reserve(r.body.size() + 256);
  out += "HTTP/1.1 " + std::to_string(r.status) + " " + reason_phrase(r.status) + "\r\n";
  out += "Server: " + std::string(server_name) + "\r\n";
  if (!r.body.empty() || r.status != 204) {
    out += "Content-Type: " + r.content_type + "\r\n";
    out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  }
  for (const auto& [k, v] : r.headers) out += k + ": " + v + "\r\n";
  out += close ? "Connection: close\r\n" : "Connection: keep-alive\r\n";
  out += "\r\n";
  out += r.body;
  return out;
}

}  // namespace grpo::cluster
