// core/admission.hpp: AdmissionReview v1 / v1beta1 decoding and response encoding (docs/contract.md
// §5, §6).
#include <catch2/catch.hpp>

#include <random>
#include <string>

#include "../test_support.hpp"
#include "trainenv/core/decide/engine.hpp"
#include "trainenv/core/model/admission.hpp"

using Catch::Matchers::Contains;
using nlohmann::json;
using namespace trainenv::core;
using trainenv::test::fixture;

namespace {

json minimal_review(const std::string& api_version = "admission.k8s.io/v1") {
  json review = json::parse(R"({
    "kind": "AdmissionReview",
    "request": {
      "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
      "kind": {"group": "", "version": "v1", "kind": "Pod"},
      "resource": {"group": "", "version": "v1", "resource": "pods"},
      "operation": "CREATE",
      "namespace": "ns",
      "name": "pod-0",
      "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pod-0"}}
    }
  })");
  review["apiVersion"] = api_version;
  return review;
}

admission_request decode_ok(const json& review) {
  auto r = decode_review(review.dump());
  INFO("review: " << review.dump());
  REQUIRE(r.ok());
  return std::move(r).value();
}

std::string decode_error(const std::string& body) {
  auto r = decode_review(body);
  INFO("body: " << body);
  REQUIRE_FALSE(r.ok());
  return r.message();
}

// The pod's tree as decode_review builds it, written out by hand: what the engine reads, nothing
// else, and not the labels and annotations (read apart: check_maps).
// The pod decode_review read, as nlohmann values.
json pod_of(const admission_request& r) {
  return to_json(r.object.json());
}

// The labels and annotations decode_review read are the pod's, whole.
void check_maps(const admission_request& r, const json& pod) {
  const auto& metadata = pod["metadata"];
  for (const auto* key : {"labels", "annotations"}) {
    INFO(key);
    const auto& map =
        std::string_view(key) == "labels" ? r.object.labels() : r.object.annotations();
    REQUIRE(metadata.contains(key));
    CHECK(map.kind() == string_map::shape::object);
    CHECK(trainenv::test::as_json(map) == metadata[key]);
  }
}

}  // namespace

TEST_CASE("decode_review reads the torch jobset fixture", "[admission]") {
  const json review = fixture("review-torch-jobset-node3.json");
  const auto r = decode_ok(review);
  CHECK(r.api_version == "admission.k8s.io/v1");
  CHECK(r.uid == "47332173-738f-526c-bb61-f1929792407a");
  CHECK(r.group.empty());
  CHECK(r.version == "v1");
  CHECK(r.resource == "pods");
  CHECK(r.sub_resource.empty());
  CHECK(r.operation == "CREATE");
  CHECK(r.namespace_name == "team-a");
  CHECK(r.name.empty());
  CHECK_FALSE(r.dry_run);
  CHECK(pod_of(r) == review["request"]["object"]);
  check_maps(r, review["request"]["object"]);
  CHECK(r.is_pod_create());
}

TEST_CASE("decode_review reads the mpi launcher fixture", "[admission]") {
  const json review = fixture("review-mpi-launcher.json");
  const auto r = decode_ok(review);
  CHECK(r.uid == "63b5a628-4991-5704-a030-66bcafd2aed4");
  CHECK(r.namespace_name == "team-a");
  CHECK(*r.object.generate_name() == "ds-job-launcher-0-0-");
  CHECK(pod_of(r) == review["request"]["object"]);
  check_maps(r, review["request"]["object"]);
  CHECK(r.is_pod_create());
}

TEST_CASE("decode_review reads the volcano fixture with its request name", "[admission]") {
  const json review = fixture("review-volcano-worker1.json");
  const auto r = decode_ok(review);
  CHECK(r.uid == "7914b36a-683a-5041-a0b5-9593ed5a03a7");
  CHECK(r.name == "mnist-worker-1");
  CHECK(*r.object.name() == "mnist-worker-1");
  CHECK(r.is_pod_create());
}

TEST_CASE("decode_review accepts a v1beta1 review and keeps its version", "[admission]") {
  const auto r = decode_ok(minimal_review("admission.k8s.io/v1beta1"));
  CHECK(r.api_version == "admission.k8s.io/v1beta1");
  CHECK(r.uid == "705ab4f5-6393-11e8-b7cc-42010a800002");
  CHECK(r.name == "pod-0");
  CHECK(r.is_pod_create());
}

TEST_CASE("decode_review reads dryRun", "[admission]") {
  json review = minimal_review();
  review["request"]["dryRun"] = true;
  CHECK(decode_ok(review).dry_run);
}

