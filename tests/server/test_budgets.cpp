// What no request, and no crowd of them, can take from the real admissions (issue 37,
// docs/security.md "Budgets"): the real server over TLS and the fake API server behind it. Each
// case is an attack that worked before: silent connections held for the idle timeout, one port's
// crowd shutting out another, a flood of pods naming a gone owner or contradicting a cached one
// (one GET each), a log bomb, anonymous load starving /mutate's API connections, and a drain
// that closed kept-alive connections under their next request.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <random>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include <spdlog/spdlog.h>
#include "anonymous_crowd.hpp"
#include "fake_apiserver.hpp"
#include "hostile_clients.hpp"
#include "indexed_jobs.hpp"
#include "server_harness.hpp"

#include "trainenv/server/logging.hpp"

namespace {

using namespace trainenv;
using namespace trainenv::test;
using nlohmann::json;
using clock_type = std::chrono::steady_clock;

#if defined(TRAINENV_SANITIZED)
constexpr int slow = 4;
#else
constexpr int slow = 1;
#endif

struct answered {
  unsigned status = 0;
  json body;
  std::string text;
};

answered mutate(unsigned short port, const json& pod, const std::string& uid) {
  tls_client client(port);
  REQUIRE_FALSE(client.handshake());
  const auto res =
      client.send(make_request(http::verb::post, "/mutate", pod_review(pod, uid).dump()));
  return {res.result_int(), json::parse(res.body(), nullptr, false), res.body()};
}

bool allowed(const answered& a) {
  return a.body.is_object() && a.body.contains("response") &&
         a.body["response"].value("allowed", false);
}

}  // namespace

TEST_CASE("a connection that sends nothing is closed at the read timeout, not the idle timeout",
          "[adversarial][budgets]") {
  auto limits = test_limits();
  limits.read_timeout = 1s;
  limits.idle_timeout = 60s;
  running_server server(limits);
  SECTION("the plain port") {
    raw_connection silent(server.plain_port());
    const auto closed = silent.time_until_closed(10s);
    REQUIRE(closed);
    CHECK(*closed < 3s * slow);
  }
  SECTION("the TLS port, after the handshake") {
    tls_client silent(server.tls_port());
    REQUIRE_FALSE(silent.handshake());
    const auto closed = silent.time_until_closed(10s);
    REQUIRE(closed);
    CHECK(*closed < 3s * slow);
  }
  SECTION("a kept-alive connection waits the idle timeout once it has been served") {
    tls_client client(server.tls_port());
    REQUIRE_FALSE(client.handshake());
    CHECK(client.send(make_request(http::verb::get, "/healthz", "", "")).result() ==
          http::status::ok);
    const auto closed = client.time_until_tcp_closed(2500ms);
    INFO("closed after " << (closed ? closed->count() : -1) << " ms");
    CHECK_FALSE(closed);  // still open past the read timeout
  }
}

TEST_CASE("a crowd on the metrics port never shuts out the admission port",
          "[adversarial][budgets]") {
  auto limits = test_limits();
  limits.max_connections = 100;
  limits.max_metrics_connections = 20;
  running_server server(limits);
  // Silent plain connections, far past the metrics port's cap (before: one cap for both ports,
  // and 10,000 of these shut out the admission port for the idle timeout).
  std::vector<std::unique_ptr<raw_connection>> crowd;
  for (int i = 0; i < 150; ++i)
    crowd.push_back(std::make_unique<raw_connection>(server.plain_port()));
  const auto counted_by = clock_type::now();
  while (server.state.metrics.value(trainenv::server::counter::refused_connections) < 130 &&
         clock_type::now() - counted_by < 5s * slow)
    std::this_thread::sleep_for(10ms);
  CHECK(server.state.metrics.value(trainenv::server::counter::refused_connections) >= 130);
  // The admission port serves as ever.
  const auto a = mutate(server.tls_port(), job_pod("solo", 0), "fresh");
  CHECK(a.status == 200);
  for (int i = 0; i < 5; ++i) {
    tls_client client(server.tls_port());
    REQUIRE_FALSE(client.handshake());
    CHECK(client.send(make_request(http::verb::get, "/readyz", "", "")).result() ==
          http::status::ok);
  }
}

