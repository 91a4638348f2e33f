// The built binary against a cluster (`--kubeconfig`), run as a user runs it: preview reads a
// pod's owners and a TrainJob's runtime from the fake API server over HTTPS with a bearer token,
// through a kubeconfig written here; serve keeps reading them while the token file rotates.
// Hidden ([.cli]): ctest runs it as its own test, server/cli-kubeconfig, with TRAINENV_BINARY set.
#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <sstream>

#include <signal.h>
#include <sys/wait.h>
#include <chrono>
#include <regex>
#include <thread>

#include "doctor_fixtures.hpp"
#include "fake_apiserver.hpp"
#include "server_harness.hpp"
#include "server_process.hpp"
#include "temp_dir.hpp"
#include "trainenv/core/model/admission.hpp"
#include "trainenv/inputs/yaml.hpp"

namespace {

using namespace trainenv;
using nlohmann::json;

std::string source(const std::string& path) {
  return std::string(TRAINENV_SOURCE_DIR) + "/" + path;
}

// A kubeconfig whose current context is the fake API server (`user` is the kubeconfig's user
// entry: a token, or a tokenFile).
std::string write_kubeconfig(const test::fake_apiserver& api, const std::filesystem::path& dir,
                             const std::string& user = "token: test-token") {
  return api.write_kubeconfig(dir / "kubeconfig", user);
}

// The binary's standard output and exit status, bounded in time.
std::pair<std::string, int> run(const std::string& args) {
  const char* binary = std::getenv("TRAINENV_BINARY");
  REQUIRE(binary != nullptr);
  const std::string command = "timeout 60 " + std::string(binary) + " " + args + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  std::array<char, 4096> buffer{};
  while (const auto n = std::fread(buffer.data(), 1, buffer.size(), pipe))
    out.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

// What a command prints on standard output, bounded in time.
std::string output_of(const std::string& command) {
  FILE* pipe = ::popen(("timeout 30 " + command).c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  std::array<char, 4096> buffer{};
  while (const auto n = std::fread(buffer.data(), 1, buffer.size(), pipe))
    out.append(buffer.data(), n);
  ::pclose(pipe);
  return out;
}

using trainenv::test::temp_dir;

}  // namespace

TEST_CASE("preview --kubeconfig reads a Trainer pod's owners from the cluster", "[.cli]") {
  test::fake_apiserver api;
  api.load_yaml(source("examples/owners/trainer-torch-owners.yaml"));
  temp_dir dir("kubeconfig");
  const auto kubeconfig = write_kubeconfig(api, dir.path);
  const auto [out, status] =
      run("preview -f " + source("examples/owners/trainer-torch-pod.yaml") + " --kubeconfig " +
          kubeconfig + " --policies " + source("policies"));
  INFO(out);
  REQUIRE(status == 0);
  const auto answer = json::parse(out);
  CHECK(answer["policy"] == "torch");
  std::map<std::string, std::string> env;
  for (const auto& e : answer["object"]["spec"]["containers"][0]["env"])
    env[e["name"]] = e.value("value", "");
  CHECK(env["WORLD_SIZE"] == "3");
  CHECK(env["RANK"] == "1");
  CHECK(api.total_gets() >= 4);  // Job, JobSet, TrainJob, runtime
}

TEST_CASE("preview --kubeconfig with a token the cluster refuses denies with 500", "[.cli]") {
  test::fake_apiserver api;
  api.load_yaml(source("examples/owners/volcano-owners.yaml"));
  api.set_tokens({"another-token"});
  temp_dir dir("kubeconfig");
  const auto kubeconfig = write_kubeconfig(api, dir.path);
  const auto [out, status] =
      run("preview -f " + source("examples/owners/volcano-worker-pod.yaml") + " --kubeconfig " +
          kubeconfig + " --policies " + source("policies"));
  INFO(out);
  CHECK(status == 1);
  CHECK_THAT(out, Catch::Contains("unauthorized (401)"));
}

TEST_CASE("preview --kubeconfig runs the user's exec credential plugin, serve never does",
          "[.cli]") {
  test::fake_apiserver api({.tokens = {"from-plugin"}});
  api.load_yaml(source("examples/owners/trainer-torch-owners.yaml"));
  temp_dir dir("kubeconfig");
  const auto plugin = dir.path / "get-token";
  std::ofstream(plugin)
      << "#!/bin/sh\n"
         "[ \"$1\" = --cluster ] || exit 9\n"
         "echo '{\"apiVersion\": \"client.authentication.k8s.io/v1\", "
         "\"kind\": \"ExecCredential\", \"status\": {\"token\": \"from-plugin\"}}'\n";
  std::filesystem::permissions(plugin, std::filesystem::perms::owner_all);
  // "./get-token": a command with a '/' is the kubeconfig's own file, found beside it.
  const auto kubeconfig =
      write_kubeconfig(api, dir.path,
                       "exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                       "      command: ./get-token\n      args: [--cluster]\n"
                       "      interactiveMode: Never");
  const auto pod = source("examples/owners/trainer-torch-pod.yaml");
  {
    const auto [out, status] = run("preview -f " + pod + " --kubeconfig " + kubeconfig +
                                   " --policies " + source("policies"));
    INFO(out);
    REQUIRE(status == 0);
    CHECK(json::parse(out)["policy"] == "torch");
    CHECK(api.total_gets() >= 4);  // read with the plugin's token, which the server accepts
  }
  {
    const auto [out, status] =
        run("serve --kubeconfig " + kubeconfig + " --policies " + source("policies") +
            " --listen 127.0.0.1:0 --metrics-listen "
            "127.0.0.1:0 --tls-cert " +
            test::cert_dir() +
            "/tls.crt "
            "--tls-key " +
            test::cert_dir() + "/tls.key");
    INFO(out);
    CHECK(status != 0);
    CHECK_THAT(out, Catch::Contains("come from an exec plugin, which the webhook never runs"));
  }
  std::ofstream(plugin) << "#!/bin/sh\necho 'token expired: run sso login' >&2\nexit 4\n";
  const auto [out, status] = run("preview -f " + pod + " --kubeconfig " + kubeconfig +
                                 " --policies " + source("policies"));
  CHECK(status == 2);
  CHECK_THAT(out, Catch::Contains("token expired: run sso login"));  // its stderr, passed on
  CHECK_THAT(out, Catch::Contains("getting credentials: exec: executable " +
                                  (dir.path / "get-token").string() + " failed with exit code 4"));
}

TEST_CASE("preview --job --kubeconfig reads the TrainJob's runtime from the cluster", "[.cli]") {
  test::fake_apiserver api;
  api.load_yaml(source("examples/jobs/runtimes.yaml"));
  temp_dir dir("kubeconfig");
  const auto kubeconfig = write_kubeconfig(api, dir.path);
  const auto [out, status] =
      run("preview --job -o json -f " + source("examples/jobs/trainjob-deepspeed.yaml") +
          " --kubeconfig " + kubeconfig + " --policies " + source("policies"));
  INFO(out);
  REQUIRE(status == 0);
  const auto answer = json::parse(out);
  CHECK(answer["ok"] == true);
  CHECK(answer["pods"].size() == 4);
  CHECK(api.total_gets() == 1);  // the runtime; the job's own objects are laid out, not read
}

TEST_CASE("serve --kubeconfig with a tokenFile: a rotated token reaches the running server",
          "[.cli]") {
  test::fake_apiserver api({.tokens = {"token-1"}});
  api.load_yaml(source("examples/owners/trainer-torch-owners.yaml"));
  temp_dir dir("kubeconfig");
  const auto token_file = dir.path / "token";
  std::ofstream(token_file) << "token-1\n";
  const auto kubeconfig = write_kubeconfig(api, dir.path, "tokenFile: " + token_file.string());
  auto pod =
      inputs::parse_document(test::read_file(source("examples/owners/trainer-torch-pod.yaml")));
  REQUIRE(pod.ok());
  std::ofstream(dir.path / "review.json") << test::pod_review(*pod, "u-rotation").dump();
  // A cache that keeps nothing for long: each admission reads the owners again.
  test::server_process serve(test::built_binary(), dir.path / "serve.log",
                             {"--kubeconfig", kubeconfig, "--owner-cache-ttl", "0.001"},
                             test::cert_dir());
  const auto admit = [&] {
    const auto out = output_of("curl -s --cacert " + test::cert_dir() +
                               "/ca.crt -H 'Content-Type: application/json' --data-binary @" +
                               (dir.path / "review.json").string() +
                               " https://localhost:" + std::to_string(serve.port()) + "/mutate");
    INFO(out);
    const auto answer = json::parse(out);
    return answer["response"].value("allowed", false) && answer["response"].contains("patch");
  };
  const auto metric = [&](const std::string& name) {
    const auto text =
        output_of("curl -s http://127.0.0.1:" + std::to_string(serve.plain_port()) + "/metrics");
    const auto at = text.find("\n" + name + " ");
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + name.size() + 2));
  };

