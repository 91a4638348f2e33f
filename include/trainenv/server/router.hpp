// HTTP -> core -> HTTP: routes, methods, media types and status codes (docs/contract.md §5, §6).
#pragma once

#include <atomic>
#include <optional>

#include <boost/beast/http.hpp>

#include "trainenv/server/state.hpp"

namespace trainenv::server {

namespace http = boost::beast::http;
using http_request = http::request<http::string_body>;
using http_response = http::response<http::string_body>;

class router {
 public:
  // `admission_routes`: /mutate and /preview (the TLS port); else /metrics (the plain port).
  router(server_state& state, bool admission_routes)
      : state_(state), admission_routes_(admission_routes) {}

  // Decided from the header alone, before any body is read: 404, 405 or 415.
  [[nodiscard]] std::optional<http_response> check_header(const http_request& header) const;
  // A request whose header passed check_header; counted in the metrics.
  [[nodiscard]] http_response handle(const http_request& request) const;
  // Counts a request the server refused before handle() (404, 405, 413, 415, 431, 400).
  void count_refused(const http_request& header) const;

 private:
  struct outcome {
    decision_label decision = decision_label::allowed;
    std::string policy;
    std::size_t patch_ops = 0;
  };
  [[nodiscard]] http_response mutate(const http_request& request, outcome& result) const;
  [[nodiscard]] http_response preview(const http_request& request, outcome& result) const;
  [[nodiscard]] http_response metrics_page(const http_request& request) const;
  [[nodiscard]] http_response health(const http_request& request, bool readiness) const;

  server_state& state_;
  bool admission_routes_;
};

// A JSON response {"error": message} with the given status.
[[nodiscard]] http_response error_response(http::status status, std::string_view message,
                                           unsigned version, bool keep_alive);

}  // namespace trainenv::server
