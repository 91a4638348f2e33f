// The real server on port 0 with certificates minted by the test (certs/mint.sh), spoken to
// over real TLS with a Beast client: one keep-alive connection through the docs/contract.md §6
// rows.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <sstream>
#include <thread>

#include <boost/asio/connect.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <atomic>
#include <fstream>
#include <future>

#include "../test_support.hpp"
#include "server_harness.hpp"
#include "trainenv/core/model/admission.hpp"
#include "trainenv/server/server.hpp"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using nlohmann::json;
using namespace trainenv;
using namespace trainenv::test;
using namespace std::chrono_literals;

namespace {

json review_for(json pod, const std::string& uid,
                const std::string& api_version = "admission.k8s.io/v1") {
  json review = test::fixture("review-torch-jobset-node3.json");
  review["apiVersion"] = api_version;
  review["request"]["uid"] = uid;
  review["request"]["object"] = std::move(pod);
  return review;
}

json torch_pod(int index) {
  json pod = test::fixture("review-torch-jobset-node3.json")["request"]["object"];
  // The Job controller writes the index as an annotation and a label, alike.
  pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] =
      std::to_string(index);
  pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] = std::to_string(index);
  pod["spec"]["hostname"] = "llama-ft-node-0-" + std::to_string(index);  // as the Job controller
  return pod;
}

// The response's patch, decoded and applied with nlohmann's applier.
json patched(const json& pod, const json& admission_response) {
  auto decoded = core::base64_decode(admission_response["patch"].get<std::string>());
  REQUIRE(decoded.has_value());
  return pod.patch(json::parse(*decoded));
}

// Handshakes and asks for /healthz: a connection that has served a request and is now idle.
void serve_one_health_check(tls_client& client) {
  REQUIRE_FALSE(client.handshake());
  CHECK(client.send(make_request(http::verb::get, "/healthz", "", "")).result() ==
        http::status::ok);
}

std::string env_value(const json& pod, const std::string& name) {
  for (const auto& e : pod["spec"]["containers"][0]["env"]) {
    if (e["name"] == name) return e.value("value", std::string("<valueFrom>"));
  }
  return "<absent>";
}

}  // namespace

