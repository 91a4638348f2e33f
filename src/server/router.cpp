#include "trainenv/server/router.hpp"

// GCC 12 warns that asio's awaitable frame is freed by a mismatched operator delete at the end
// of the handlers (the frame's own new and delete are a pair: a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

#include <chrono>
#include <optional>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "trainenv/core/decide/engine.hpp"
#include "trainenv/core/model/admission.hpp"
#include "trainenv/core/model/pod_view.hpp"
#include "trainenv/core/policy/policy.hpp"
#include "trainenv/inputs/preview.hpp"
#include "trainenv/server/logging.hpp"

namespace trainenv::server {
namespace {

using nlohmann::json;

using route = route_label;

std::string_view path_of(std::string_view target) {
  return target.substr(0, target.find('?'));
}

// The route a path names, whether or not this listener serves it (check_header says).
route route_of(std::string_view target) {
  const auto path = path_of(target);
  if (path == "/healthz") return route::healthz;
  if (path == "/readyz") return route::readyz;
  if (path == "/mutate") return route::mutate;
  if (path == "/preview") return route::preview;
  if (path == "/preview/job") return route::preview_job;
  if (path == "/metrics") return route::metrics;
  return route::other;
}

bool is_preview(route r) {
  return r == route::preview || r == route::preview_job;
}

// The media type without parameters, lower-cased: "Application/JSON; charset=utf-8" ->
// "application/json".
std::string media_type(std::string_view content_type) {
  auto type = content_type.substr(0, content_type.find(';'));
  while (!type.empty() && type.back() == ' ') type.remove_suffix(1);
  while (!type.empty() && type.front() == ' ') type.remove_prefix(1);
  std::string out(type);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool preview_media_type(const std::string& type) {
  // curl --data-binary sends application/x-www-form-urlencoded unless told otherwise.
  return type.empty() || type == "application/json" || type == "application/yaml" ||
         type == "application/x-yaml" || type == "text/yaml" || type == "text/x-yaml" ||
         type == "text/plain" || type == "application/x-www-form-urlencoded";
}

// The value of `name` in the query string, if present (values are policy names: no decoding).
std::optional<std::string> query_param(std::string_view target, std::string_view name) {
  const auto q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  auto query = target.substr(q + 1);
  while (!query.empty()) {
    const auto amp = query.find('&');
    const auto pair = query.substr(0, amp);
    const auto eq = pair.find('=');
    if (pair.substr(0, eq) == name)
      return std::string(eq == std::string_view::npos ? "" : pair.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    query = query.substr(amp + 1);
  }
  return std::nullopt;
}

// A JSON body already written as text.
http_response text_response(http::status status, std::string body, const http_request& request) {
  http_response res{status, request.version()};
  res.set(http::field::content_type, "application/json");
  res.keep_alive(request.keep_alive());
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

http_response json_response(http::status status, const json& body, const http_request& request) {
  return text_response(status, body.dump(-1, ' ', false, json::error_handler_t::replace), request);
}

// "numNodes=4 (JobSet team-a/bert spec.replicatedJobs[node]), framework=torch (...)": where
// the counts came from, for the admission line (one line: the values are the core's, no
// newlines).
std::string sources_text(const core::decision& d) {
  std::string out;
  for (const auto& s : d.sources) {
    if (!out.empty()) out += ", ";
    out += s.name + "=" + s.value + " (" + s.source + ")";
  }
  return out;
}

// The one shape of a POST handler: `decide`, a coroutine (the decision may wait for owners),
// then `answer`, a plain function building the response from what was decided. An exception
// from either is a 500 whose log line names `where` (and `uid`, for an admission). Only the
// decision is awaited: a co_return inside a try block trips GCC 12's -Wmismatched-new-delete on
// the coroutine frame, so the answer is built in a plain function; that workaround lives here
// alone. `decide` is the caller's named awaitable: GCC 12 destroys a temporary argument of a
// co_await'd call twice.
template <class T, class Answer>
boost::asio::awaitable<http_response> decided_then_answered(boost::asio::awaitable<T>& decide,
                                                            const Answer& answer,
                                                            const http_request& request,
                                                            std::string_view where,
                                                            std::string_view uid) {
  std::optional<T> decided;
  std::string failure;
  try {
    decided = co_await std::move(decide);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  co_return [&]() -> http_response {
    try {
      if (!decided) throw std::runtime_error(failure);
      return answer(std::move(*decided));
    } catch (const std::exception& e) {
      spdlog::error("internal error on {}{}{}: {}", where,
                    uid.empty() ? "" : " uid=", uid.empty() ? std::string() : core::quote(uid),
                    e.what());
      return error_response(http::status::internal_server_error,
                            "internal error; see the webhook's log" +
                                (uid.empty() ? std::string() : " for uid " + std::string(uid)),
                            request.version(), request.keep_alive());
    }
  }();
}

}  // namespace

http_response error_response(http::status status, std::string_view message, unsigned version,
                             bool keep_alive) {
  http_response res{status, version};
  res.set(http::field::content_type, "application/json");
  res.keep_alive(keep_alive);
  res.body() = json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace);
  res.prepare_payload();
  return res;
}

std::size_t router::body_limit_of(route_label r) const {
  if (r == route::mutate) return limits_.mutate;
  return is_preview(r) ? limits_.preview : 0;  // a GET has no body
}

bool router::serves_previews() const {
  return listener_ == listener_kind::previews ||
         (listener_ == listener_kind::admission && !state_.reads_cluster());
}

const owner_lookup& router::preview_owners() const {
  return listener_ == listener_kind::previews ? state_.preview_owners : state_.owners;
}

std::optional<http_response> router::check_header(const http_request& header) const {
  const auto r = route_of(header.target());
  const unsigned version = header.version();
  const bool keep_alive = header.keep_alive();
  const bool served = r == route::healthz || r == route::readyz ||
                      (r == route::mutate && listener_ == listener_kind::admission) ||
                      (is_preview(r) && serves_previews()) ||
                      (r == route::metrics && listener_ == listener_kind::metrics);
  if (!served) {
    if (is_preview(r) && listener_ == listener_kind::admission) {
      // The webhook reads the cluster with its own rights: a preview here would read for anyone
      // what they may not read themselves (docs/security.md).
      return error_response(http::status::not_found,
                            "no previews on the admission port of a server that reads the "
                            "cluster: they are served on --preview-listen, where they read with "
                            "your own bearer token; or run trainenv preview --kubeconfig",
                            version, keep_alive);
    }
    const char* hint =
        listener_ == listener_kind::admission
            ? (serves_previews() ? "no such path; try /mutate, /preview, /preview/job, "
                                   "/healthz or /readyz"
                                 : "no such path; try /mutate, /healthz or /readyz")
        : listener_ == listener_kind::previews
            ? "no such path; try /preview, /preview/job, /healthz or /readyz"
            : "no such path; try /metrics, /healthz or /readyz";
    return error_response(http::status::not_found, hint, version, keep_alive);
  }
  const bool is_post_route = r == route::mutate || is_preview(r);
  const auto method = header.method();
  const bool method_ok = is_post_route ? method == http::verb::post
                                       : (method == http::verb::get || method == http::verb::head);
  if (!method_ok) {
    auto res = error_response(http::status::method_not_allowed,
                              is_post_route ? "use POST" : "use GET", version, keep_alive);
    res.set(http::field::allow, is_post_route ? "POST" : "GET, HEAD");
    return res;
  }
  if (is_post_route) {
    const auto type = media_type(header[http::field::content_type]);
    const bool type_ok = r == route::mutate ? type == "application/json" : preview_media_type(type);
    if (!type_ok) {
      return error_response(http::status::unsupported_media_type,
                            r == route::mutate
                                ? "Content-Type must be application/json"
                                : "Content-Type must be application/json or application/yaml",
                            version, keep_alive);
    }
  }
  if (is_preview(r) && listener_ == listener_kind::previews &&
      header[http::field::authorization].empty()) {
    state_.metrics.count(counter::preview_auth_failures);
    auto res = error_response(http::status::unauthorized,
                              "a preview on this port reads the cluster as its caller: send your "
                              "bearer token (Authorization: Bearer ...)",
                              version, keep_alive);
    res.set(http::field::www_authenticate, "Bearer");
    return res;
  }
  return std::nullopt;
}

boost::asio::awaitable<request_plan> router::plan(const http_request& header) const {
  request_plan out;
  if (auto refused = check_header(header)) {
    out.refusal = std::move(refused);
    co_return out;
  }
  const auto r = route_of(header.target());
  out.body_limit = body_limit_of(r);
  if (r == route::mutate) {
    out.share_per_byte = memory_budget::in_place_factor;
  } else if (is_preview(r)) {
    out.share_per_byte = memory_budget::built_factor;
    // A job's preview costs what its layout holds, not what its text does.
    if (r == route::preview_job) out.share_floor = served_preview_share;
  }
  if (is_preview(r) && listener_ == listener_kind::previews) {
    if (!state_.preview_callers) {
      out.refusal =
          error_response(http::status::service_unavailable,
                         "previews are not configured on this server", header.version(), false);
      co_return out;
    }
    auto caller = co_await state_.preview_callers->authenticate(header[http::field::authorization]);
    if (!caller.rights) {
      auto res = error_response(static_cast<http::status>(caller.status), caller.message,
                                header.version(), false);
      if (caller.status == 401) res.set(http::field::www_authenticate, "Bearer");
      out.refusal = std::move(res);
      co_return out;
    }
    out.caller = std::move(caller.rights);
    out.username = std::move(caller.username);
  }
  co_return out;
}

boost::asio::awaitable<http_response> router::handle(const http_request& request,
                                                     const request_plan* planned) const {
  const auto started = std::chrono::steady_clock::now();
  const auto r = route_of(request.target());
  auto& m = state_.metrics;
  m.on_request_started();
  std::optional<request_plan> own;
  if (planned == nullptr) {
    own = co_await plan(request);
    planned = &*own;
  }
  outcome result;
  http_response res;
  if (planned->refusal) {
    res = *planned->refusal;
  } else {
    // A named result: GCC 12 mishandles a co_await inside a conditional expression.
    auto routed = co_await route(request, r, *planned, result);
    res = std::move(routed);
  }
  if (res.result_int() >= 400) result.decision = decision_label::error;
  m.on_request(r, result.decision, result.policy, result.patch_ops,
               std::chrono::steady_clock::now() - started);
  co_return res;
}

boost::asio::awaitable<http_response> router::route(const http_request& request, route_label r,
                                                    const request_plan& planned,
                                                    outcome& result) const {
  switch (r) {
    case route::mutate: {
      auto answer = co_await mutate(request, planned, result);
      co_return answer;
    }
    case route::preview: {
      auto answer = co_await preview(request, planned, result);
      co_return answer;
    }
    case route::preview_job: {
      auto answer = co_await preview_job(request, planned, result);
      co_return answer;
    }
    case route::healthz:
      co_return health(request, false);
    case route::readyz:
      co_return health(request, true);
    case route::metrics:
      co_return metrics_page(request);
    case route::other:
      break;
  }
  co_return error_response(http::status::not_found, "no such path", request.version(),
                           request.keep_alive());
}

http_response router::refuse(const http_request& header, refusal why,
                             std::string_view detail) const {
  auto& m = state_.metrics;
  m.on_request_started();
  auto res = [&] {
    switch (why) {
      case refusal::body_too_large:
        return error_response(http::status::payload_too_large,
                              "request body exceeds " +
                                  std::to_string(body_limit_of(route_of(header.target()))) +
                                  " bytes",
                              11, false);
      case refusal::header_too_large:
        return error_response(http::status::request_header_fields_too_large,
                              "request header fields too large", 11, false);
      case refusal::over_budget: {
        m.count(counter::budget_refusals);
        auto res = error_response(http::status::service_unavailable,
                                  "the server's memory budget for requests in flight "
                                  "(--max-request-memory) had no room for this one within the "
                                  "read timeout; retry",
                                  11, false);
        res.set(http::field::retry_after, "1");
        return res;
      }
      case refusal::malformed:
        break;
    }
    return error_response(http::status::bad_request,
                          "malformed HTTP request: " + std::string(detail), 11, false);
  }();
  m.on_request(route_of(header.target()), decision_label::error, {}, 0, {});
  return res;
}

http_response router::metrics_page(const http_request& request) const {
  http_response res{http::status::ok, request.version()};
  res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
  res.keep_alive(request.keep_alive());
  res.body() = state_.metrics.render();
  res.prepare_payload();
  return res;
}

boost::asio::awaitable<http_response> router::mutate(const http_request& request,
                                                     const request_plan& planned,
                                                     outcome& result) const {
  const auto started = std::chrono::steady_clock::now();
  auto review = core::decode_review(request.body());
  if (!review) {
    spdlog::debug("rejected /mutate body: {}", review.message());
    co_return error_response(http::status::bad_request, review.message(), request.version(),
                             request.keep_alive());
  }
  const auto policies = state_.policies.read();
  const auto& options = state_.decide_options;
  const auto& pod = review->pod();  // for the decision and the log line
  const core::subject what{pod, &*review};
  auto decision = decide_with_owners(what, *policies, options, state_.owners, state_.metrics);
  const auto answer = [&](const core::decision& d) {
    count_passes(d);
    if (d.allowed && !d.policy.empty()) state_.metrics.on_wait(d.policy, d);
    result = {label_of(d.verdict()), d.policy, d.patch_ops};
    auto res = text_response(http::status::ok, core::encode_response(*review, d), request);
    if (info_enabled()) {
      const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(
                              std::chrono::steady_clock::now() - started)
                              .count();
      const auto* pod_name = pod.name() != nullptr ? pod.name() : pod.generate_name();
      log_field message{"message", {}};  // only on a denial or a pass with a warning
      if (!d.allowed || d.passed == core::pass_reason::unrecognised ||
          d.passed == core::pass_reason::unknown_framework)
        message.value = std::string_view(d.message);
      const auto sources = sources_text(d);
      log_field sources_field{"sources", {}};  // only when counts were resolved
      if (!sources.empty()) sources_field.value = std::string_view(sources);
      log_event("admission", {{"uid", review->uid},
                              {"namespace", review->namespace_name},
                              {"pod", pod_name != nullptr ? std::string_view(*pod_name) : "-"},
                              {"operation", review->operation},
                              {"dryRun", review->dry_run},
                              {"policy", d.policy.empty() ? "-" : std::string_view(d.policy)},
                              {"decision", core::outcome_name(d.verdict())},
                              {"ops", static_cast<std::int64_t>(d.patch_ops)},
                              {"duration_us", static_cast<std::int64_t>(micros)},
                              sources_field,
                              message,
                              {"peer", std::string_view(planned.peer)},
                              {"client_cert", planned.client_certificate}});
    }
    return res;
  };
  co_return co_await decided_then_answered(decision, answer, request, "admission", review->uid);
}

boost::asio::awaitable<http_response> router::preview(const http_request& request,
                                                      const request_plan& planned,
                                                      outcome& result) const {
  auto options = state_.decide_options;
  if (auto policy = query_param(request.target(), "policy")) {
    if (!core::is_dns_label(*policy)) {
      co_return error_response(http::status::bad_request, "?policy= must name a policy",
                               request.version(), request.keep_alive());
    }
    options.forced_policy = std::move(*policy);
  }
  const auto policies = state_.policies.read();
  const auto& rights = planned.caller ? *planned.caller : own_rights;
  auto previewed = preview_with_owners(request.body(), *policies, options, preview_owners(),
                                       state_.metrics, rights);
  const auto answer = [&](const core::result<inputs::preview_answer>& a) {
    if (!a) {
      return error_response(http::status::bad_request, a.message(), request.version(),
                            request.keep_alive());
    }
    const auto& d = a->decision;
    count_passes(d);
    result = {label_of(d.verdict()), d.policy, 0};
    return json_response(http::status::ok, inputs::to_json(*a), request);
  };
  co_return co_await decided_then_answered(previewed, answer, request, "/preview", {});
}

boost::asio::awaitable<http_response> router::preview_job(const http_request& request,
                                                          const request_plan& planned,
                                                          outcome& result) const {
  auto job = inputs::read_job(request.body());
  if (!job) {
    co_return error_response(http::status::bad_request, job.message(), request.version(),
                             request.keep_alive());
  }
  const auto policies = state_.policies.read();
  // A TrainJob's runtime, read as the previews read owners (the caller's token on the previews'
  // port, the --owners file on a local server); one that cannot be read is named by the
  // layout's own error.
  const auto& rights = planned.caller ? *planned.caller : own_rights;
  auto given = fetch_objects(core::job_needs(*job), *policies, preview_owners(), rights);
  const auto answer = [&](const std::vector<json>& objects) {
    // On the webhook's own threads a preview is bounded harder than the CLI's: its pods are each
    // decided, and what it lays out is held; larger ones preview with the CLI.
    const auto& options = state_.decide_options;
    auto preview = core::preview_job(*job, objects, *policies, served_preview_bounds, options);
    if (!preview) {
      return error_response(http::status::unprocessable_entity, preview.message(),
                            request.version(), request.keep_alive());
    }
    result = {preview->ok() ? decision_label::allowed : decision_label::denied, {}, 0};
    auto text = inputs::to_json(*preview).dump(-1, ' ', false, json::error_handler_t::replace);
    if (text.size() > max_preview_answer_bytes) {
      state_.metrics.count(counter::budget_refusals);
      return error_response(http::status::payload_too_large,
                            "the job's preview comes to " + std::to_string(text.size()) +
                                " bytes, over the " + std::to_string(max_preview_answer_bytes) +
                                " a served preview answers; run trainenv preview --job",
                            request.version(), request.keep_alive());
    }
    return text_response(http::status::ok, std::move(text), request);
  };
  co_return co_await decided_then_answered(given, answer, request, "/preview/job", {});
}

void router::count_passes(const core::decision& d) const {
  if (d.passed == core::pass_reason::unrecognised) state_.metrics.count(counter::pods_unrecognised);
  if (d.passed == core::pass_reason::unknown_framework)
    state_.metrics.count(counter::pods_unknown_framework);
}

http_response router::health(const http_request& request, bool readiness) const {
  const bool ok = !readiness || state_.ready();
  http_response res{ok ? http::status::ok : http::status::service_unavailable, request.version()};
  res.set(http::field::content_type, "text/plain");
  res.keep_alive(request.keep_alive());
  res.body() = ok ? "ok\n" : "not ready\n";
  res.prepare_payload();
  return res;
}

}  // namespace trainenv::server
