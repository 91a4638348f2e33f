// The memory bombs of issue 37 against the built binary, measured from outside: the peak RSS
// (VmHWM) of `trainenv serve` under the worst single requests and a flood of them bounded by the
// server's limits must stay under the memory limit of manifests/base/deployment.yaml, with the
// server healthy after. What the manifest says it measured is what this prints (WARN).
//
// Hidden ([.memory]): ctest runs it as server/memory against the Release binary, with
// TRAINENV_BINARY set; not built under a sanitizer, where RSS means nothing.
#include <catch2/catch.hpp>

#include <atomic>
#include <fstream>
#include <regex>
#include <thread>

#include "fake_apiserver.hpp"
#include "hostile_clients.hpp"
#include "server_harness.hpp"
#include "server_process.hpp"
#include "temp_dir.hpp"

namespace {

using namespace trainenv;
using namespace trainenv::test;
using nlohmann::json;
namespace fs = std::filesystem;

// The Deployment's memory limit, in KiB, and the flags it runs serve with.
long manifest_limit_kib() {
  const auto text = read_file(std::string(TRAINENV_SOURCE_DIR) + "/manifests/base/deployment.yaml");
  static const std::regex limit(R"(limits:\s*\n\s*memory:\s*(\d+)Mi)");
  std::smatch m;
  REQUIRE(std::regex_search(text, m, limit));
  return std::stol(m[1]) * 1024;
}
std::string manifest_threads() {
  const auto text = read_file(std::string(TRAINENV_SOURCE_DIR) + "/manifests/base/deployment.yaml");
  static const std::regex threads(R"(--threads=(\d+))");
  std::smatch m;
  REQUIRE(std::regex_search(text, m, threads));
  return m[1];
}

// One request on a connection of its own; its status (0: no answer), within `limit`.
unsigned post(unsigned short port, const std::string& target, const std::string& body,
              std::chrono::seconds limit = std::chrono::seconds(60)) {
  try {
    asio::io_context ioc;
    auto ctx = verifying_client_context();
    beast::ssl_stream<beast::tcp_stream> s(ioc, ctx);
    prepare_client_stream(s);
    beast::get_lowest_layer(s).expires_after(limit);
    beast::get_lowest_layer(s).connect(loopback(port));
    s.handshake(ssl::stream_base::client);
    auto req = make_request(http::verb::post, target, body);
    http::write(s, req);
    beast::flat_buffer b;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 * 1024 * 1024);
    http::read(s, b, parser);
    return parser.get().result_int();
  } catch (const std::exception&) {
    return 0;
  }
}

// An AdmissionReview of a training pod padded to `bytes` with many small values: the shape that
// costs a parser most per byte.
std::string padded_review(std::size_t bytes) {
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", "p"},
                {"namespace", "team-a"},
                {"labels", {{"trainer.kubeflow.org/trainjob-ancestor-step", "trainer"}}},
                {"annotations", {{"trainenv.io/num-nodes", "2"}}}}},
              {"spec", {{"containers", {{{"name", "node"}, {"image", "x"}}}}}}};
  pod["spec"]["pad"] = json::array();
  for (std::size_t i = 0; i < bytes / 2; ++i) pod["spec"]["pad"].push_back(0);
  return pod_review(pod, "bomb").dump();
}

