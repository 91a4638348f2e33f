// core/template.hpp: "${var}" policy templates, compiled once and rendered per pod.
#include <catch2/catch.hpp>

#include <string>

#include "trainenv/core/template.hpp"

using Catch::Matchers::Contains;
using nlohmann::json;
using namespace trainenv::core;

namespace {

variable_values sample_values() {
  variable_values v;
  v.set(variable::job, "llama");
  v.set(variable::namespace_name, "team-a");
  v.set(variable::role, "node");
  v.set(variable::index, "3");
  v.set(variable::num_nodes, "4");
  v.set(variable::nproc_per_node, "8");
  v.set(variable::master_port, "29500");
  v.set(variable::world_size, "4");
  v.set(variable::rank, "3");
  return v;
}

template_string compile_ok(const std::string& text) {
  INFO("template: " << text);
  auto t = template_string::compile(text);
  REQUIRE(t.ok());
  return std::move(t).value();
}

std::string render_ok(const std::string& text, const variable_values& values = sample_values()) {
  const auto t = compile_ok(text);
  auto r = t.render(values);
  INFO("template: " << text);
  REQUIRE(r.ok());
  return *r;
}

}  // namespace

TEST_CASE("variable names map both ways", "[template]") {
  const variable all[] = {variable::job,         variable::namespace_name, variable::role,
                          variable::index,       variable::num_nodes,      variable::nproc_per_node,
                          variable::master_port, variable::world_size,     variable::rank};
  for (auto v : all) {
    INFO("variable " << variable_name(v));
    CHECK(variable_from_name(variable_name(v)) == v);
  }
  CHECK(variable_name(variable::namespace_name) == "namespace");
  CHECK(variable_name(variable::world_size) == "worldSize");
  CHECK_FALSE(variable_from_name("WorldSize").has_value());
  CHECK_FALSE(variable_from_name("").has_value());
}

TEST_CASE("variables are substituted into the surrounding text", "[template]") {
  CHECK(render_ok("${job}-node-0-0.${job}") == "llama-node-0-0.llama");
  CHECK(render_ok("${job}-node-0-0.${job}:${masterPort}") == "llama-node-0-0.llama:29500");
  CHECK(render_ok("ns=${namespace} role=${role} i=${index}") == "ns=team-a role=node i=3");
  CHECK(render_ok("${numNodes}x${nprocPerNode} ${rank}/${worldSize}") == "4x8 3/4");
}

TEST_CASE("text without variables renders unchanged and is literal", "[template]") {
  const auto t = compile_ok("/etc/mpi/hostfile");
  CHECK(t.is_literal());
  CHECK(render_ok("/etc/mpi/hostfile") == "/etc/mpi/hostfile");
  CHECK(render_ok("") == "");
  CHECK(compile_ok("").is_literal());
}

TEST_CASE("double-dollar brace escapes a literal dollar brace", "[template]") {
  const auto t = compile_ok("$${job}");
  CHECK(t.is_literal());
  CHECK_FALSE(t.uses(variable::job));
  CHECK(render_ok("$${job}") == "${job}");
  CHECK(render_ok("a-$${x}-${job}") == "a-${x}-llama");
}

TEST_CASE("Kubernetes dependent variable references pass through literally", "[template]") {
  const auto t = compile_ok("--node_rank=$(PET_NODE_RANK)");
  CHECK(t.is_literal());
  CHECK(render_ok("--node_rank=$(PET_NODE_RANK)") == "--node_rank=$(PET_NODE_RANK)");
  CHECK(render_ok("$$(ESCAPED) $ alone $") == "$$(ESCAPED) $ alone $");
}

TEST_CASE("an unknown variable is an error naming it and listing the known ones", "[template]") {
  auto t = template_string::compile("${job}-${jobname}");
  REQUIRE_FALSE(t.ok());
  CHECK_THAT(t.message(), Contains("${jobname}"));
  CHECK_THAT(t.message(), Contains(variable_names()));
  CHECK_THAT(variable_names(), Contains("job") && Contains("masterPort") && Contains("worldSize") &&
                                   Contains("rank") && Contains("nprocPerNode"));
}

TEST_CASE("variable names are case-sensitive", "[template]") {
  auto t = template_string::compile("${JOB}");
  REQUIRE_FALSE(t.ok());
  CHECK_THAT(t.message(), Contains("${JOB}"));
}

TEST_CASE("an empty variable name is an error", "[template]") {
  auto t = template_string::compile("x${}y");
  REQUIRE_FALSE(t.ok());
  CHECK_THAT(t.message(), Contains("${}"));
}

TEST_CASE("an unterminated variable reference is an error", "[template]") {
  for (const char* text : {"${job", "prefix-${", "${job}-${rank"}) {
    INFO("template: " << text);
    auto t = template_string::compile(text);
    REQUIRE_FALSE(t.ok());
    CHECK_THAT(t.message(), Contains("unterminated"));
    CHECK_THAT(t.message(), Contains(text));
  }
}

