// HTTP -> core -> HTTP: routes, methods, media types and status codes (docs/contract.md §5, §6).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http.hpp>

#include "trainenv/server/state.hpp"

namespace trainenv::server {

namespace http = boost::beast::http;
using http_request = http::request<http::string_body>;
using http_response = http::response<http::string_body>;

// Why the session could not read a request whole.
enum class refusal : std::uint8_t {
  body_too_large,    // 413: a Content-Length or a chunked body over the limit
  header_too_large,  // 431
  malformed,         // 400: not HTTP/1.1 as Beast parses it
};

// Decides every status the server answers with, and counts every answer under its path.
class router {
 public:
  // `admission_routes`: /mutate and /preview (the TLS port); else /metrics (the plain port).
  // `max_body_bytes` is named in the 413 answer.
  router(server_state& state, bool admission_routes, std::size_t max_body_bytes)
      : state_(state), admission_routes_(admission_routes), max_body_bytes_(max_body_bytes) {}

  // Decided from the header alone, before any body is read: 404, 405 or 415, or nothing. The
  // session asks only to know whether to read a body the client waits to send (100-continue);
  // handle() answers with it and counts it.
  [[nodiscard]] std::optional<http_response> check_header(const http_request& header) const;
  // The answer to a request read whole (or a header check_header refused), counted. A
  // coroutine: /mutate and /preview may wait for the pod's owners from the API.
  [[nodiscard]] boost::asio::awaitable<http_response> handle(const http_request& request) const;
  // The answer to a request the session could not read whole: `header` carries its method and
  // target as far as they were read; `detail` is the parser's reason. Counted under the path;
  // the connection closes after it.
  [[nodiscard]] http_response refuse(const http_request& header, refusal why,
                                     std::string_view detail = {}) const;

 private:
  struct outcome {
    decision_label decision = decision_label::allowed;
    std::string policy;
    std::size_t patch_ops = 0;
  };
  [[nodiscard]] boost::asio::awaitable<http_response> route(const http_request& request,
                                                            route_label r, outcome& result) const;
  [[nodiscard]] boost::asio::awaitable<http_response> mutate(const http_request& request,
                                                             outcome& result) const;
  [[nodiscard]] boost::asio::awaitable<http_response> preview(const http_request& request,
                                                              outcome& result) const;
  [[nodiscard]] boost::asio::awaitable<http_response> preview_job(const http_request& request,
                                                                  outcome& result) const;
  // The passes an operator watches (pods_unrecognised, pods_unknown_framework), from the decision.
  void count_passes(const core::decision& d) const;
  [[nodiscard]] http_response metrics_page(const http_request& request) const;
  [[nodiscard]] http_response health(const http_request& request, bool readiness) const;

  server_state& state_;
  bool admission_routes_;
  std::size_t max_body_bytes_;
};

// A JSON response {"error": message} with the given status.
[[nodiscard]] http_response error_response(http::status status, std::string_view message,
                                           unsigned version, bool keep_alive);

}  // namespace trainenv::server