// A JobSet that asks for `replicated` x `replicas` Jobs of `parallelism` pods.
std::string jobset(int replicated, int replicas, int parallelism) {
  json rjs = json::array();
  for (int i = 0; i < replicated; ++i) {
    rjs.push_back(
        {{"name", "r" + std::to_string(i)},
         {"replicas", replicas},
         {"template",
          {{"spec",
            {{"parallelism", parallelism},
             {"completions", parallelism},
             {"template",
              {{"metadata",
                {{"labels", {{"trainer.kubeflow.org/trainjob-ancestor-step", "trainer"}}}}},
               {"spec", {{"containers", {{{"name", "node"}, {"image", "x"}}}}}}}}}}}}});
  }
  return json{{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
              {"kind", "JobSet"},
              {"metadata", {{"name", "bomb"}, {"namespace", "team-a"}}},
              {"spec", {{"replicatedJobs", rjs}}}}
      .dump();
}

// Runs `n` copies of `work(i)` at once and waits for them.
template <class Work>
void at_once(int n, Work work) {
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back([&, i] { work(i); });
  for (auto& t : threads) t.join();
}

// A JobSet `name` in team-a whose pod template carries `env_entries` variables (its size), the
// Job JobSet made of it, and the first pod of that Job as the Job controller creates it.
struct owned_pod {
  json jobset;
  json job;
  json pod;
};
owned_pod owned(const std::string& name, int env_entries) {
  json env = json::array();
  for (int e = 0; e < env_entries; ++e)
    env.push_back(
        {{"name", "V" + std::to_string(e)}, {"value", "0123456789abcdef0123456789abcdef"}});
  owned_pod out;
  out.jobset = {
      {"apiVersion", "jobset.x-k8s.io/v1alpha2"},
      {"kind", "JobSet"},
      {"metadata", {{"name", name}, {"namespace", "team-a"}, {"uid", "uid-" + name}}},
      {"spec",
       {{"replicatedJobs",
         {{{"name", "node"},
           {"replicas", 1},
           {"template",
            {{"spec",
              {{"parallelism", 2},
               {"completions", 2},
               {"template",
                {{"spec",
                  {{"containers", {{{"name", "node"}, {"image", "x"}, {"env", env}}}}}}}}}}}}}}}}}};
  const auto controlled_by = [](const std::string& api_version, const std::string& kind,
                                const std::string& owner, const std::string& uid) {
    return json::array({{{"apiVersion", api_version},
                         {"kind", kind},
                         {"name", owner},
                         {"uid", uid},
                         {"controller", true}}});
  };
  out.job = {{"apiVersion", "batch/v1"},
             {"kind", "Job"},
             {"metadata",
              {{"name", name + "-node-0"},
               {"namespace", "team-a"},
               {"uid", "uid-job-" + name},
               {"ownerReferences",
                controlled_by("jobset.x-k8s.io/v1alpha2", "JobSet", name, "uid-" + name)}}},
             {"spec", {{"parallelism", 2}, {"completions", 2}}}};
  out.pod = {{"apiVersion", "v1"},
             {"kind", "Pod"},
             {"metadata",
              {{"generateName", name + "-node-0-0-"},
               {"namespace", "team-a"},
               {"labels",
                {{"trainer.kubeflow.org/trainjob-ancestor-step", "trainer"},
                 {"jobset.sigs.k8s.io/jobset-name", name},
                 {"jobset.sigs.k8s.io/jobset-uid", "uid-" + name},
                 {"jobset.sigs.k8s.io/replicatedjob-name", "node"},
                 {"jobset.sigs.k8s.io/job-index", "0"},
                 {"batch.kubernetes.io/job-completion-index", "0"}}},
               {"ownerReferences",
                controlled_by("batch/v1", "Job", name + "-node-0", "uid-job-" + name)}}},
             {"spec",
              {{"hostname", name + "-node-0-0"},
               {"subdomain", name},
               {"containers", {{{"name", "node"}, {"image", "x"}}}}}}};
  return out;
}

// A POST with a bearer token (the previews' port), its status.
unsigned post_as(unsigned short port, const std::string& target, const std::string& body,
                 const std::string& token) {
  try {
    tls_client c(port);
    if (c.handshake()) return 0;
    auto req = make_request(http::verb::post, target, body);
    req.set(http::field::authorization, "Bearer " + token);
    return c.send(std::move(req)).result_int();
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

// Every budget at once, as the Deployment runs serve: API access and the previews' port, the
// owner cache filled, owners as large as the API server keeps, and the largest request of each
// kind in a flood beside the admission port's cap of half-done handshakes.
TEST_CASE("no request, and no flood within the limits, takes serve past its manifest's memory",
          "[.memory]") {
  temp_dir dir("memory");
  const auto limit = manifest_limit_kib();
  fake_apiserver api({.tokens = {"test-token", "alice"}});
  // Nine JobSets of ~2.5 MB (issue 37: one 3.5 MB owner took 28 MiB; nine passed the limit), and
  // 80 of ~100 KB, enough to fill the owner cache's 32 MiB.
  std::vector<json> huge_pods;
  std::vector<json> filling_pods;
  for (int j = 0; j < 9; ++j) {
    auto o = owned("huge-" + std::to_string(j), 40'000);
    api.add_object(o.jobset);
    api.add_object(o.job);
    huge_pods.push_back(std::move(o.pod));
  }
  for (int j = 0; j < 80; ++j) {
    auto o = owned("fill-" + std::to_string(j), 1'600);
    api.add_object(o.jobset);
    api.add_object(o.job);
    filling_pods.push_back(std::move(o.pod));
  }
  server_process server(built_binary(), dir.path / "serve.log",
                        {"--threads", manifest_threads(), "--drain-delay", "0", "--kubeconfig",
                         api.write_kubeconfig(dir.path / "kubeconfig"), "--preview-listen",
                         "127.0.0.1:0", "--lookup-timeout", "10"},
                        cert_dir());
  REQUIRE(server.preview_port() != 0);
  const auto base = server.rss_kib();

  // The single bombs of issue 37, each refused before it costs memory.
  CHECK(post_as(server.preview_port(), "/preview/job", jobset(30, 1024, 0), "alice") == 422);
  CHECK(post_as(server.preview_port(), "/preview", std::string(7 * 1024 * 1024, ' '), "alice") ==
        413);
  const auto after_bombs = server.peak_rss_kib();

  // The owner cache filled.
  std::atomic<int> filled{0};
  at_once(8, [&](int t) {
    for (std::size_t i = static_cast<std::size_t>(t); i < filling_pods.size(); i += 8) {
      if (post(server.port(), "/mutate", pod_review(filling_pods[i], "fill").dump()) == 200)
        ++filled;
    }
  });
  CHECK(filled == 80);

  // The flood: every kind of request at its largest, at once, beside as many half-done
  // handshakes as the admission port's cap (2,048) leaves room for.
  const auto fds = raise_fd_limit(8192);
  const auto half_done = std::min<long>(1950, static_cast<long>(fds) / 2 - 100);
  REQUIRE(half_done >= 1000);
  const auto hello = client_hello();
  std::vector<std::unique_ptr<raw_connection>> handshakes;
  for (long i = 0; i < half_done; ++i) {
    handshakes.push_back(std::make_unique<raw_connection>(server.port()));
    (void)handshakes.back()->write(hello);
  }
  const auto mutate_body = padded_review(7 * 1024 * 1024 - 4096);
  const auto preview_body = json::parse(padded_review(500 * 1024))["request"]["object"].dump();
  const auto job_body = jobset(2, 1, 250);  // 500 pods: the served preview's bound
  // Per kind of request: answered, refused for the budget (503), anything else (no answer, 500).
  struct tally {
    std::atomic<int> ok{0}, busy{0}, other{0};
    void add(unsigned status) { status == 200 ? ++ok : status == 503 ? ++busy : ++other; }
  };
  tally mutate, preview, job, owners;
  at_once(92, [&](int i) {
    if (i < 24) {
      mutate.add(post(server.port(), "/mutate", mutate_body));
    } else if (i < 48) {
      preview.add(post_as(server.preview_port(), "/preview", preview_body, "alice"));
    } else if (i < 56) {
      job.add(post_as(server.preview_port(), "/preview/job", job_body, "alice"));
    } else {
      const auto& pod = huge_pods[static_cast<std::size_t>(i) % huge_pods.size()];
      owners.add(post(server.port(), "/mutate", pod_review(pod, "huge").dump()));
    }
  });
  handshakes.clear();
  const auto peak = server.peak_rss_kib();
  WARN("serve --threads " << manifest_threads() << ": RSS at start " << base / 1024
                          << " MiB; peak after the single bombs " << after_bombs / 1024
                          << " MiB; peak with the owner cache full and the flood (" << half_done
                          << " half-done handshakes, 24 /mutate of 7 MiB, 24 "
                          << "previews of 500 KiB, 8 job previews of 500 pods, 36 pods of 2.5 MB "
                          << "owners) " << peak / 1024 << " MiB (limit " << limit / 1024
                          << " MiB); answered / 503: /mutate 7 MiB " << mutate.ok << " / "
                          << mutate.busy << ", previews " << preview.ok << " / " << preview.busy
                          << ", job previews " << job.ok << " / " << job.busy << ", owners "
                          << owners.ok << " / " << owners.busy);
  // Every request is answered or refused for the budget, never dropped.
  for (const auto* t : {&mutate, &preview, &job, &owners}) CHECK(t->other == 0);
  CHECK(mutate.ok >= 1);
  // The budget holds all of them but the 7 MiB reviews and the job previews (64 MiB each) at
  // once: which of those two get in first is a race the machine's speed decides (CI once saw
  // job previews 6 / 2 with every 7 MiB review answered), so each is answered or refused, and
  // at least one of each answered.
  CHECK(preview.ok == 24);
  CHECK(job.ok + job.busy == 8);
  CHECK(job.ok >= 1);
  CHECK(owners.ok == 36);
  CHECK(peak < limit);
  // Still serving.
  CHECK(post(server.port(), "/mutate", padded_review(1000)) == 200);
  CHECK(server.terminate(std::chrono::seconds(30)) == 0);
}