TEST_CASE("one keep-alive TLS connection through admissions, previews and bad input",
          "[server][tls]") {
  running_server server;
  tls_client client(server.tls_port());
  REQUIRE_FALSE(client.handshake());

  SECTION(
      "torch pods of a 4-node JobSet, a pass-through pod, v1beta1, a violation and the bad-input "
      "rows") {
    for (int index : {0, 3}) {
      INFO("index " << index);
      const auto uid = "uid-" + std::to_string(index);
      const auto res = client.send(make_request(http::verb::post, "/mutate?timeout=10s",
                                                review_for(torch_pod(index), uid).dump()));
      REQUIRE(res.result() == http::status::ok);
      CHECK(res[http::field::content_type] == "application/json");
      const auto body = json::parse(res.body());
      CHECK(body["apiVersion"] == "admission.k8s.io/v1");
      CHECK(body["kind"] == "AdmissionReview");
      CHECK(body["response"]["uid"] == uid);
      CHECK(body["response"]["allowed"] == true);
      CHECK(body["response"]["patchType"] == "JSONPatch");
      CHECK(body["response"]["auditAnnotations"]["policy"] == "torch");
      CHECK(body["response"]["auditAnnotations"]["injected"] ==
            "PET_NNODES,PET_NPROC_PER_NODE,PET_NODE_RANK,PET_MASTER_ADDR,PET_MASTER_PORT,MASTER_"
            "ADDR,MASTER_PORT,"
            "WORLD_SIZE,RANK,port 29500,annotation trainenv.io/injected,annotation "
            "trainenv.io/status" +
                std::string(index == 0 ? "" : ",initContainer trainenv-wait"));
      const auto pod = patched(torch_pod(index), body["response"]);
      CHECK(env_value(pod, "RANK") == std::to_string(index));
      CHECK(env_value(pod, "WORLD_SIZE") == "4");
      CHECK(env_value(pod, "PET_MASTER_ADDR") == "llama-ft-node-0-0.llama-ft");
    }

    json plain_pod = torch_pod(0);
    plain_pod["metadata"]["labels"].erase("trainer.kubeflow.org/trainjob-ancestor-step");
    auto res = client.send(
        make_request(http::verb::post, "/mutate", review_for(plain_pod, "pass").dump()));
    REQUIRE(res.result() == http::status::ok);
    auto body = json::parse(res.body());
    CHECK(body["response"]["allowed"] == true);
    CHECK_FALSE(body["response"].contains("patch"));

    res = client.send(
        make_request(http::verb::post, "/mutate",
                     review_for(torch_pod(1), "beta", "admission.k8s.io/v1beta1").dump()));
    body = json::parse(res.body());
    CHECK(body["apiVersion"] == "admission.k8s.io/v1beta1");
    CHECK(body["response"]["uid"] == "beta");
    CHECK(env_value(patched(torch_pod(1), body["response"]), "RANK") == "1");

    json bad_pod = torch_pod(0);
    bad_pod["metadata"]["annotations"]["trainenv.io/num-nodes"] = "abc";
    res = client.send(make_request(http::verb::post, "/mutate", review_for(bad_pod, "bad").dump()));
    REQUIRE(res.result() == http::status::ok);
    body = json::parse(res.body());
    CHECK(body["response"]["allowed"] == false);
    CHECK(body["response"]["status"]["code"] == 400);
    CHECK_THAT(body["response"]["status"]["message"].get<std::string>(),
               Catch::StartsWith("trainenv: ") && Catch::Contains("trainenv.io/num-nodes") &&
                   Catch::Contains("\"abc\""));

    res = client.send(make_request(http::verb::post, "/mutate", "{not json"));
    CHECK(res.result() == http::status::bad_request);
    CHECK(json::parse(res.body()).contains("error"));

    json no_uid = review_for(torch_pod(0), "x");
    no_uid["request"].erase("uid");
    res = client.send(make_request(http::verb::post, "/mutate", no_uid.dump()));
    CHECK(res.result() == http::status::bad_request);
    CHECK_THAT(json::parse(res.body())["error"].get<std::string>(), Catch::Contains("uid"));

    res = client.send(make_request(http::verb::post, "/mutate", R"({"kind":"Pod"})"));
    CHECK(res.result() == http::status::bad_request);

    res = client.send(make_request(http::verb::post, "/mutate",
                                   review_for(torch_pod(0), "t").dump(), "text/plain"));
    CHECK(res.result() == http::status::unsupported_media_type);

    res = client.send(make_request(http::verb::get, "/mutate", "", ""));
    CHECK(res.result() == http::status::method_not_allowed);
    CHECK(res[http::field::allow] == "POST");

    res = client.send(make_request(http::verb::post, "/validate", "{}"));
    CHECK(res.result() == http::status::not_found);

    res = client.send(
        make_request(http::verb::post, "/preview?policy=platform", torch_pod(2).dump()));
    REQUIRE(res.result() == http::status::ok);
    body = json::parse(res.body());
    CHECK(body["allowed"] == true);
    CHECK(body["policy"] == "platform");
    CHECK(env_value(body["object"], "WORLD_SIZE") == "4");  // platform: WORLD_SIZE counts the nodes
    CHECK(torch_pod(2).patch(body["patch"]) == body["object"]);

    for (const char* path : {"/healthz", "/readyz"}) {
      res = client.send(make_request(http::verb::get, path, "", ""));
      CHECK(res.result() == http::status::ok);
    }
    // Still the same connection after every error above.
    CHECK(res.keep_alive());
  }
}

TEST_CASE("a body over the limit is answered 413 from its Content-Length, unread",
          "[server][limits]") {
  running_server server;
  tls_client client(server.tls_port());
  REQUIRE_FALSE(client.handshake());
  // Announce 8 MiB and send none of it: the answer must not wait for the body.
  client.write_raw(
      "POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
      "Content-Length: 8388608\r\n\r\n");
  const auto res = client.receive();
  CHECK(res.result() == http::status::payload_too_large);
  CHECK_FALSE(res.keep_alive());
}

