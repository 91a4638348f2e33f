// core/json_patch.hpp: RFC 6902 patches that a strict applier accepts (docs/contract.md §4). Every
// patch built here is applied with nlohmann's json::patch, an independent applier.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "trainenv/core/model/decision.hpp"
#include "trainenv/core/model/pod_view.hpp"
#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/json_patch.hpp"

using nlohmann::json;
using trainenv::core::escape_pointer_token;
using trainenv::core::patch_builder;

namespace {

// patch_builder::append takes the items it adds by address: they stay where the render put them.
std::vector<const json*> pointers(const std::vector<json>& items) {
  std::vector<const json*> out;
  for (const auto& item : items) out.push_back(&item);
  return out;
}

json pod_without_env() {
  return json::parse(R"({
    "metadata": {"name": "p", "labels": {"a": "b"}},
    "spec": {"containers": [{"name": "node", "image": "img"}]}
  })");
}

json pod_with_env() {
  return json::parse(R"({
    "metadata": {"name": "p", "annotations": {"user": "set"}},
    "spec": {"containers": [{"name": "node", "image": "img",
                             "env": [{"name": "USER_VAR", "value": "1"}]}]}
  })");
}

// Whether the pod has annotations to add to, as the diff asks it: null reads as none.
bool has_annotations(const json& pod) {
  return trainenv::core::pod_view(pod).annotations().kind() ==
         trainenv::core::string_map::shape::object;
}

// Whether `parent` has the list `key` to append to, as the diff reads it: null reads as none.
bool has(const json& parent, std::string_view key) {
  return trainenv::core::member(parent, key) != nullptr;
}

json apply_patch(const json& document, const json& patch) {
  INFO("patch: " << patch.dump());
  json out;
  REQUIRE_NOTHROW(out = document.patch(patch));
  return out;
}

}  // namespace

TEST_CASE("escape_pointer_token escapes tilde as ~0", "[json_patch]") {
  CHECK(escape_pointer_token("~") == "~0");
}

TEST_CASE("escape_pointer_token escapes slash as ~1", "[json_patch]") {
  CHECK(escape_pointer_token("/") == "~1");
}

TEST_CASE("escape_pointer_token escapes a mixed key in order", "[json_patch]") {
  CHECK(escape_pointer_token("a/b~c") == "a~1b~0c");
  CHECK(escape_pointer_token("~1") == "~01");
  CHECK(escape_pointer_token("trainenv.io/injected") == "trainenv.io~1injected");
}

TEST_CASE("escape_pointer_token leaves other text alone", "[json_patch]") {
  CHECK(escape_pointer_token("") == "");
  CHECK(escape_pointer_token("env") == "env");
  CHECK(escape_pointer_token("a.b-c_d 0") == "a.b-c_d 0");
}

TEST_CASE("an escaped token resolves to the original key with json_pointer", "[json_patch]") {
  const std::string key = "x/~y~/z";
  const json doc = {{key, 1}};
  CHECK(doc.at(json::json_pointer("/" + escape_pointer_token(key))) == 1);
}

TEST_CASE("append creates a missing array as one whole value", "[json_patch]") {
  const json pod = pod_without_env();
  const json& container = pod["spec"]["containers"][0];
  patch_builder b;
  b.append(has(container, "env"), "/spec/containers/0", "env",
           pointers({json{{"name", "A"}, {"value", "1"}}, json{{"name", "B"}, {"value", "2"}}}));
  REQUIRE(b.size() == 1);
  const json patch = json::parse(b.take());
  CHECK(patch[0]["op"] == "add");
  CHECK(patch[0]["path"] == "/spec/containers/0/env");
  CHECK(patch[0]["value"].is_array());

  const json out = apply_patch(pod, patch);
  CHECK(out["spec"]["containers"][0]["env"] ==
        json::parse(R"([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])"));
}

TEST_CASE("append creates a null array as one whole value", "[json_patch]") {
  json pod = pod_without_env();
  pod["spec"]["containers"][0]["env"] = nullptr;
  patch_builder b;
  b.append(has(pod["spec"]["containers"][0], "env"), "/spec/containers/0", "env",
           pointers({json{{"name", "A"}, {"value", "1"}}}));
  const json patch = json::parse(b.take());
  REQUIRE(patch.size() == 1);
  CHECK(patch[0]["path"] == "/spec/containers/0/env");

  const json out = apply_patch(pod, patch);
  CHECK(out["spec"]["containers"][0]["env"] == json::parse(R"([{"name": "A", "value": "1"}])"));
}

TEST_CASE("append adds each item with dash when the array exists", "[json_patch]") {
  const json pod = pod_with_env();
  patch_builder b;
  b.append(has(pod["spec"]["containers"][0], "env"), "/spec/containers/0", "env",
           pointers({json{{"name", "A"}, {"value", "1"}}, json{{"name", "B"}, {"value", "2"}}}));
  REQUIRE(b.size() == 2);
  const json patch = json::parse(b.take());
  for (const auto& op : patch) {
    CHECK(op["op"] == "add");
    CHECK(op["path"] == "/spec/containers/0/env/-");
  }

  const json out = apply_patch(pod, patch);
  CHECK(out["spec"]["containers"][0]["env"] == json::parse(R"([
    {"name": "USER_VAR", "value": "1"}, {"name": "A", "value": "1"}, {"name": "B", "value": "2"}
  ])"));
}

