// Fuzz target: the worker's HTTP/1.1 request-head parser (request line, headers, limits) and
// what a handler reads from a parsed head (headers, query parameters, keep-alive), then the
// error response a bad request gets.
#include "core/cluster/http_message.h"
#include "tests/fuzz/fuzz_target.h"

FUZZ_BODY({
  using namespace grpo::cluster;
  HttpLimits limits;
  limits.max_header_bytes = 4096;
  limits.max_headers = 32;
  HttpRequest req;
  const HeadParse head = parse_request_head(input, limits, req);
  if (head.status == HeadParse::Status::Ok) {
    if (head.head_bytes > input.size()) std::abort();  // must point inside what was given
    (void)req.header("authorization");
    (void)req.header("content-length");
    (void)req.query_param("mode");
    (void)req.keep_alive();
    (void)req.expects_continue();
    (void)percent_decode(req.path);
    (void)serialize_response(HttpResponse::error(404, "no route for " + req.path), !req.keep_alive());
  } else if (head.status == HeadParse::Status::Error) {
    (void)serialize_response(HttpResponse::error(head.error_status, head.error_message), true);
  }
})