  CHECK(admit());
  const auto gets_before = api.total_gets();
  CHECK(metric("trainenv_api_token_reloads_total") == 0);

  // The kubelet writes a new token; the API server stops accepting the old one.
  std::ofstream(token_file) << "token-2\n";
  api.set_tokens({"token-2"});
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the cached owners expire
  CHECK(admit());
  CHECK(api.total_gets() > gets_before);
  CHECK(metric("trainenv_api_token_reloads_total") == 1);
  CHECK(metric("trainenv_owner_lookups_total{kind=\"job\",result=\"unauthorized\"}") == -1);
  INFO(serve.log_text());
  CHECK(serve.terminate(std::chrono::seconds(30)) == 0);
}

namespace {

// The fake API server serving every object of tests/fixtures/doctor/<name>.json.
void serve_fixture(test::fake_apiserver& api, const std::string& name) {
  const auto dump = test::doctor_fixture(name);
  for (const auto& object : dump.objects()) api.add_object(object);
}

// A kubeconfig whose context works in namespace team-a (doctor's default namespace).
std::string team_kubeconfig(const test::fake_apiserver& api, const std::filesystem::path& dir) {
  const auto path = write_kubeconfig(api, dir);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  auto config = text.str();
  const std::string context = "{cluster: fake, user: tester}";
  config.replace(config.find(context), context.size(),
                 "{cluster: fake, user: tester, namespace: team-a}");
  std::ofstream(path) << config;
  return path;
}

}  // namespace

