// What an attacker on the pod network can make trainenv read, and what it answers (issue 37,
// docs/security.md): the real server over TLS with the fake API server behind it. Each case is
// an attack that worked before the fix: reading another tenant's objects through a preview or a
// forged review, an empty or foreign uid, a cached owner handed across namespaces, names that
// are no DNS names reaching an API path or a hostfile.
#include <catch2/catch.hpp>

#include <optional>

#include "example_owners.hpp"
#include "fake_apiserver.hpp"
#include "server_harness.hpp"
#include "trainenv/core/model/admission.hpp"
#include "trainenv/core/text/names.hpp"
#include "trainenv/inputs/yaml.hpp"

namespace {

using namespace trainenv;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using nlohmann::json;

json pod_of(const std::string& pod_file) {
  return test::example_pod(pod_file);
}

// The owner objects of an example, moved to namespace `ns` (the same names and uids).
std::vector<json> owners_in(const std::string& owners_file, const std::string& ns) {
  auto docs = test::example_documents(owners_file);
  for (auto& doc : docs) {
    if (doc["metadata"].contains("namespace")) doc["metadata"]["namespace"] = ns;
  }
  return docs;
}

struct answer {
  unsigned status = 0;
  json body;
  std::string text;
};

// The admission response's fields, absent ones as null (a const json's [] on a missing key is
// undefined).
json response_field(const answer& a, const std::string& key) {
  const auto* r = a.body.is_object() && a.body.contains("response") ? &a.body["response"] : nullptr;
  return r != nullptr && r->contains(key) ? (*r)[key] : json();
}
bool allowed(const answer& a) {
  return response_field(a, "allowed") == true;
}
int status_code(const answer& a) {
  const auto s = response_field(a, "status");
  return s.is_object() ? s.value("code", 0) : 0;
}
std::string status_message(const answer& a) {
  const auto s = response_field(a, "status");
  return s.is_object() ? s.value("message", "") : "";
}

// The review was answered (200) with a denial of `code`.
void check_denied(const answer& a, int code) {
  INFO(a.text);
  REQUIRE(a.status == 200);
  CHECK(!allowed(a));
  CHECK(status_code(a) == code);
}

answer post(unsigned short port, const std::string& target, const std::string& body) {
  test::tls_client client(port);
  REQUIRE_FALSE(client.handshake());
  const auto res = client.send(test::make_request(test::http::verb::post, target, body));
  return {res.result_int(), json::parse(res.body(), nullptr, false), res.body()};
}

json review_in(const json& pod, const std::string& request_namespace, const std::string& uid) {
  auto review = test::pod_review(pod, uid);
  review["request"]["namespace"] = request_namespace;
  return review;
}

// The real JobSet "bert" of trainer-torch-owners.yaml lives in team-b; the attacker's pods and
// reviews are in team-a.
struct tenants {
  test::fake_apiserver api;
  std::string jobset_uid;
  tenants() {
    for (const auto& doc : owners_in("trainer-torch-owners.yaml", "team-b")) {
      api.add_object(doc);
      if (doc["kind"] == "JobSet") jobset_uid = doc["metadata"]["uid"];
    }
  }
  test::server_options options() {
    test::server_options o;
    o.api = api.credentials();
    return o;
  }
  // Every GET the webhook made outside `ns` (cluster-scoped objects aside).
  [[nodiscard]] std::vector<std::string> reads_outside(const std::string& ns) const {
    std::vector<std::string> out;
    for (const auto& t : api.targets()) {
      if (t.find("/namespaces/") != std::string::npos &&
          t.find("/namespaces/" + ns + "/") == std::string::npos)
        out.push_back(t);
    }
    return out;
  }
};

}  // namespace