TEST_CASE("decode_review rejects a body that is not JSON", "[admission]") {
  CHECK_THAT(decode_error("not json"), Contains("not valid JSON"));
  CHECK_THAT(decode_error(""), Contains("not valid JSON"));
  CHECK_THAT(decode_error(R"({"kind": "AdmissionReview",)"), Contains("not valid JSON"));
}

TEST_CASE("decode_review names the byte offset of a JSON error", "[admission]") {
  CHECK_THAT(decode_error(R"({"a": ?})"), Contains("at byte 7"));
}

TEST_CASE("decode_review rejects a JSON array", "[admission]") {
  CHECK_THAT(decode_error("[]"), Contains("not an AdmissionReview"));
  CHECK_THAT(decode_error("[" + minimal_review().dump() + "]"), Contains("not an AdmissionReview"));
}

TEST_CASE("decode_review rejects a JSON scalar", "[admission]") {
  CHECK_THAT(decode_error("42"), Contains("not an AdmissionReview"));
  CHECK_THAT(decode_error("null"), Contains("not an AdmissionReview"));
}

TEST_CASE("decode_review rejects a kind other than AdmissionReview", "[admission]") {
  json review = minimal_review();
  review["kind"] = "Pod";
  CHECK_THAT(decode_error(review.dump()), Contains("kind must be \"AdmissionReview\""));
  review.erase("kind");
  CHECK_THAT(decode_error(review.dump()), Contains("kind must be \"AdmissionReview\""));
}

TEST_CASE("decode_review rejects an unsupported apiVersion and names it", "[admission]") {
  json review = minimal_review("admission.k8s.io/v2");
  CHECK_THAT(decode_error(review.dump()), Contains("admission.k8s.io/v2"));
  review.erase("apiVersion");
  CHECK_THAT(decode_error(review.dump()), Contains("unsupported AdmissionReview apiVersion"));
}

TEST_CASE("decode_review rejects a review without a request", "[admission]") {
  json review = minimal_review();
  review.erase("request");
  CHECK_THAT(decode_error(review.dump()), Contains("no request"));
  review["request"] = "text";
  CHECK_THAT(decode_error(review.dump()), Contains("no request"));
  review["request"] = nullptr;
  CHECK_THAT(decode_error(review.dump()), Contains("no request"));
}

TEST_CASE("decode_review rejects a request without a uid", "[admission]") {
  json review = minimal_review();
  review["request"].erase("uid");
  CHECK_THAT(decode_error(review.dump()), Contains("request.uid"));
}

TEST_CASE("decode_review rejects an empty or non-string uid", "[admission]") {
  json review = minimal_review();
  review["request"]["uid"] = "";
  CHECK_THAT(decode_error(review.dump()), Contains("request.uid"));
  review["request"]["uid"] = 12;
  CHECK_THAT(decode_error(review.dump()), Contains("request.uid"));
}

TEST_CASE("decode_review_json decodes an already parsed document", "[admission]") {
  auto r = decode_review_json(minimal_review());
  REQUIRE(r.ok());
  CHECK(r->uid == "705ab4f5-6393-11e8-b7cc-42010a800002");
  CHECK(*r->object.name() == "pod-0");
}

TEST_CASE("a CREATE of pods is a pod create", "[admission]") {
  CHECK(decode_ok(minimal_review()).is_pod_create());
}

TEST_CASE("an UPDATE or DELETE of pods is not a pod create", "[admission]") {
  for (const char* op : {"UPDATE", "DELETE", "CONNECT", "create", ""}) {
    INFO("operation " << op);
    json review = minimal_review();
    review["request"]["operation"] = op;
    CHECK_FALSE(decode_ok(review).is_pod_create());
  }
}

TEST_CASE("a CREATE of another resource is not a pod create", "[admission]") {
  json review = minimal_review();
  review["request"]["resource"] = {
      {"group", "apps"}, {"version", "v1"}, {"resource", "deployments"}};
  CHECK_FALSE(decode_ok(review).is_pod_create());
  review["request"]["resource"] = {{"group", ""}, {"version", "v1"}, {"resource", "services"}};
  CHECK_FALSE(decode_ok(review).is_pod_create());
  review["request"]["resource"] = {
      {"group", "example.com"}, {"version", "v1"}, {"resource", "pods"}};
  CHECK_FALSE(decode_ok(review).is_pod_create());
  review["request"]["resource"] = {{"group", ""}, {"version", "v2"}, {"resource", "pods"}};
  CHECK_FALSE(decode_ok(review).is_pod_create());
}

TEST_CASE("a CREATE without a resource is not a pod create", "[admission]") {
  json review = minimal_review();
  review["request"].erase("resource");
  CHECK_FALSE(decode_ok(review).is_pod_create());
}