TEST_CASE("a chunked body that grows over the limit is answered 413", "[server][limits]") {
  auto limits = test_limits();
  limits.max_body_bytes = 64 * 1024;
  running_server server(limits);
  tls_client client(server.tls_port());
  REQUIRE_FALSE(client.handshake());
  client.write_raw(
      "POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n");
  const std::string chunk(16 * 1024, 'x');
  char size_line[32];
  std::snprintf(size_line, sizeof size_line, "%zx\r\n", chunk.size());
  for (int i = 0; i < 5; ++i) client.write_raw(std::string(size_line) + chunk + "\r\n");
  const auto res = client.receive();
  CHECK(res.result() == http::status::payload_too_large);
}

TEST_CASE("oversized request headers are answered 431", "[server][limits]") {
  running_server server;
  tls_client client(server.tls_port());
  REQUIRE_FALSE(client.handshake());
  auto req = make_request(http::verb::get, "/healthz", "", "");
  req.set("X-Padding", std::string(32 * 1024, 'a'));
  const auto res = client.send(std::move(req));
  CHECK(res.result() == http::status::request_header_fields_too_large);
}

namespace {

// GET /metrics on the plain listener, and the value of one series in it ("" when absent).
std::string scrape(unsigned short plain_port) {
  asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.expires_after(5s);
  stream.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), plain_port));
  auto req = make_request(http::verb::get, "/metrics", "", "");
  http::write(stream, req);
  beast::flat_buffer buffer;
  response res;
  http::read(stream, buffer, res);
  return res.body();
}

std::string series_value(const std::string& page, const std::string& series) {
  std::istringstream lines(page);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(series + " ", 0) == 0) return line.substr(series.size() + 1);
  }
  return "";
}

}  // namespace

TEST_CASE("requests refused while being read are counted under their path by the router",
          "[server][limits][metrics]") {
  running_server server;
  {  // 413 from the Content-Length alone
    tls_client client(server.tls_port());
    REQUIRE_FALSE(client.handshake());
    client.write_raw(
        "POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        "Content-Length: 8388608\r\n\r\n");
    CHECK(client.receive().result() == http::status::payload_too_large);
  }
  {  // 431: the header never completes, the router still learns the target
    tls_client client(server.tls_port());
    REQUIRE_FALSE(client.handshake());
    auto req = make_request(http::verb::post, "/preview", "{}");
    req.set("X-Padding", std::string(32 * 1024, 'a'));
    CHECK(client.send(std::move(req)).result() == http::status::request_header_fields_too_large);
  }
  {  // 400: a malformed header line on /healthz
    tls_client client(server.tls_port());
    REQUIRE_FALSE(client.handshake());
    client.write_raw("GET /healthz HTTP/1.1\r\nHost: localhost\r\nBad Header\r\n\r\n");
    CHECK(client.receive().result() == http::status::bad_request);
  }
  const auto page = scrape(server.plain_port());
  CHECK(series_value(
            page, R"(trainenv_requests_total{decision="error",path="/mutate",policy=""})") == "1");
  CHECK(series_value(
            page, R"(trainenv_requests_total{decision="error",path="/preview",policy=""})") == "1");
  CHECK(series_value(
            page, R"(trainenv_requests_total{decision="error",path="/healthz",policy=""})") == "1");
  CHECK(series_value(page, R"(trainenv_requests_total{decision="error",path="other",policy=""})") ==
        "");
}

TEST_CASE("TLS 1.2 and 1.3 are accepted and 1.1 is refused", "[server][tls][versions]") {
  running_server server;
  {
    tls_client client(server.tls_port());
    REQUIRE_FALSE(client.handshake());
    CHECK(client.protocol() == "TLSv1.3");
  }
  {
    tls_client client(server.tls_port(), TLS1_2_VERSION);
    REQUIRE_FALSE(client.handshake());
    CHECK(client.protocol() == "TLSv1.2");
  }
  {
    tls_client client(server.tls_port(), TLS1_1_VERSION);
    CHECK(client.handshake());
  }
}

TEST_CASE("plain HTTP on the TLS port is refused and the server keeps serving", "[server][tls]") {
  running_server server;
  {
    asio::io_context ioc;
    beast::tcp_stream stream(ioc);
    stream.expires_after(5s);
    stream.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), server.tls_port()));
    auto req = make_request(http::verb::get, "/healthz", "", "");
    http::write(stream, req);
    beast::flat_buffer buffer;
    response res;
    boost::system::error_code ec;
    http::read(stream, buffer, res, ec);
    CHECK(ec);  // no HTTP answer to a non-TLS client
  }
  tls_client client(server.tls_port());
  serve_one_health_check(client);
}

