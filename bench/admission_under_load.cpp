// Real admissions under anonymous load (issue 37's done-when: "real admissions keep their p99 and
// are never denied for time while 200 anonymous clients hammer every other port and route,
// measured against a slow fake API"). The built `trainenv serve` reads its owners from the tests'
// fake API server over TLS, which answers each GET after --delay-ms (0.4 s by default, issue 37's
// figure); every real admission is a pod of a Job of its own, so each costs a GET. Each round
// measures --admissions of them from --concurrency kept-alive clients, first with nothing else
// going on, then beside --crowd anonymous clients (tests/support/anonymous_crowd.hpp: /preview
// on the admission port, the previews' port without and with bogus tokens, /metrics, a 404
// path). It prints, per round and as the median of the rounds with their spread, p50, p99 and the
// slowest admission, the denied ones, and the anonymous requests answered meanwhile.
//
//   build/bench/admission_under_load [--binary build/trainenv] [--rounds 3] [--admissions 160]
//                                    [--concurrency 8] [--crowd 200] [--delay-ms 400]
//                                    [--previews-port on|off]
//
// --previews-port off runs serve without --preview-listen (a build before issue 37 has none); the
// crowd's previews-port clients then go to the admission port.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "anonymous_crowd.hpp"
#include "fake_apiserver.hpp"
#include "indexed_jobs.hpp"
#include "server_process.hpp"

namespace {

using namespace trainenv;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;
using nlohmann::json;

struct settings {
  std::string binary = "build/trainenv";
  int rounds = 3;
  int admissions = 160;
  int concurrency = 8;
  int crowd = 200;
  int delay_ms = 400;
  bool previews_port = true;
};

constexpr const char* usage =
    "usage: admission_under_load [--binary build/trainenv] [--rounds 3] [--admissions 160]\n"
    "                            [--concurrency 8] [--crowd 200] [--delay-ms 400]\n"
    "                            [--previews-port on|off]\n";

// The settings, or nullopt after --help.
std::optional<settings> parse(int argc, char** argv) {
  settings s;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") return std::nullopt;
    if (i + 1 == argc) throw std::runtime_error(flag + " needs a value\n" + usage);
    const std::string value = argv[i + 1];
    if (flag == "--binary") {
      s.binary = value;
    } else if (flag == "--rounds") {
      s.rounds = std::stoi(value);
    } else if (flag == "--admissions") {
      s.admissions = std::stoi(value);
    } else if (flag == "--concurrency") {
      s.concurrency = std::stoi(value);
    } else if (flag == "--crowd") {
      s.crowd = std::stoi(value);
    } else if (flag == "--delay-ms") {
      s.delay_ms = std::stoi(value);
    } else if (flag == "--previews-port") {
      s.previews_port = value != "off";
    } else {
      throw std::runtime_error("unknown flag " + flag + "\n" + usage);
    }
  }
  return s;
}

struct phase {
  std::vector<double> ms;  // each admission's latency
  int denied = 0;          // not allowed, or no answer
  long anonymous = 0;      // anonymous requests answered meanwhile

  [[nodiscard]] double quantile(double q) const {
    auto sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    if (sorted.empty()) return 0;
    const auto at = static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5);
    return sorted[std::min(at, sorted.size() - 1)];
  }
};