TEST_CASE("a CREATE of a pod subresource is not a pod create", "[admission]") {
  for (const char* sub : {"binding", "eviction", "ephemeralcontainers", "status"}) {
    INFO("subResource " << sub);
    json review = minimal_review();
    review["request"]["subResource"] = sub;
    const auto r = decode_ok(review);
    CHECK(r.sub_resource == sub);
    CHECK_FALSE(r.is_pod_create());
  }
}

TEST_CASE("encode_response keeps the received apiVersion and uid", "[admission]") {
  for (const char* version : {"admission.k8s.io/v1", "admission.k8s.io/v1beta1"}) {
    INFO("apiVersion " << version);
    const auto r = decode_ok(minimal_review(version));
    const json out = json::parse(encode_response(r, decision{}));
    CHECK(out["apiVersion"] == version);
    CHECK(out["kind"] == "AdmissionReview");
    CHECK(out["response"]["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002");
    CHECK(out["response"]["allowed"] == true);
  }
}

TEST_CASE("encode_response base64-encodes the JSON patch", "[admission]") {
  const auto r = decode_ok(minimal_review());
  decision d;
  d.policy = "torch";
  d.patch_text = json::parse(R"([
    {"op": "add", "path": "/metadata/annotations", "value": {"trainenv.io/injected": "torch"}},
    {"op": "add", "path": "/spec/containers/0/env/-", "value": {"name": "X", "value": "é\"\n"}}
  ])")
                     .dump();
  d.patch_ops = 2;
  const json out = json::parse(encode_response(r, d));
  const json& response = out["response"];
  CHECK(response["allowed"] == true);
  CHECK(response["patchType"] == "JSONPatch");
  REQUIRE(response["patch"].is_string());
  const auto decoded = base64_decode(response["patch"].get<std::string>());
  REQUIRE(decoded.has_value());
  CHECK(*decoded == d.patch_text);  // the patch's own bytes
  CHECK(json::parse(*decoded) == d.patch());
}

TEST_CASE("encode_response includes status code 400 and the message when denied", "[admission]") {
  const auto r = decode_ok(minimal_review());
  decision d;
  d.allowed = false;
  d.message = "trainenv: annotation trainenv.io/num-nodes: \"abc\" is not a whole number >= 1";
  const json out = json::parse(encode_response(r, d));
  const json& response = out["response"];
  CHECK(response["allowed"] == false);
  CHECK(response["status"]["code"] == 400);
  CHECK(response["status"]["code"].is_number_integer());
  CHECK(response["status"]["message"] == d.message);
  CHECK_FALSE(response.contains("patch"));
  CHECK_FALSE(response.contains("patchType"));
}

TEST_CASE("encode_response omits patch fields and status when allowed without a patch",
          "[admission]") {
  const auto r = decode_ok(minimal_review());
  const json out = json::parse(encode_response(r, decision{}));
  const json& response = out["response"];
  CHECK_FALSE(response.contains("patch"));
  CHECK_FALSE(response.contains("patchType"));
  CHECK_FALSE(response.contains("status"));
  CHECK_FALSE(response.contains("warnings"));
}

TEST_CASE("encode_response carries the warnings", "[admission]") {
  const auto r = decode_ok(minimal_review());
  decision d;
  d.warnings = {"trainenv: kept user-set WORLD_SIZE=8 in container \"node\""};
  const json out = json::parse(encode_response(r, d));
  CHECK(out["response"]["warnings"] ==
        json::array({"trainenv: kept user-set WORLD_SIZE=8 in container \"node\""}));
}

TEST_CASE("encode_response escapes text and replaces broken UTF-8 rather than failing",
          "[admission]") {
  auto r = decode_ok(minimal_review());
  r.uid = "quote\" back\\ newline\n tab\t nul" + std::string(1, '\0');
  decision d;
  d.allowed = false;
  // A message cut inside a two-byte character, as a bounded quote of a user's value can be.
  d.message = "trainenv: value \"caf\xc3";
  d.warnings = {"w\x01"};
  const auto text = encode_response(r, d);
  const json out = json::parse(text);
  CHECK(out["response"]["uid"] == r.uid);
  CHECK(out["response"]["status"]["message"] == "trainenv: value \"caf\xef\xbf\xbd");
  CHECK(out["response"]["warnings"][0] == "w\x01");
}

TEST_CASE("base64 round trips every length from 0 to 10", "[admission]") {
  const std::string source = std::string("\x00\xff\x10\x80 az09+/=", 13);
  for (std::size_t n = 0; n <= 10; ++n) {
    const std::string bytes = source.substr(0, n);
    INFO("length " << n);
    const auto encoded = base64_encode(bytes);
    CHECK(encoded.size() == (n + 2) / 3 * 4);
    const auto decoded = base64_decode(encoded);
    REQUIRE(decoded.has_value());
    CHECK(*decoded == bytes);
  }
}