TEST_CASE("doctor --kubeconfig reads a live job as its user, in its context's namespace",
          "[.cli]") {
  temp_dir dir("kubeconfig");
  const std::string policies = " --policies " + source("policies");
  {
    test::fake_apiserver api;
    serve_fixture(api, "healthy-trainjob");
    const auto kubeconfig = team_kubeconfig(api, dir.path);
    const auto [out, status] = run("doctor trainjob/llama --kubeconfig " + kubeconfig + policies);
    INFO(out);
    CHECK(status == 0);
    CHECK_THAT(out, Catch::Contains("TrainJob team-a/llama") && Catch::Contains("healthy:"));
    const auto [json_out, json_status] =
        run("doctor trainjob/llama -o json --kubeconfig " + kubeconfig + policies);
    CHECK(json_status == 0);
    CHECK(json::parse(json_out)["doctor"]["healthy"] == true);
  }
  {
    test::fake_apiserver api;
    serve_fixture(api, "not-published");
    const auto [out, status] =
        run("doctor jobset/gpt --kubeconfig " + team_kubeconfig(api, dir.path) + policies);
    INFO(out);
    CHECK(status == 1);
    CHECK_THAT(out, Catch::Contains("error not-published: "));
  }
}

TEST_CASE("doctor --kubeconfig: unreadable pods exit 2, unreadable events are not checked",
          "[.cli]") {
  temp_dir dir("kubeconfig");
  const std::string policies = " --policies " + source("policies");
  test::fake_apiserver api;
  serve_fixture(api, "denied");
  const auto kubeconfig = team_kubeconfig(api, dir.path);
  api.misbehave("/api/v1/namespaces/team-a/events",
                {std::chrono::milliseconds(0), test::fault::forbidden});
  const auto [out, status] = run("doctor jobset/gpt --kubeconfig " + kubeconfig + policies);
  INFO(out);
  CHECK(status == 0);  // the denial was in the events: 2 pods only "not created"
  CHECK_THAT(out, Catch::Contains("not checked: events: ") &&
                      Catch::Contains("cannot list resource \"events\""));
  api.misbehave("/api/v1/namespaces/team-a/pods",
                {std::chrono::milliseconds(0), test::fault::forbidden});
  const auto [denied, denied_status] =
      run("doctor jobset/gpt --kubeconfig " + kubeconfig + policies);
  INFO(denied);
  CHECK(denied_status == 2);
  CHECK_THAT(denied,
             Catch::Contains("trainenv doctor: listing pods: ") && Catch::Contains("forbidden"));
  const auto [missing, missing_status] =
      run("doctor jobset/nope --kubeconfig " + kubeconfig + policies);
  CHECK(missing_status == 2);
  CHECK_THAT(missing, Catch::Contains("JobSet.jobset.x-k8s.io nope not found in namespace team-a"));
}