TEST_CASE("a server with API access serves no preview on the admission port",
          "[adversarial][trust]") {
  tenants t;
  test::running_server server(t.options());
  // The attack: an anonymous preview of a pod naming team-b's Job, which read team-b's JobSet
  // with trainenv's rights and answered with its sizes and names.
  auto pod = pod_of("trainer-torch-pod.yaml");
  pod["metadata"]["namespace"] = "team-b";
  for (const auto* route : {"/preview", "/preview/job"}) {
    const auto a = post(server.tls_port(), route, pod.dump());
    INFO(route << ": " << a.text);
    CHECK(a.status == 404);
    CHECK_THAT(a.text, Contains("--preview-listen"));
  }
  CHECK(t.api.total_gets() == 0);
  // /mutate still works, within the review's namespace.
  const auto admitted = post(server.tls_port(), "/mutate", test::pod_review(pod, "u1").dump());
  CHECK(admitted.status == 200);
  CHECK(allowed(admitted));
}

TEST_CASE("/mutate reads only in the review's namespace", "[adversarial][trust]") {
  tenants t;
  test::running_server server(t.options());
  auto pod = pod_of("trainer-torch-pod.yaml");
  pod["metadata"]["namespace"] = "team-b";  // the object names team-b, the request team-a
  const auto a = post(server.tls_port(), "/mutate", review_in(pod, "team-a", "forged").dump());
  check_denied(a, 400);
  CHECK_THAT(status_message(a), Contains("metadata.namespace") && Contains("team-a"));
  CHECK(t.api.total_gets() == 0);
}