TEST_CASE("base64 matches the RFC 4648 test vectors", "[admission]") {
  const std::pair<const char*, const char*> vectors[] = {
      {"", ""},
      {"f", "Zg=="},
      {"fo", "Zm8="},
      {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="},
      {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"},
  };
  for (const auto& [plain, encoded] : vectors) {
    INFO("plain \"" << plain << "\"");
    CHECK(base64_encode(plain) == encoded);
    CHECK(base64_decode(encoded) == std::optional<std::string>(plain));
  }
}

TEST_CASE("base64 uses the standard alphabet with plus and slash", "[admission]") {
  CHECK(base64_encode("\xfb\xff\xbf") == "+/+/");
  CHECK(base64_decode("+/+/") == std::optional<std::string>("\xfb\xff\xbf"));
}

TEST_CASE("base64_decode rejects malformed input", "[admission]") {
  for (const char* bad : {"Zg=", "Zg", "Z", "Zm9vY", "Z===", "====", "Zg==Zg==", "Z=g=", "Zm9v\n",
                          "Zm 9", "Zm-_", "Zm9v!A==", "=Zm9"}) {
    INFO("text \"" << bad << "\"");
    CHECK_FALSE(base64_decode(bad).has_value());
  }
}

TEST_CASE("decode_review gives a pod without a namespace the request's", "[admission]") {
  const auto review = R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",
    "request":{"uid":"u","namespace":"team-a","object":{"metadata":{"name":"p"}}}})";
  const auto decoded = decode_review(review);
  REQUIRE(decoded);
  CHECK(*decoded->object.namespace_name() == "team-a");
  CHECK_FALSE(pod_of(*decoded)["metadata"].contains("namespace"));  // read, not written
  // The object's own namespace is never replaced.
  const auto own = decode_review(R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",
    "request":{"uid":"u","namespace":"team-a","object":{"metadata":{"namespace":"b"}}}})");
  REQUIRE(own);
  CHECK(*own->object.namespace_name() == "b");
}

TEST_CASE("base64 matches a bit-by-bit encoder for generated bytes of every length to 200",
          "[admission]") {
  // RFC 4648 as the standard states it: the input as a bit string, six bits per character.
  const auto reference = [](const std::string& bytes) {
    static constexpr std::string_view alphabet =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string bits;
    for (const unsigned char c : bytes)
      for (int b = 7; b >= 0; --b) bits += ((c >> b) & 1) != 0 ? '1' : '0';
    while (bits.size() % 6 != 0) bits += '0';
    std::string out;
    for (std::size_t i = 0; i < bits.size(); i += 6)
      out += alphabet[std::stoul(bits.substr(i, 6), nullptr, 2)];
    while (out.size() % 4 != 0) out += '=';
    return out;
  };
  std::mt19937 rng(4648);
  std::uniform_int_distribution<int> byte(0, 255);
  for (std::size_t n = 0; n <= 200; ++n) {
    std::string bytes(n, '\0');
    for (auto& c : bytes) c = static_cast<char>(byte(rng));
    INFO("length " << n);
    REQUIRE(base64_encode(bytes) == reference(bytes));
    REQUIRE(base64_decode(base64_encode(bytes)) == std::optional<std::string>(bytes));
  }
}

TEST_CASE("the audit summary names every kind of change, and is empty only with none",
          "[admission][audit]") {
  // Each field alone makes the summary non-empty and shows in its text: an audit event that
  // leaves out a removed env entry or a DNS search hides what the webhook did.
  const auto with = [](const auto& set) {
    injection_summary s;
    set(s);
    return s;
  };
  CHECK(injection_summary{}.empty());
  CHECK(injection_summary{}.describe().empty());
  const std::vector<std::pair<injection_summary, std::string>> cases = {
      {with([](auto& s) { s.env = {"WORLD_SIZE"}; }), "WORLD_SIZE"},
      {with([](auto& s) { s.ports = {29500}; }), "port 29500"},
      {with([](auto& s) { s.mounts = {"/etc/mpi"}; }), "mount /etc/mpi"},
      {with([](auto& s) { s.args = {"--x"}; }), "arg --x"},
      {with([](auto& s) { s.volumes = {"v"}; }), "volume v"},
      {with([](auto& s) { s.annotations = {"k"}; }), "annotation k"},
      {with([](auto& s) { s.init_containers = {"i"}; }), "initContainer i"},
      {with([](auto& s) { s.dns_searches = {"bert.team-a.svc"}; }), "dnsSearch bert.team-a.svc"},
      {with([](auto& s) { s.removed_env = {"PET_NNODES"}; }), "removed PET_NNODES"},
  };
  for (const auto& [summary, text] : cases) {
    CHECK_FALSE(summary.empty());
    CHECK(summary.describe() == text);
  }
}