TEST_CASE("uses reports exactly the variables referenced", "[template]") {
  const auto t = compile_ok("${job}:${masterPort}/${job}");
  CHECK(t.uses(variable::job));
  CHECK(t.uses(variable::master_port));
  CHECK_FALSE(t.uses(variable::rank));
  CHECK_FALSE(t.uses(variable::world_size));
  CHECK_FALSE(t.uses(variable::namespace_name));
  CHECK_FALSE(t.is_literal());
}

TEST_CASE("the compiled template keeps its source text", "[template]") {
  CHECK(compile_ok("${job}-x").source() == "${job}-x");
  CHECK(compile_ok("$${job}").source() == "$${job}");
}

TEST_CASE("an unavailable variable renders to its reason as the error", "[template]") {
  auto values = sample_values();
  values.set_unavailable(
      variable::index, "trainenv: no index for pod: set batch.kubernetes.io/job-completion-index");
  const auto t = compile_ok("rank-${index}");
  auto r = t.render(values);
  REQUIRE_FALSE(r.ok());
  CHECK(r.message() == "trainenv: no index for pod: set batch.kubernetes.io/job-completion-index");
}

TEST_CASE("an unavailable variable does not matter to a template that does not use it",
          "[template]") {
  auto values = sample_values();
  values.set_unavailable(variable::rank, "no rank");
  CHECK(render_ok("${job}", values) == "llama");
}

TEST_CASE("setting a variable after marking it unavailable makes it available", "[template]") {
  variable_values values;
  values.set_unavailable(variable::job, "no job");
  CHECK(values.get(variable::job) == nullptr);
  CHECK(values.unavailable_reason(variable::job) == "no job");
  values.set(variable::job, "j");
  REQUIRE(values.get(variable::job) != nullptr);
  CHECK(*values.get(variable::job) == "j");
}

TEST_CASE("template_json renders templated strings at any depth", "[template]") {
  auto t = template_json::compile(json::parse(R"({
    "fieldRef": {"fieldPath": "metadata.annotations['${job}/${role}']"},
    "list": ["${index}", {"deep": ["x-${masterPort}"]}],
    "a/b~c": "${namespace}"
  })"));
  REQUIRE(t.ok());
  auto r = t->render(sample_values());
  REQUIRE(r.ok());
  CHECK(*r == json::parse(R"({
    "fieldRef": {"fieldPath": "metadata.annotations['llama/node']"},
    "list": ["3", {"deep": ["x-29500"]}],
    "a/b~c": "team-a"
  })"));
}

TEST_CASE("template_json keeps numbers, booleans, nulls and literal strings", "[template]") {
  const json source = json::parse(R"json({
    "n": 3, "f": 1.5, "b": true, "z": null, "s": "plain $(VAR)", "arr": [1, false, "${job}"],
    "empty": {}, "none": []
  })json");
  auto t = template_json::compile(source);
  REQUIRE(t.ok());
  auto r = t->render(sample_values());
  REQUIRE(r.ok());
  json expected = source;
  expected["arr"][2] = "llama";
  CHECK(*r == expected);
  CHECK((*r)["n"].is_number_integer());
  CHECK((*r)["b"].is_boolean());
}

TEST_CASE("template_json renders the dollar brace escape in nested strings", "[template]") {
  auto t = template_json::compile(json{{"a", {{"b", "$${job}"}}}});
  REQUIRE(t.ok());
  auto r = t->render(sample_values());
  REQUIRE(r.ok());
  CHECK((*r)["a"]["b"] == "${job}");
}

TEST_CASE("template_json uses reports variables in nested strings", "[template]") {
  auto t = template_json::compile(json{{"a", json::array({"x", {{"b", "${rank}"}}})}});
  REQUIRE(t.ok());
  CHECK(t->uses(variable::rank));
  CHECK_FALSE(t->uses(variable::job));
}

TEST_CASE("template_json rejects an unknown variable in a nested string", "[template]") {
  auto t = template_json::compile(json{{"a", json::array({1, {{"b", "${nope}"}}})}});
  REQUIRE_FALSE(t.ok());
  CHECK_THAT(t.message(), Contains("${nope}"));
}

TEST_CASE("template_json render fails with the reason of an unavailable variable", "[template]") {
  auto values = sample_values();
  values.set_unavailable(variable::job, "no job name");
  auto t = template_json::compile(json{{"k", "${job}"}});
  REQUIRE(t.ok());
  auto r = t->render(values);
  REQUIRE_FALSE(r.ok());
  CHECK(r.message() == "no job name");
}

TEST_CASE("template_json of a bare string renders the string", "[template]") {
  auto t = template_json::compile(json("${job}.${namespace}"));
  REQUIRE(t.ok());
  auto r = t->render(sample_values());
  REQUIRE(r.ok());
  CHECK(*r == json("llama.team-a"));
}
