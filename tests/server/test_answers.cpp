// The answers /mutate gives, byte for byte, against a stored record: performance work may change
// how an answer is made, never what it is. Each body (the review fixtures, the example pods
// with their owners, the benchmark's four shapes, and tests/answers/mutate/: the fuzz_review
// corpus, merged by coverage) is POSTed to the router the server runs, its owners read from
// the examples' owner files; the status and a SHA-256 of the answer's bytes must equal the line
// in tests/answers/mutate.tsv. TRAINENV_UPDATE_ANSWERS=1 rewrites that file instead (only when
// an answer is meant to change: say why in the commit).
#include <catch2/catch.hpp>

#include <openssl/evp.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "../../bench/pod_shapes.hpp"
#include "../test_support.hpp"
#include "trainenv/inputs/owner_file.hpp"
#include "trainenv/inputs/policy_dir.hpp"
#include "trainenv/inputs/yaml.hpp"
#include "trainenv/server/router.hpp"

namespace {

using namespace trainenv;
namespace fs = std::filesystem;

const std::string source_dir = TRAINENV_SOURCE_DIR;

std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_sha256(), nullptr);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < size; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 0xf];
  }
  return out;
}

std::vector<fs::path> files_in(const fs::path& dir, const std::string& ending = "") {
  std::vector<fs::path> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const auto name = entry.path().filename().string();
    if (entry.is_regular_file() && name.size() >= ending.size() &&
        name.compare(name.size() - ending.size(), ending.size(), ending) == 0)
      out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Every owner object of the examples and the owner fixtures, as one --owners file.
std::shared_ptr<const inputs::owner_file> all_owners() {
  std::string text;
  for (const auto& dir : {source_dir + "/examples/owners", source_dir + "/tests/fixtures/owners"}) {
    for (const auto& file : files_in(dir, ".yaml")) {
      if (file.filename().string().find("-pod") != std::string::npos) continue;
      text += "---\n" + test::read_file(file.string()) + "\n";
    }
  }
  auto owners = inputs::owner_file::parse(text, "examples/owners and tests/fixtures/owners");
  REQUIRE(owners.ok());
  return std::make_shared<const inputs::owner_file>(std::move(*owners));
}

// An AdmissionReview of an example pod, as the kube-apiserver sends it.
std::string review_of_pod_file(const fs::path& file) {
  auto pod = inputs::parse_document(test::read_file(file.string()));
  REQUIRE(pod.ok());
  const nlohmann::json review = {
      {"apiVersion", "admission.k8s.io/v1"},
      {"kind", "AdmissionReview"},
      {"request",
       {{"uid", "answers-" + file.stem().string()},
        {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
        {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
        {"namespace", (*pod)["metadata"].value("namespace", "default")},
        {"operation", "CREATE"},
        {"object", *pod}}}};
  return review.dump();
}

// name -> body, in a stable order.
std::map<std::string, std::string> corpus() {
  std::map<std::string, std::string> bodies;
  for (const auto& file : files_in(source_dir + "/tests/fixtures", ".json"))
    bodies["fixture/" + file.filename().string()] = test::read_file(file.string());
  for (const auto& file : files_in(source_dir + "/examples/owners", "-pod.yaml"))
    bodies["example/" + file.filename().string()] = review_of_pod_file(file);
  for (const auto& shape : bench::pod_shapes()) bodies["bench/" + shape.name] = shape.body;
  for (const auto& file : files_in(source_dir + "/tests/answers/mutate"))
    bodies["fuzz/" + file.filename().string()] = test::read_file(file.string());
  return bodies;
}

}  // namespace

TEST_CASE("every stored body gets its stored answer from /mutate, byte for byte", "[answers]") {
  server::server_state state;
  auto loaded = inputs::load_policy_dir(TRAINENV_POLICIES_DIR);
  REQUIRE(loaded.errors.empty());
  state.policies.publish(loaded.policies);
  state.owners.file = all_owners();
  const server::router router(state, server::listener_kind::admission,
                              {std::size_t{3} * 1024 * 1024, std::size_t{512} * 1024});
  boost::asio::io_context ioc;

  std::string answers;
  std::size_t patched = 0;
  const auto bodies = corpus();
  for (const auto& [name, body] : bodies) {
    server::http_request request{server::http::verb::post, "/mutate", 11};
    request.set(server::http::field::content_type, "application/json");
    request.body() = body;
    request.prepare_payload();
    const auto response = server::run_to_end(ioc, router.handle(request));
    answers += name + "\t" + std::to_string(response.result_int()) + "\t" +
               sha256_hex(response.body()) + "\n";
    if (response.body().find("\"patch\"") != std::string::npos) ++patched;
  }
  const auto record = source_dir + "/tests/answers/mutate.tsv";
  if (std::getenv("TRAINENV_UPDATE_ANSWERS") != nullptr) {
    std::ofstream(record) << answers;
    WARN("rewrote " << record << ": " << bodies.size() << " answers");
    return;
  }
  WARN(bodies.size() << " bodies, " << patched << " answered with a patch");
  CHECK(patched >= 10);
  // Line by line, so a failure names the bodies whose answers changed.
  std::istringstream want(test::read_file(record));
  std::istringstream got(answers);
  std::string want_line;
  std::string got_line;
  std::vector<std::string> changed;
  while (static_cast<bool>(std::getline(want, want_line)) |
         static_cast<bool>(std::getline(got, got_line))) {
    if (want_line != got_line) changed.push_back("stored: " + want_line + "\n   now: " + got_line);
    want_line.clear();
    got_line.clear();
  }
  std::string shown;
  for (std::size_t i = 0; i < std::min<std::size_t>(changed.size(), 20); ++i)
    shown += changed[i] + "\n";
  INFO(changed.size() << " of " << bodies.size() << " answers differ:\n" << shown);
  CHECK(changed.empty());
}
