// HTTP -> core -> HTTP: routes, methods, media types and status codes (docs/contract.md §5, §6),
// per listener: what each port serves, who may ask, and how large a body each route takes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http.hpp>

#include "trainenv/core/preview/controllers.hpp"
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
  over_budget,       // 503: no room in the memory budget within the read timeout
};

// The ports (docs/security.md, "Who can reach which port").
enum class listener_kind : std::uint8_t {
  admission,  // --listen: /mutate and health; the previews too on a server that does not read
              // the cluster (a local server: owners from --owners, or none)
  previews,   // --preview-listen: /preview and /preview/job with the caller's bearer token
  metrics,    // --metrics-listen: /metrics and health, plain HTTP
};

// The largest bodies, by route.
struct body_limits {
  std::size_t mutate = 0;   // --max-body-bytes
  std::size_t preview = 0;  // --max-preview-body-bytes
};

// What a served /preview/job lays out at most (docs/security.md): on the webhook's own threads a
// preview is bounded harder than the CLI's, and its answer (each pod's patch and objects) too.
// Measured at these bounds (Release, one thread): 500 small pods held 29 MiB at the peak, 500
// pods of 2 KiB templates 57 MiB, 100 of 10 KiB 35 MiB; about 56 KiB a pod and 30 bytes a byte
// of template text. So a job preview takes served_preview_share of the memory budget, whatever
// its size.
inline constexpr core::preview_bounds served_preview_bounds{500, 1'000, std::size_t{1024} * 1024};
inline constexpr std::size_t served_preview_share = std::size_t{64} * 1024 * 1024;
inline constexpr std::size_t max_preview_answer_bytes = std::size_t{8} * 1024 * 1024;

// What the session does with a request whose header it has read, before it reads the body.
// (clang-tidy 14 reads its implicit members through Beast's message; none throws in practice.)
struct request_plan {                    // NOLINT(bugprone-exception-escape)
  std::optional<http_response> refusal;  // answer this at once (404, 405, 415, 401, 503)
  std::size_t body_limit = 0;
  // The request's share of the memory budget: per body byte, and at least this many bytes (a job
  // preview's cost is its layout's, not its text's).
  std::size_t share_per_byte = 0;
  std::size_t share_floor = 0;
  std::optional<read_rights> caller;  // a preview's caller, on the previews' port
  std::string username;               // who the API server says that is
  // The connection's, for the admission log (the session fills them in).
  std::string peer;
  bool client_certificate = false;
};

// Decides every status the server answers with, and counts every answer under its path.
class router {
 public:
  router(server_state& state, listener_kind listener, body_limits limits)
      : state_(state), listener_(listener), limits_(limits) {}

  // Decided from the header alone, before any body is read: 404, 405, 415, or 401 for a
  // preview without a token on the previews' port, or nothing.
  [[nodiscard]] std::optional<http_response> check_header(const http_request& header) const;
  // check_header, then the caller of a preview on the previews' port (TokenReview), and how
  // large a body the route takes and what share of the memory budget it needs.
  [[nodiscard]] boost::asio::awaitable<request_plan> plan(const http_request& header) const;
  // The answer to a request read whole (or the plan's refusal), counted. A coroutine: /mutate
  // and the previews may wait for the pod's owners from the API. Without a plan, the request is
  // planned here (tests, which send whole requests).
  [[nodiscard]] boost::asio::awaitable<http_response> handle(
      const http_request& request, const request_plan* planned = nullptr) const;
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
  [[nodiscard]] bool serves_previews() const;
  [[nodiscard]] std::size_t body_limit_of(route_label r) const;
  [[nodiscard]] boost::asio::awaitable<http_response> route(const http_request& request,
                                                            route_label r,
                                                            const request_plan& planned,
                                                            outcome& result) const;
  [[nodiscard]] boost::asio::awaitable<http_response> mutate(const http_request& request,
                                                             const request_plan& planned,
                                                             outcome& result) const;
  [[nodiscard]] boost::asio::awaitable<http_response> preview(const http_request& request,
                                                              const request_plan& planned,
                                                              outcome& result) const;
  [[nodiscard]] boost::asio::awaitable<http_response> preview_job(const http_request& request,
                                                                  const request_plan& planned,
                                                                  outcome& result) const;
  // The owners a preview reads: the caller's reads on the previews' port, the webhook's source
  // (a file or none) on a server that does not read the cluster.
  [[nodiscard]] const owner_lookup& preview_owners() const;
  // The passes an operator watches (pods_unrecognised, pods_unknown_framework), from the decision.
  void count_passes(const core::decision& d) const;
  [[nodiscard]] http_response metrics_page(const http_request& request) const;
  [[nodiscard]] http_response health(const http_request& request, bool readiness) const;

  server_state& state_;
  listener_kind listener_;
  body_limits limits_;
};

// A JSON response {"error": message} with the given status.
[[nodiscard]] http_response error_response(http::status status, std::string_view message,
                                           unsigned version, bool keep_alive);

}  // namespace trainenv::server