TEST_CASE("append to an existing empty array appends each item", "[json_patch]") {
  json pod = pod_without_env();
  pod["spec"]["containers"][0]["ports"] = json::array();
  patch_builder b;
  b.append(has(pod["spec"]["containers"][0], "ports"), "/spec/containers/0", "ports",
           pointers({json{{"containerPort", 29500}}}));
  const json patch = json::parse(b.take());
  REQUIRE(patch.size() == 1);
  CHECK(patch[0]["path"] == "/spec/containers/0/ports/-");

  const json out = apply_patch(pod, patch);
  CHECK(out["spec"]["containers"][0]["ports"] == json::parse(R"([{"containerPort": 29500}])"));
  CHECK(out["spec"]["containers"][0]["ports"][0]["containerPort"].is_number_integer());
}

TEST_CASE("append with no items adds no operation", "[json_patch]") {
  const json pod = pod_without_env();
  patch_builder b;
  b.append(has(pod["spec"]["containers"][0], "env"), "/spec/containers/0", "env", pointers({}));
  CHECK(b.empty());
  CHECK(b.take().empty());
}

TEST_CASE("append escapes the key in the path", "[json_patch]") {
  const json doc = {{"parent", json::object()}};
  patch_builder b;
  b.append(has(doc["parent"], "a/b~c"), "/parent", "a/b~c", pointers({json(1)}));
  const json patch = json::parse(b.take());
  REQUIRE(patch.size() == 1);
  CHECK(patch[0]["path"] == "/parent/a~1b~0c");
  CHECK(apply_patch(doc, patch)["parent"]["a/b~c"] == json::array({1}));
}

TEST_CASE("add_members creates a missing object as one whole value", "[json_patch]") {
  const json pod = pod_without_env();
  patch_builder b;
  b.add_members("/metadata/annotations", has_annotations(pod),
                json{{"trainenv.io/injected", "torch"}, {"trainenv.io/hostfile", "h slots=1\n"}});
  REQUIRE(b.size() == 1);
  const json patch = json::parse(b.take());
  CHECK(patch[0]["path"] == "/metadata/annotations");

  const json out = apply_patch(pod, patch);
  CHECK(out["metadata"]["annotations"] ==
        json{{"trainenv.io/injected", "torch"}, {"trainenv.io/hostfile", "h slots=1\n"}});
  CHECK(out["metadata"]["labels"] == json{{"a", "b"}});
}

TEST_CASE("add_members creates a null object as one whole value", "[json_patch]") {
  json pod = pod_without_env();
  pod["metadata"]["annotations"] = nullptr;
  patch_builder b;
  b.add_members("/metadata/annotations", has_annotations(pod), json{{"trainenv.io/injected", "x"}});
  const json patch = json::parse(b.take());
  REQUIRE(patch.size() == 1);
  CHECK(patch[0]["path"] == "/metadata/annotations");
  CHECK(apply_patch(pod, patch)["metadata"]["annotations"] == json{{"trainenv.io/injected", "x"}});
}

TEST_CASE("add_members adds each member under its escaped key when the object exists",
          "[json_patch]") {
  const json pod = pod_with_env();
  patch_builder b;
  b.add_members("/metadata/annotations", has_annotations(pod),
                json{{"trainenv.io/injected", "torch"}, {"odd~key", "v"}});
  REQUIRE(b.size() == 2);
  const json patch = json::parse(b.take());
  std::vector<std::string> paths;
  for (const auto& op : patch) {
    CHECK(op["op"] == "add");
    paths.push_back(op["path"].get<std::string>());
  }
  CHECK_THAT(paths,
             Catch::Matchers::UnorderedEquals(std::vector<std::string>{
                 "/metadata/annotations/trainenv.io~1injected", "/metadata/annotations/odd~0key"}));

  const json out = apply_patch(pod, patch);
  CHECK(out["metadata"]["annotations"] ==
        json{{"user", "set"}, {"trainenv.io/injected", "torch"}, {"odd~key", "v"}});
}

TEST_CASE("add_members with no members adds no operation", "[json_patch]") {
  const json pod = pod_with_env();
  patch_builder b;
  b.add_members("/metadata/annotations", has_annotations(pod), json::object());
  CHECK(b.empty());
}

TEST_CASE("add builds one add operation with the given path and value", "[json_patch]") {
  patch_builder b;
  b.add("/metadata/labels/x", "y");
  CHECK(b.size() == 1);
  CHECK_FALSE(b.empty());
  const json patch = json::parse(b.take());
  CHECK(patch == json::parse(R"([{"op": "add", "path": "/metadata/labels/x", "value": "y"}])"));
  CHECK(apply_patch(pod_without_env(), patch)["metadata"]["labels"] ==
        json{{"a", "b"}, {"x", "y"}});
}

TEST_CASE("operations are kept in the order they were built", "[json_patch]") {
  const json pod = pod_without_env();
  patch_builder b;
  b.append(has(pod["spec"]["containers"][0], "env"), "/spec/containers/0", "env",
           pointers({json{{"name", "A"}}}));
  b.add("/spec/containers/0/env/-", json{{"name", "B"}});
  b.add_members("/metadata/annotations", has_annotations(pod), json{{"k", "v"}});
  const json patch = json::parse(b.take());
  REQUIRE(patch.size() == 3);
  CHECK(patch[0]["path"] == "/spec/containers/0/env");
  CHECK(patch[1]["path"] == "/spec/containers/0/env/-");
  CHECK(patch[2]["path"] == "/metadata/annotations");

  const json out = apply_patch(pod, patch);
  CHECK(out["spec"]["containers"][0]["env"] == json::parse(R"([{"name": "A"}, {"name": "B"}])"));
}

TEST_CASE("no operations: no text, and the decision reads it as an empty array", "[json_patch]") {
  patch_builder b;
  CHECK(b.empty());
  CHECK(b.take().empty());
  const trainenv::core::decision d;
  CHECK_FALSE(d.mutated());
  CHECK(d.patch() == json::array());
}
