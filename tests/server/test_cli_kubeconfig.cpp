// The preview command against a cluster (`--kubeconfig`): the built binary, run as a user runs
// it, reads a pod's owners and a TrainJob's runtime from the fake API server over HTTPS with a
// bearer token, through a kubeconfig written here. Hidden ([.cli]): ctest runs it as its own
// test, server/cli-kubeconfig, with TRAINENV_BINARY set.
#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "fake_apiserver.hpp"
#include "trainenv/core/admission.hpp"

namespace {

using namespace trainenv;
using nlohmann::json;

std::string source(const std::string& path) {
  return std::string(TRAINENV_SOURCE_DIR) + "/" + path;
}

// A kubeconfig whose current context is the fake API server, its CA inline, a bearer token.
std::string write_kubeconfig(const test::fake_apiserver& api, const std::filesystem::path& dir) {
  const auto path = dir / "kubeconfig";
  std::ofstream(path) << "apiVersion: v1\nkind: Config\n"
                      << "clusters:\n- name: fake\n  cluster:\n    server: https://127.0.0.1:"
                      << api.port()
                      << "\n    certificate-authority-data: " << core::base64_encode(api.ca().cert)
                      << "\n"
                      << "users:\n- name: tester\n  user:\n    token: test-token\n"
                      << "contexts:\n- name: fake\n  context: {cluster: fake, user: tester}\n"
                      << "current-context: fake\n";
  return path.string();
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

struct temp_dir {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("trainenv-kubeconfig-" + std::to_string(::getpid()));
  temp_dir() { std::filesystem::create_directories(path); }
  ~temp_dir() { std::filesystem::remove_all(path); }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
};

}  // namespace

TEST_CASE("preview --kubeconfig reads a Trainer pod's owners from the cluster", "[.cli]") {
  test::fake_apiserver api;
  api.load_yaml(source("examples/owners/trainer-torch-owners.yaml"));
  temp_dir dir;
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
  temp_dir dir;
  const auto kubeconfig = write_kubeconfig(api, dir.path);
  const auto [out, status] =
      run("preview -f " + source("examples/owners/volcano-worker-pod.yaml") + " --kubeconfig " +
          kubeconfig + " --policies " + source("policies"));
  INFO(out);
  CHECK(status == 1);
  CHECK_THAT(out, Catch::Contains("unauthorized (401)"));
}

TEST_CASE("preview --job --kubeconfig reads the TrainJob's runtime from the cluster", "[.cli]") {
  test::fake_apiserver api;
  api.load_yaml(source("examples/jobs/runtimes.yaml"));
  temp_dir dir;
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