TEST_CASE("a flood of pods naming a gone owner costs one GET per interval",
          "[adversarial][budgets]") {
  fake_apiserver api;
  server_options options;
  options.api = api.credentials();
  running_server server(options);
  // 300 pods of a Job that does not exist (uid and all): before, one GET each.
  std::atomic<int> denied{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 75; ++i) {
        tls_client client(server.tls_port());
        if (client.handshake()) continue;
        const auto res = client.send(make_request(
            http::verb::post, "/mutate",
            pod_review(job_pod("gone", i % 4), "g" + std::to_string(t * 100 + i)).dump()));
        const auto body = json::parse(res.body(), nullptr, false);
        if (body.is_object() && body.contains("response") &&
            !body["response"].value("allowed", true))
          ++denied;
      }
    });
  }
  const auto started = clock_type::now();
  for (auto& c : clients) c.join();
  const auto seconds =
      std::chrono::duration_cast<std::chrono::seconds>(clock_type::now() - started).count();
  CHECK(denied == 300);
  // The 404 is remembered for 2 s: one GET, and one more per 2 s the flood lasted.
  CHECK(api.total_gets() <= static_cast<std::size_t>(2 + seconds / 2));
}

TEST_CASE("pods crafted to contradict a cached owner force one re-read per interval",
          "[adversarial][budgets]") {
  fake_apiserver api;
  api.add_object(indexed_job("small", 2));
  server_options options;
  options.api = api.credentials();
  running_server server(options);
  REQUIRE(allowed(mutate(server.tls_port(), job_pod("small", 0), "first")));
  const auto path = fake_apiserver::path_of(indexed_job("small", 2));
  REQUIRE(api.gets(path) == 1);
  // Pods whose completion index lies past the cached size: each asks for a re-read (before,
  // one GET each). 200 of them, from 4 clients.
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        tls_client client(server.tls_port());
        if (client.handshake()) continue;
        (void)client.send(make_request(
            http::verb::post, "/mutate",
            pod_review(job_pod("small", 5 + i), "c" + std::to_string(t * 100 + i)).dump()));
      }
    });
  }
  const auto started = clock_type::now();
  for (auto& c : clients) c.join();
  const auto elapsed = clock_type::now() - started;
  const auto intervals = static_cast<std::size_t>(elapsed / 500ms) + 2;
  INFO("the flood took " << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()
                         << " ms; GETs " << api.gets(path));
  CHECK(api.gets(path) <= 1 + intervals);
}

TEST_CASE("no request writes more than a bounded line into the log, nor a line of its own",
          "[adversarial][budgets]") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  server::setup_logging("text", "info", fds[1]);
  std::string logged;
  {
    running_server server;
    auto pod = job_pod("bomb", 0);
    pod["metadata"]["generateName"] = std::string(2 * 1024 * 1024, 'x');
    pod["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] = "nope";
    // A uid that tries to start an admission line of its own.
    const auto a =
        mutate(server.tls_port(), pod,
               "u1\n2026-11-28T00:00:00.000000Z info admission uid=forged decision=allowed");
    CHECK(a.status == 200);
    spdlog::default_logger()->flush();
    std::this_thread::sleep_for(300ms);
    pollfd in{fds[0], POLLIN, 0};
    std::string chunk(1 << 20, '\0');
    while (::poll(&in, 1, 500) > 0) {
      const auto n = ::read(fds[0], chunk.data(), chunk.size());
      if (n <= 0) break;
      logged.append(chunk.data(), static_cast<std::size_t>(n));
    }
  }
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("silent"));
  ::close(fds[0]);
  ::close(fds[1]);
  std::size_t admission_lines = 0;
  std::size_t longest = 0;
  for (std::size_t start = 0; start < logged.size();) {
    const auto end = std::min(logged.find('\n', start), logged.size());
    const auto line = std::string_view(logged).substr(start, end - start);
    if (line.find(" admission ") != std::string_view::npos) ++admission_lines;
    longest = std::max(longest, line.size());
    start = end + 1;
  }
  INFO(logged.substr(0, 2000));
  CHECK(admission_lines == 1);
  CHECK(longest < 4096);
  // The forged line is inside the real one's quoted uid, its newline escaped.
  CHECK((logged.find("uid=forged") == std::string::npos ||
         logged.find("\\n2026") != std::string::npos));
  CHECK(logged.find("bytes)") != std::string::npos);  // the cut is marked with the length
}