TEST_CASE("doctor --logs names a launcher's start-up failure from its log", "[.cli]") {
  temp_dir dir("kubeconfig");
  test::fake_apiserver api;
  serve_fixture(api, "crash-loop");
  api.set_log("team-a", "gpt-master-0-0-32a7c", "node",
              "[c10d] The server socket has failed to listen on any local network address.\n",
              true);
  const auto kubeconfig = team_kubeconfig(api, dir.path);
  const std::string args =
      "doctor jobset/gpt --kubeconfig " + kubeconfig + " --policies " + source("policies");
  const auto [out, status] = run(args + " --logs");
  INFO(out);
  CHECK(status == 1);
  CHECK_THAT(out, Catch::Contains("error startup-failure: torch (torch-port-in-use)"));
  const auto [without, without_status] = run(args);  // no --logs: no log read
  CHECK_THAT(without, !Catch::Contains("startup-failure"));
}

TEST_CASE("doctor --until-healthy reads again until the job heals, or gives its last diagnosis",
          "[.cli]") {
  temp_dir dir("kubeconfig");
  const std::string policies = " --policies " + source("policies");
  test::fake_apiserver api;
  serve_fixture(api, "not-published");
  const auto kubeconfig = team_kubeconfig(api, dir.path);
  // Past its time-out, the last diagnosis is the answer.
  const auto [late, late_status] =
      run("doctor jobset/gpt --until-healthy --timeout 1 --kubeconfig " + kubeconfig + policies);
  CHECK(late_status == 1);
  CHECK_THAT(late, Catch::Contains("error not-published: "));
  // The master turns Ready and its name is published 2 s after doctor starts.
  const auto start = std::chrono::steady_clock::now();
  auto healed = std::async(std::launch::async, [&] {
    return run("doctor jobset/gpt --until-healthy --timeout 60 --kubeconfig " + kubeconfig +
               policies);
  });
  std::this_thread::sleep_for(std::chrono::seconds(2));
  serve_fixture(api, "healthy-jobset");
  const auto [out, status] = healed.get();
  INFO(out);
  CHECK(status == 0);
  CHECK_THAT(out, Catch::Contains("JobSet team-a/gpt not healthy yet (not-published); reading "
                                  "again in 5 s") &&
                      Catch::Contains("healthy:"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
}