TEST_CASE("the plain-HTTP listener serves health only", "[server][health]") {
  running_server server;
  asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.expires_after(5s);
  stream.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), server.plain_port()));
  beast::flat_buffer buffer;
  const auto get = [&](const std::string& target, http::verb verb = http::verb::get) {
    auto req = make_request(verb, target, verb == http::verb::post ? "{}" : "",
                            verb == http::verb::post ? "application/json" : "");
    http::write(stream, req);
    response res;
    http::read(stream, buffer, res);
    return res;
  };
  CHECK(get("/healthz").result() == http::status::ok);
  CHECK(get("/readyz").result() == http::status::ok);
  server.state.set_ready(false);
  CHECK(get("/readyz").result() == http::status::service_unavailable);
  CHECK(get("/healthz").result() == http::status::ok);
  CHECK(get("/mutate", http::verb::post).result() == http::status::not_found);
}

TEST_CASE("a request trickled slower than the read timeout is cut off", "[server][timeouts]") {
  auto limits = test_limits();
  limits.read_timeout = 300ms;
  running_server server(limits);
  tls_client client(server.tls_port());
  REQUIRE_FALSE(client.handshake());
  client.write_raw("POST /mutate HTTP/1.1\r\nHost: local");
  CHECK(client.time_until_closed(3s).has_value());
}

TEST_CASE("an idle keep-alive connection is closed after the idle timeout, not before",
          "[server][timeouts]") {
  auto limits = test_limits();
  limits.idle_timeout = 1500ms;
  running_server server(limits);
  tls_client client(server.tls_port());
  serve_one_health_check(client);
  const auto closed_after = client.time_until_closed(5s);
  REQUIRE(closed_after.has_value());
  CHECK(*closed_after >= 1200ms);
  CHECK(*closed_after < 4s);
}

TEST_CASE("a TLS record without a request (a KeyUpdate) leaves a connection idle, not reading",
          "[server][timeouts]") {
  auto limits = test_limits();
  limits.read_timeout = 300ms;
  running_server server(limits);
  tls_client client(server.tls_port());
  serve_one_health_check(client);
  REQUIRE(client.protocol() == "TLSv1.3");
  REQUIRE_FALSE(client.key_update());
  // Past the read timeout, well within the idle one: a connection taken to be reading a request
  // since the KeyUpdate arrived would be closed by now.
  std::this_thread::sleep_for(1s);
  for (int i = 0; i < 2; ++i) {
    CHECK(client.send(make_request(http::verb::get, "/healthz", "", "")).result() ==
          http::status::ok);
  }
}

TEST_CASE("an idle connection the client ends, or breaks, ends at once, not at the idle timeout",
          "[server][timeouts]") {
  auto limits = test_limits();
  limits.idle_timeout = 5s;
  running_server server(limits);
  tls_client client(server.tls_port());
  serve_one_health_check(client);
  std::optional<std::chrono::milliseconds> ended_after;
  SECTION("a close_notify: the server answers with its own") {
    ended_after = client.tls_shutdown(4s);
  }
  SECTION("a record that cannot be decrypted: the server closes the connection") {
    // Application data, 64 bytes that no key produced: the record's tag cannot verify.
    client.write_tcp(std::string("\x17\x03\x03\x00\x40", 5) + std::string(64, 'x'));
    ended_after = client.time_until_tcp_closed(4s);
  }
  REQUIRE(ended_after.has_value());
  CHECK(*ended_after < 1s);
}

TEST_CASE("a client that never completes the handshake is dropped at the handshake timeout",
          "[server][timeouts]") {
  auto limits = test_limits();
  limits.handshake_timeout = 300ms;
  running_server server(limits);
  asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), server.tls_port()));
  stream.expires_after(3s);
  char byte;
  boost::system::error_code ec;
  stream.read_some(asio::buffer(&byte, 1), ec);
  CHECK(ec);
  CHECK(ec != beast::error::timeout);
}