// The done-when of issue 37: real admissions are never denied for time while anonymous clients
// hammer every other port and route, against an API server that answers in 0.4 s.
TEST_CASE("anonymous load on every other port and route never starves real admissions",
          "[adversarial][budgets]") {
  fake_apiserver api({.tokens = {"test-token"}});
  constexpr int real_jobs = 16;
  for (int j = 0; j < real_jobs; ++j) api.add_object(indexed_job("real-" + std::to_string(j), 2));
  api.misbehave({.delay = 400ms});
  server_options options;
  options.api = api.credentials();
  options.previews = true;
  options.lookup_timeout = 2000ms;
  running_server server(options);

  anonymous_crowd crowd({server.tls_port(), server.plain_port(), server.preview_port()}, 200,
                        cert_dir() + "/ca.crt");
  std::this_thread::sleep_for(1s);  // the crowd is at it

  // The real admissions: one pod of each Job, each needing its Job read (0.4 s).
  std::vector<std::chrono::milliseconds> took;
  int denied = 0;
  for (int j = 0; j < real_jobs; ++j) {
    const auto asked = clock_type::now();
    const auto a = mutate(server.tls_port(), job_pod("real-" + std::to_string(j), 1),
                          "real-" + std::to_string(j));
    took.push_back(
        std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - asked));
    INFO(a.text);
    if (!allowed(a)) ++denied;
    CHECK(a.text.find("patch") != std::string::npos);
  }
  crowd.stop();
  std::sort(took.begin(), took.end());
  INFO("real admissions: median " << took[took.size() / 2].count() << " ms, slowest "
                                  << took.back().count() << " ms; anonymous requests "
                                  << crowd.requests());
  CHECK(denied == 0);
  CHECK(crowd.requests() > 200);
  // Every one is its own GET at 0.4 s, and none waited behind the crowd's.
  CHECK(api.gets_with("test-token") == static_cast<std::size_t>(real_jobs));
}

TEST_CASE("during the drain every answer says Connection: close", "[adversarial][budgets]") {
  running_server server;
  tls_client kept(server.tls_port());
  REQUIRE_FALSE(kept.handshake());
  auto res = kept.send(make_request(http::verb::get, "/healthz", "", ""));
  CHECK(res.keep_alive());
  std::atomic<bool> drained{false};
  server.server->drain(3s, 10s, [&](bool) { drained = true; });
  std::this_thread::sleep_for(100ms);
  // The kept connection is told to leave with the answer to its next request, rather than
  // closed under one after the delay.
  res =
      kept.send(make_request(http::verb::post, "/mutate", pod_review(job_pod("d", 0), "d").dump()));
  CHECK(res.result() == http::status::ok);
  CHECK_FALSE(res.keep_alive());
  tls_client fresh(server.tls_port());
  REQUIRE_FALSE(fresh.handshake());
  res = fresh.send(make_request(http::verb::get, "/readyz", "", ""));
  CHECK(res.result() == http::status::service_unavailable);
  CHECK_FALSE(res.keep_alive());
}