TEST_CASE("an owner reference with an empty uid reads nothing", "[adversarial][trust]") {
  tenants t;
  test::running_server server(t.options());
  auto pod = pod_of("trainer-torch-pod.yaml");
  pod["metadata"]["namespace"] = "team-b";
  SECTION("the controlling Job's uid empty, the JobSet labels gone") {
    pod["metadata"]["ownerReferences"][0]["uid"] = "";
    for (auto* where : {"labels", "annotations"}) {
      pod["metadata"][where].erase("jobset.sigs.k8s.io/jobset-uid");
    }
  }
  SECTION("the JobSet uid label empty and the Job's uid empty") {
    pod["metadata"]["ownerReferences"][0]["uid"] = "";
    pod["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-uid"] = "";
  }
  SECTION("the Job's uid left out") {
    pod["metadata"]["ownerReferences"][0].erase("uid");
    pod["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-uid"] = "";
  }
  // A training pod of its own, so that the walk needs its owners at once.
  pod["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] = "trainer";
  const auto a = post(server.tls_port(), "/mutate", test::pod_review(pod, "no-uid").dump());
  check_denied(a, 400);
  CHECK_THAT(status_message(a), Contains("uid"));
  CHECK(t.api.total_gets() == 0);
}

TEST_CASE("a wrong uid is refused without telling the real one", "[adversarial][trust]") {
  tenants t;
  test::running_server server(t.options());
  auto pod = pod_of("trainer-torch-pod.yaml");
  pod["metadata"]["namespace"] = "team-b";
  pod["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] = "trainer";
  for (auto* where : {"labels", "annotations"}) {
    pod["metadata"][where].erase("jobset.sigs.k8s.io/jobset-uid");
  }
  const std::string real_uid = pod["metadata"]["ownerReferences"][0]["uid"];
  pod["metadata"]["ownerReferences"][0]["uid"] = "00000000-0000-0000-0000-000000000000";
  const auto a = post(server.tls_port(), "/mutate", test::pod_review(pod, "guess").dump());
  check_denied(a, 404);
  CHECK(a.text.find(real_uid) == std::string::npos);
  // A name that does not exist answers in the same words: a uid guess tells nothing about which
  // names exist.
  auto missing = pod;
  missing["metadata"]["ownerReferences"][0]["name"] = "no-such-job";
  const auto b = post(server.tls_port(), "/mutate", test::pod_review(missing, "guess2").dump());
  auto said = status_message(a);
  for (auto at = said.find("bert-node-0"); at != std::string::npos;
       at = said.find("bert-node-0", at + 11))
    said.replace(at, 11, "no-such-job");
  CHECK(said == status_message(b));
}

TEST_CASE("a cached owner is never handed to a pod of another namespace", "[adversarial][trust]") {
  tenants t;
  test::running_server server(t.options());
  // team-b's own pod, admitted: its JobSet is now in the cache.
  auto own = pod_of("trainer-torch-pod.yaml");
  own["metadata"]["namespace"] = "team-b";
  const auto first = post(server.tls_port(), "/mutate", test::pod_review(own, "own").dump());
  REQUIRE(allowed(first));
  const auto gets_before = t.api.total_gets();
  // The attacker's pod in team-a names team-b's JobSet by its uid (from the labels) and a Job of
  // its own namespace that does not exist.
  auto pod = own;
  pod["metadata"]["namespace"] = "team-a";
  pod["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] = "trainer";
  const auto a = post(server.tls_port(), "/mutate", test::pod_review(pod, "cross").dump());
  check_denied(a, 404);
  CHECK(t.api.total_gets() > gets_before);  // read in team-a, not taken from the cache
  CHECK(t.reads_outside("team-b").size() == t.api.total_gets() - gets_before);
}

TEST_CASE("names that are not DNS names never reach an API path", "[adversarial][trust]") {
  tenants t;
  test::running_server server(t.options());
  auto pod = pod_of("trainer-torch-pod.yaml");
  pod["metadata"]["namespace"] = "team-b";
  pod["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] = "trainer";
  for (auto* where : {"labels", "annotations"}) {
    pod["metadata"][where].erase("jobset.sigs.k8s.io/jobset-uid");
  }
  std::string review_namespace = "team-b";
  SECTION("a Job name with dot-dot segments") {
    pod["metadata"]["ownerReferences"][0]["name"] =
        "../../../../api/v1/namespaces/kube-system/secrets/x";
  }
  SECTION("a Job name of dots") {
    pod["metadata"]["ownerReferences"][0]["name"] = "..";
  }
  SECTION("a namespace of dots") {
    pod["metadata"]["namespace"] = "..";
    review_namespace = "..";
  }
  SECTION("a Job name in capitals with a space") {
    pod["metadata"]["ownerReferences"][0]["name"] = "Bert Node";
  }
  const auto a =
      post(server.tls_port(), "/mutate", review_in(pod, review_namespace, "dots").dump());
  check_denied(a, 400);
  for (const auto& target : t.api.targets()) CHECK(target.find("..") == std::string::npos);
  CHECK(t.api.total_gets() == 0);
}

TEST_CASE("a job name with a newline never reaches a hostfile line", "[adversarial][trust]") {
  // The job name of the pod's labels names hosts, hostfile lines and Secrets: a newline in it
  // wrote extra hostfile lines ("<job>\nevil-0.ds slots=64") before issue 37.
  test::fake_apiserver api;
  for (const auto& file : {"deepspeed-owners.yaml", "volcano-owners.yaml"}) {
    for (const auto& doc : test::example_documents(file)) api.add_object(doc);
  }
  test::server_options o;
  o.api = api.credentials();
  test::running_server server(o);
  const std::string forged = "ds\nevil-0.ds slots=64";

  SECTION("JobSet's label on an MPI launcher") {
    auto pod = pod_of("deepspeed-launcher-pod.yaml");
    // Untouched, the launcher gets a hostfile: the forged name would have something to reach.
    const auto real = post(server.tls_port(), "/mutate", test::pod_review(pod, "real").dump());
    REQUIRE(allowed(real));
    const auto patch = core::base64_decode(response_field(real, "patch").get<std::string>());
    REQUIRE(patch);
    CHECK_THAT(*patch, Contains("hostfile"));
    for (auto* where : {"labels", "annotations"})
      pod["metadata"][where]["jobset.sigs.k8s.io/jobset-name"] = forged;
    const auto a = post(server.tls_port(), "/mutate", test::pod_review(pod, "forged").dump());
    check_denied(a, 400);
    CHECK(status_message(a) ==
          "trainenv: label jobset.sigs.k8s.io/jobset-name is \"ds\\nevil-0.ds slots=64\": not a "
          "DNS name (lower-case letters, digits, '-' and '.')");
    CHECK(response_field(a, "patch").is_null());
  }
  SECTION("Volcano's label on a worker") {
    auto pod = pod_of("volcano-worker-pod.yaml");
    REQUIRE(allowed(post(server.tls_port(), "/mutate", test::pod_review(pod, "real").dump())));
    for (auto* where : {"labels", "annotations"}) {
      if (pod["metadata"][where].contains("volcano.sh/job-name"))
        pod["metadata"][where]["volcano.sh/job-name"] = forged;
    }
    const auto a = post(server.tls_port(), "/mutate", test::pod_review(pod, "forged").dump());
    check_denied(a, 400);
    CHECK_THAT(status_message(a), Contains("volcano.sh/job-name") && Contains("not a DNS name"));
    CHECK(response_field(a, "patch").is_null());
  }
}

namespace {

// The previews' own port: the webhook's token "test-token" may create TokenReviews; alice may
// read team-a (and cluster-scoped objects), bob team-b only; mallory is no one.
struct callers {
  test::fake_apiserver api{{.tokens = {"test-token", "alice", "bob"},
                            .namespaces_of = {{"alice", {"team-a", ""}}, {"bob", {"team-b"}}}}};
  callers() {
    for (const auto& doc : owners_in("trainer-torch-owners.yaml", "team-a")) api.add_object(doc);
  }
  test::server_options options() {
    test::server_options o;
    o.api = api.credentials();
    o.previews = true;
    return o;
  }
};

answer post_as(unsigned short port, const std::string& target, const std::string& body,
               const std::string& token) {
  test::tls_client client(port);
  REQUIRE_FALSE(client.handshake());
  auto request = test::make_request(test::http::verb::post, target, body);
  if (!token.empty()) request.set(test::http::field::authorization, "Bearer " + token);
  const auto res = client.send(std::move(request));
  return {res.result_int(), json::parse(res.body(), nullptr, false), res.body()};
}

}  // namespace

TEST_CASE("a preview on --preview-listen reads the cluster as its caller, never as trainenv",
          "[adversarial][trust]") {
  callers c;
  test::running_server server(c.options());
  REQUIRE(server.preview_port() != 0);
  const auto pod = pod_of("trainer-torch-pod.yaml").dump();

  // No token, or one the API server rejects: 401, nothing read.
  const auto anonymous = post_as(server.preview_port(), "/preview", pod, "");
  CHECK(anonymous.status == 401);
  CHECK(c.api.token_reviews() == 0);  // refused from the header alone
  const auto mallory = post_as(server.preview_port(), "/preview", pod, "mallory");
  CHECK(mallory.status == 401);
  CHECK(c.api.token_reviews() == 1);
  CHECK(c.api.total_gets() == 0);

  // bob may not read team-a: the API server says so, in the answer, and nothing of team-a's
  // JobSet is in it.
  const auto bob = post_as(server.preview_port(), "/preview", pod, "bob");
  INFO(bob.text);
  REQUIRE(bob.status == 200);
  CHECK(bob.body["allowed"] == true);  // unrecognised: its Job could not be read
  CHECK_THAT(bob.text, Contains("forbidden"));
  CHECK(bob.text.find("WORLD_SIZE") == std::string::npos);
  CHECK(c.api.gets_with("bob") >= 1);

  // alice may: her preview is sized from the JobSet, read with her token.
  const auto alice = post_as(server.preview_port(), "/preview", pod, "alice");
  INFO(alice.text);
  REQUIRE(alice.status == 200);
  CHECK(alice.body["allowed"] == true);
  CHECK_THAT(alice.text, Contains("WORLD_SIZE"));
  CHECK(c.api.gets_with("alice") >= 3);
  CHECK(c.api.gets_with("test-token") == 0);  // the webhook's own rights read nothing for them
  const auto reviews = c.api.token_reviews();
  CHECK(post_as(server.preview_port(), "/preview", pod, "alice").status == 200);
  CHECK(c.api.token_reviews() == reviews);  // the review is reused for a while

  // What alice read is not the webhook's: /mutate reads the JobSet again, with its own token.
  const auto alice_gets = c.api.gets_with("alice");
  const auto admitted = post(server.tls_port(), "/mutate",
                             test::pod_review(pod_of("trainer-torch-pod.yaml"), "m").dump());
  CHECK(allowed(admitted));
  CHECK(c.api.gets_with("test-token") >= 1);
  CHECK(c.api.gets_with("alice") == alice_gets);
  // And the admission port serves no preview at all.
  CHECK(post(server.tls_port(), "/preview", pod).status == 404);
}

TEST_CASE("a job preview on --preview-listen reads another namespace's runtime only with rights",
          "[adversarial][trust]") {
  callers c;
  // team-b's runtime, with a token in its env: what the attack read out before.
  c.api.add_object(
      json{{"apiVersion", "trainer.kubeflow.org/v1alpha1"},
           {"kind", "TrainingRuntime"},
           {"metadata",
            {{"name", "private"},
             {"namespace", "team-b"},
             {"uid", "rt-1"},
             {"labels", {{"trainer.kubeflow.org/framework", "torch"}}}}},
           {"spec",
            {{"mlPolicy", {{"numNodes", 2}, {"torch", json::object()}}},
             {"template",
              {{"spec",
                {{"replicatedJobs",
                  {{{"name", "node"},
                    {"template",
                     {{"metadata",
                       {{"labels", {{"trainer.kubeflow.org/trainjob-ancestor-step", "trainer"}}}}},
                      {"spec",
                       {{"template",
                         {{"spec",
                           {{"containers",
                             {{{"name", "node"},
                               {"image", "registry.team-b.internal/secret:1"},
                               {"env",
                                {{{"name", "HF_TOKEN"},
                                  {"value", "hf_SECRETSECRET"}}}}}}}}}}}}}}}}}}}}}}}}});
  test::running_server server(c.options());
  const json trainjob = {{"apiVersion", "trainer.kubeflow.org/v1alpha1"},
                         {"kind", "TrainJob"},
                         {"metadata", {{"name", "steal"}, {"namespace", "team-b"}}},
                         {"spec",
                          {{"runtimeRef",
                            {{"apiGroup", "trainer.kubeflow.org"},
                             {"kind", "TrainingRuntime"},
                             {"name", "private"}}}}}};
  const auto alice = post_as(server.preview_port(), "/preview/job", trainjob.dump(), "alice");
  INFO(alice.text);
  CHECK(alice.status == 422);
  CHECK(alice.text.find("hf_SECRETSECRET") == std::string::npos);
  CHECK(alice.text.find("registry.team-b.internal") == std::string::npos);
  CHECK(c.api.gets_with("test-token") == 0);
  // bob, who may read team-b, previews it.
  const auto bob = post_as(server.preview_port(), "/preview/job", trainjob.dump(), "bob");
  CHECK(bob.status == 200);
  CHECK_THAT(bob.text, Contains("registry.team-b.internal"));
}

TEST_CASE("a preview's body past its own limit is refused before it is read",
          "[adversarial][trust]") {
  test::running_server server;  // no API access: previews on the admission port
  const std::string big(600 * 1024, ' ');
  const auto a = post(server.tls_port(), "/preview", big);
  CHECK(a.status == 413);
  CHECK_THAT(a.text, Contains("524288"));
}