// `count` admissions of the pods of Jobs `first`, `first` + 1, ... from `concurrency` clients,
// each on a kept-alive TLS connection.
phase admit(unsigned short port, const std::string& ca, int first, int count, int concurrency) {
  phase out;
  std::mutex mutex;
  std::atomic<int> next{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < concurrency; ++c) {
    clients.emplace_back([&] {
      asio::io_context ioc;
      ssl::context ctx(ssl::context::tls_client);
      ctx.load_verify_file(ca);
      ctx.set_verify_mode(ssl::verify_peer);
      std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> s;
      beast::flat_buffer buffer;
      for (int i = next++; i < count; i = next++) {
        const auto job = "real-" + std::to_string(first + i);
        const auto body = test::pod_review(test::job_pod(job, 0), job).dump();
        const auto asked = clock_type::now();
        bool ok = false;
        try {
          if (!s) {
            s = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(ioc, ctx);
            SSL_set_tlsext_host_name(s->native_handle(), "localhost");
            s->set_verify_callback(ssl::host_name_verification("localhost"));
            beast::get_lowest_layer(*s).connect({asio::ip::make_address("127.0.0.1"), port});
            s->handshake(ssl::stream_base::client);
          }
          http::request<http::string_body> req{http::verb::post, "/mutate", 11};
          req.set(http::field::host, "localhost");
          req.set(http::field::content_type, "application/json");
          req.body() = body;
          req.prepare_payload();
          http::write(*s, req);
          http::response<http::string_body> res;
          http::read(*s, buffer, res);
          const auto answer = json::parse(res.body(), nullptr, false);
          ok = answer.is_object() && answer.contains("response") &&
               answer["response"].value("allowed", false) && answer["response"].contains("patch");
          if (!res.keep_alive()) s.reset();
        } catch (const std::exception&) {
          s.reset();
        }
        const std::chrono::duration<double, std::milli> took = clock_type::now() - asked;
        const std::lock_guard lock(mutex);
        out.ms.push_back(took.count());
        if (!ok) ++out.denied;
      }
    });
  }
  for (auto& t : clients) t.join();
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string spread(const std::vector<double>& v) {
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f (%.0f-%.0f)", median(v), *lo, *hi);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const auto parsed = parse(argc, argv);
    if (!parsed) {
      std::cout << usage;
      return 0;
    }
    const auto& s = *parsed;
    const auto dir =
        fs::temp_directory_path() / ("trainenv-under-load-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const auto certs = (dir / "certs").string();
    const auto mint =
        std::string(TRAINENV_SOURCE_DIR) + "/certs/mint.sh --force " + certs + " >/dev/null 2>&1";
    if (std::system(mint.c_str()) != 0) throw std::runtime_error("certs/mint.sh failed");
    test::raise_fd_limit(4096);

    test::fake_apiserver api(
        {.tokens = {"test-token"}, .max_lifetime = std::chrono::seconds(3600)});
    const int jobs = s.rounds * 2 * s.admissions;
    for (int j = 0; j < jobs; ++j)
      api.add_object(test::indexed_job("real-" + std::to_string(j), 2));
    api.misbehave({.delay = std::chrono::milliseconds(s.delay_ms)});
    std::vector<std::string> flags = {"--threads", "2", "--kubeconfig",
                                      api.write_kubeconfig(dir / "kubeconfig")};
    if (s.previews_port) flags.insert(flags.end(), {"--preview-listen", "127.0.0.1:0"});
    test::server_process server(s.binary, dir / "serve.log", flags, certs);
    const auto ca = certs + "/ca.crt";

    std::vector<double> quiet_p50, quiet_p99, quiet_max, loaded_p50, loaded_p99, loaded_max;
    int denied = 0;
    std::printf(
        "| round | load | admissions | p50 ms | p99 ms | slowest ms | denied | anonymous requests "
        "|\n");
    std::printf("|---|---|---|---|---|---|---|---|\n");
    int next_job = 0;
    for (int r = 1; r <= s.rounds; ++r) {
      const auto quiet = admit(server.port(), ca, next_job, s.admissions, s.concurrency);
      next_job += s.admissions;
      phase loaded;
      {
        test::anonymous_crowd crowd({server.port(), server.plain_port(), server.preview_port()},
                                    s.crowd, ca);
        std::this_thread::sleep_for(std::chrono::seconds(1));  // the crowd is at it
        const auto before = crowd.requests();
        loaded = admit(server.port(), ca, next_job, s.admissions, s.concurrency);
        loaded.anonymous = crowd.requests() - before;
        crowd.stop();
      }
      next_job += s.admissions;
      for (const phase* p :
           {static_cast<const phase*>(&quiet), static_cast<const phase*>(&loaded)}) {
        std::printf("| %d | %s | %zu | %.0f | %.0f | %.0f | %d | %ld |\n", r,
                    p == &quiet ? "none" : "crowd", p->ms.size(), p->quantile(0.5),
                    p->quantile(0.99), p->quantile(1.0), p->denied, p->anonymous);
        denied += p->denied;
      }
      quiet_p50.push_back(quiet.quantile(0.5));
      quiet_p99.push_back(quiet.quantile(0.99));
      quiet_max.push_back(quiet.quantile(1.0));
      loaded_p50.push_back(loaded.quantile(0.5));
      loaded_p99.push_back(loaded.quantile(0.99));
      loaded_max.push_back(loaded.quantile(1.0));
    }
    std::printf(
        "\nmedian of %d rounds (min-max), ms: without load p50 %s p99 %s slowest %s; "
        "with %d anonymous clients p50 %s p99 %s slowest %s; denied in all: %d; GETs %zu "
        "(one per admission: %d)\n",
        s.rounds, spread(quiet_p50).c_str(), spread(quiet_p99).c_str(), spread(quiet_max).c_str(),
        s.crowd, spread(loaded_p50).c_str(), spread(loaded_p99).c_str(), spread(loaded_max).c_str(),
        denied, api.gets_with("test-token"), next_job);
    server.terminate(std::chrono::seconds(30));
    fs::remove_all(dir);
    return denied == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "admission_under_load: " << e.what() << "\n";
    return 2;
  }
}