TEST_CASE("a body nested deeper than the parser goes is answered 400 on both routes",
          "[server][hostile]") {
  running_server server;
  tls_client client(server.tls_port());
  REQUIRE_FALSE(client.handshake());
  // A million levels on /mutate; on /preview as deep as its smaller body limit allows.
  const auto nested = [](std::size_t levels) {
    return std::string(levels, '[') + std::string(levels, ']');
  };
  for (const char* route : {"/mutate", "/preview"}) {
    INFO(route);
    const auto deep = nested(std::string_view(route) == "/mutate" ? 1'000'000 : 200'000);
    const auto res = client.send(make_request(http::verb::post, route, deep));
    CHECK(res.result() == http::status::bad_request);
    CHECK_THAT(json::parse(res.body())["error"].get<std::string>(),
               Catch::Contains("deeper than 1000"));
  }
  CHECK(client.send(make_request(http::verb::get, "/healthz", "", "")).result() ==
        http::status::ok);
}

namespace {

// A policy directory laid out as the kubelet mounts a ConfigMap: the files live in a
// timestamped directory, `..data` links to it, and each key links through `..data`.
class configmap_dir {
 public:
  configmap_dir()
      : root_(std::filesystem::temp_directory_path() /
              ("trainenv-policies-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  ~configmap_dir() { std::filesystem::remove_all(root_); }

  // Publishes a new version atomically, the kubelet's way: write, link ..data_tmp, rename it.
  void publish(const std::map<std::string, std::string>& files) {
    const auto version = "..v" + std::to_string(++versions_);
    std::filesystem::create_directory(root_ / version);
    for (const auto& [name, text] : files) std::ofstream(root_ / version / name) << text;
    std::filesystem::create_symlink(version, root_ / "..data_tmp");
    std::filesystem::rename(root_ / "..data_tmp", root_ / "..data");
    for (const auto& [name, text] : files) {
      if (!std::filesystem::is_symlink(root_ / name))
        std::filesystem::create_symlink("..data/" + name, root_ / name);
    }
  }
  [[nodiscard]] std::string path() const { return root_.string(); }

 private:
  std::filesystem::path root_;
  int versions_ = 0;
};

const std::string paddle_policy = R"(apiVersion: trainenv.io/v1alpha1
kind: TrainingPolicy
metadata:
  name: paddle
spec:
  frameworks: [paddle]
  defaults:
    masterPort: 36000
  env:
    - name: PADDLE_NNODES
      value: "${numNodes}"
    - name: PADDLE_MASTER
      value: "${masterAddr}:${masterPort}"
    - name: PADDLE_TRAINER_ID
      value: "${index}"
)";

}  // namespace

TEST_CASE("a new policy in a swapped ConfigMap directory applies within 2 s, requests flowing",
          "[server][reload]") {
  configmap_dir dir;
  const auto shipped = [](const char* name) {
    return test::read_file(std::string(TRAINENV_POLICIES_DIR) + "/" + name);
  };
  std::map<std::string, std::string> files = {
      {"torch.yaml", shipped("torch.yaml")},
      {"platform.yaml", shipped("platform.yaml")},
      {"owners.yaml", shipped("owners.yaml")},
      {"volcano-pytorch.yaml", shipped("volcano-pytorch.yaml")},
      {"mpi.yaml",
       shipped("mpi.yaml")}};  // owners.yaml names both (Volcano's default, its mpi plugin's)
  dir.publish(files);
  running_server server(test_limits(), dir.path());

  json paddle_pod = torch_pod(2);
  paddle_pod["metadata"]["labels"]["trainer.kubeflow.org/framework"] = "paddle";
  const std::string paddle_review = review_for(paddle_pod, "paddle").dump();
  const std::string torch_review = review_for(torch_pod(1), "torch").dump();

  // One client sends both pods over one keep-alive connection until told to stop (at most 20 s).
  std::atomic<bool> stop{false};
  std::atomic<int> requests{0}, failures{0}, torch_unpatched{0};
  std::atomic<long long> paddle_first_patched_ms{-1};
  const auto started = std::chrono::steady_clock::now();
  const auto elapsed_ms = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 started)
        .count();
  };
  std::string paddle_master_seen;
  std::thread client_thread([&] {
    tls_client client(server.tls_port());
    if (client.handshake()) {
      ++failures;
      return;
    }
    while (!stop && elapsed_ms() < 20'000) {
      for (const auto* body : {&paddle_review, &torch_review}) {
        const auto res = client.send(make_request(http::verb::post, "/mutate", *body));
        ++requests;
        if (res.result() != http::status::ok) {
          ++failures;
          continue;
        }
        const auto review = json::parse(res.body());
        const bool has_patch = review["response"].contains("patch");
        if (body == &torch_review && !has_patch) ++torch_unpatched;
        if (body == &paddle_review && has_patch && paddle_first_patched_ms < 0) {
          paddle_master_seen = env_value(patched(paddle_pod, review["response"]), "PADDLE_MASTER");
          paddle_first_patched_ms = elapsed_ms();
        }
      }
    }
  });

  std::this_thread::sleep_for(300ms);
  CHECK(paddle_first_patched_ms == -1);  // unknown framework: denied so far
  files["paddle.yaml"] = paddle_policy;
  const auto published_ms = elapsed_ms();
  dir.publish(files);
  while (paddle_first_patched_ms < 0 && elapsed_ms() < published_ms + 5000)
    std::this_thread::sleep_for(20ms);
  REQUIRE(paddle_first_patched_ms >= 0);
  CHECK(paddle_first_patched_ms - published_ms < 2000);
  CHECK(paddle_master_seen == "llama-ft-node-0-0.llama-ft:36000");
  CHECK(server.state.metrics.value(trainenv::server::counter::policy_reloads) >= 1);

  // An invalid set is refused; the last good one (with paddle) stays in force.
  files["torch.yaml"] += "  bogus: [\n";
  dir.publish(files);
  while (server.state.metrics.value(trainenv::server::counter::policy_reload_errors) == 0 &&
         elapsed_ms() < published_ms + 8000)
    std::this_thread::sleep_for(20ms);
  CHECK(server.state.metrics.value(trainenv::server::counter::policy_reload_errors) >= 1);
  const auto requests_after_bad_set = requests.load();
  while (requests < requests_after_bad_set + 20 && elapsed_ms() < 20'000)
    std::this_thread::sleep_for(10ms);
  stop = true;
  client_thread.join();
  CHECK(server.state.policies.read()->by_name("paddle") != nullptr);
  CHECK(requests > 20);
  CHECK(failures == 0);
  CHECK(torch_unpatched == 0);
}

TEST_CASE("drain: not ready at once, idle connections closed after the delay, then drained",
          "[server][drain]") {
  running_server server;
  tls_client idle(server.tls_port());
  REQUIRE_FALSE(idle.handshake());
  CHECK(idle.send(make_request(http::verb::get, "/healthz", "", "")).result() == http::status::ok);
  std::promise<bool> drained;
  const auto started = std::chrono::steady_clock::now();
  server.server->drain(300ms, 5s, [&](bool in_time) { drained.set_value(in_time); });
  CHECK_FALSE(server.state.ready());
  auto done = drained.get_future();
  REQUIRE(done.wait_for(3s) == std::future_status::ready);
  CHECK(done.get());
  CHECK(std::chrono::steady_clock::now() - started >= 300ms);
  CHECK(idle.time_until_closed(1s).has_value());
  // No longer accepting.
  asio::io_context ioc;
  tcp::socket probe(ioc);
  boost::system::error_code ec;
  probe.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), server.tls_port()), ec);
  CHECK(ec);
}

TEST_CASE("drain: a request still arriving at the deadline ends the drain, not in time",
          "[server][drain]") {
  running_server server;
  tls_client busy(server.tls_port());
  REQUIRE_FALSE(busy.handshake());
  // A header announcing a body that never comes: the connection is busy, not idle.
  busy.write_raw(
      "POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
      "Content-Length: 100\r\n\r\n{");
  std::this_thread::sleep_for(100ms);
  std::promise<bool> drained;
  server.server->drain(0ms, 500ms, [&](bool in_time) { drained.set_value(in_time); });
  auto done = drained.get_future();
  REQUIRE(done.wait_for(3s) == std::future_status::ready);
  CHECK_FALSE(done.get());
}
