// core/template.hpp: "${var}" policy templates, compiled once and rendered per pod.
#include <catch2/catch.hpp>

#include <string>

#include "trainenv/core/policy/template.hpp"

using Catch::Matchers::Contains;
using nlohmann::json;
using namespace trainenv::core;

namespace {

variable_values sample_values() {
  variable_values v;
  v.set(variable::job, "llama");
  v.set(variable::namespace_name, "team-a");
  v.set(variable::role, "node");
  v.set(variable::index, std::int64_t{3});
  v.set(variable::num_nodes, std::int64_t{4});
  v.set(variable::nproc_per_node, "8");
  v.set(variable::master_port, std::int64_t{29500});
  v.set(variable::world_size, std::int64_t{4});
  v.set(variable::rank, std::int64_t{3});
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
  CHECK(values.text(variable::job) == nullptr);
  CHECK(values.unavailable_reason(variable::job) == "no job");
  values.set(variable::job, "j");
  REQUIRE(values.text(variable::job) != nullptr);
  CHECK(*values.text(variable::job) == "j");
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

// --- expressions inside ${...}: integer arithmetic, text variables, conditions ---

namespace {

variable_values numeric_values() {
  auto v = sample_values();
  v.set(variable::gpus_per_node, std::int64_t{8});
  v.set(variable::slots, std::int64_t{2});
  v.set(variable::processes_per_node, std::int64_t{8});
  v.set(variable::line, std::int64_t{5});
  v.set_replicas({{"master", 1}, {"worker", 3}});
  return v;
}

expression expression_ok(const std::string& text) {
  INFO("expression: " << text);
  auto e = expression::compile(text);
  if (!e.ok()) FAIL("unexpected error: " << e.message());
  return std::move(e).value();
}

std::int64_t evaluate_ok(const std::string& text,
                         const variable_values& values = numeric_values()) {
  const auto e = expression_ok(text);
  auto n = e.evaluate(values);
  INFO("expression: " << text);
  if (!n.ok()) FAIL("unexpected error: " << n.message());
  return *n;
}

std::string template_error(const std::string& text) {
  auto t = template_string::compile(text);
  INFO("template: " << text);
  REQUIRE_FALSE(t.ok());
  return t.message();
}

std::string evaluate_error(const std::string& text, const variable_values& values) {
  const auto e = expression_ok(text);
  auto n = e.evaluate(values);
  INFO("expression: " << text);
  REQUIRE_FALSE(n.ok());
  return n.message();
}

bool condition_ok(const std::string& text, const variable_values& values = numeric_values()) {
  INFO("condition: " << text);
  auto c = condition::compile(text);
  if (!c.ok()) FAIL("unexpected error: " << c.message());
  auto r = c->evaluate(values);
  if (!r.ok()) FAIL("unexpected error: " << r.message());
  return *r;
}

std::string condition_error(const std::string& text) {
  auto c = condition::compile(text);
  INFO("condition: " << text);
  REQUIRE_FALSE(c.ok());
  return c.message();
}

}  // namespace

TEST_CASE("gpusPerNode, slots, processesPerNode and i are known integer variables",
          "[template][expression]") {
  const std::pair<const char*, variable> added[] = {
      {"gpusPerNode", variable::gpus_per_node},
      {"slots", variable::slots},
      {"processesPerNode", variable::processes_per_node},
      {"i", variable::line}};
  for (const auto& [name, v] : added) {
    INFO("variable " << name);
    CHECK(variable_from_name(name) == v);
    CHECK(variable_name(v) == name);
    CHECK(is_integer_variable(v));
    CHECK_THAT(variable_names(), Contains(name));
  }
}

TEST_CASE("job, namespace, role and nprocPerNode are text variables", "[template][expression]") {
  for (auto v :
       {variable::job, variable::namespace_name, variable::role, variable::nproc_per_node}) {
    INFO("variable " << variable_name(v));
    CHECK_FALSE(is_integer_variable(v));
  }
  for (auto v : {variable::index, variable::num_nodes, variable::master_port, variable::world_size,
                 variable::rank}) {
    INFO("variable " << variable_name(v));
    CHECK(is_integer_variable(v));
  }
}

TEST_CASE("addition, subtraction and multiplication evaluate over literals",
          "[template][expression]") {
  CHECK(evaluate_ok("2 + 3") == 5);
  CHECK(evaluate_ok("7-2") == 5);
  CHECK(evaluate_ok("6 * 7") == 42);
  CHECK(evaluate_ok("0") == 0);
  CHECK(evaluate_ok("1 - 5") == -4);
}

TEST_CASE("multiplication binds tighter than addition and subtraction", "[template][expression]") {
  CHECK(evaluate_ok("2 + 3 * 4") == 14);
  CHECK(evaluate_ok("2 * 3 + 4") == 10);
  CHECK(evaluate_ok("20 - 2 * 3") == 14);
}

TEST_CASE("subtraction associates to the left", "[template][expression]") {
  CHECK(evaluate_ok("10 - 2 - 3") == 5);
  CHECK(evaluate_ok("2 * 3 * 4 - 1 - 1") == 22);
}

TEST_CASE("integer variables take part in arithmetic", "[template][expression]") {
  // numNodes 4, gpusPerNode 8, masterPort 29500, index 3.
  CHECK(evaluate_ok("numNodes - 1") == 3);
  CHECK(evaluate_ok("numNodes * gpusPerNode") == 32);
  CHECK(evaluate_ok("masterPort + index") == 29503);
  CHECK(evaluate_ok("numNodes*processesPerNode") == 32);
}

TEST_CASE("max() and min() pick among any number of arguments", "[template][expression]") {
  CHECK(evaluate_ok("max(1, 2, 3)") == 3);
  CHECK(evaluate_ok("min(4, 2, 9)") == 2);
  CHECK(evaluate_ok("max(7)") == 7);
  CHECK(evaluate_ok("max(gpusPerNode, 1)") == 8);
  CHECK(evaluate_ok("min(numNodes - 1, 2 * 5)") == 3);
  CHECK(evaluate_ok("numNodes * max(min(gpusPerNode, 2), 1) + 1") == 9);
}

TEST_CASE("max() picks 1 when gpusPerNode is 0", "[template][expression]") {
  auto values = numeric_values();
  values.set(variable::gpus_per_node, std::int64_t{0});
  CHECK(evaluate_ok("numNodes * max(gpusPerNode, 1)", values) == 4);
}

TEST_CASE("max() or min() without arguments is a compile error", "[template][expression]") {
  for (const char* text : {"${max()}", "${min( )}", "${max(1,)}", "${max(1}"}) {
    INFO("template: " << text);
    CHECK_FALSE(template_string::compile(text).ok());
  }
}

TEST_CASE("replicas(role) reads the pod's replicas and 0 for a role not listed",
          "[template][expression]") {
  CHECK(evaluate_ok("replicas(master)") == 1);
  CHECK(evaluate_ok("replicas( worker )") == 3);
  CHECK(evaluate_ok("replicas(master) + replicas(worker)") == 4);
  CHECK(evaluate_ok("replicas(launcher)") == 0);
  CHECK(evaluate_ok("replicas(master)", sample_values()) == 0);
}

TEST_CASE("replicas() without a role name is a compile error showing the form",
          "[template][expression]") {
  for (const char* text :
       {"${replicas()}", "${replicas(Master)}", "${replicas(a b)}", "${replicas(-x)}"}) {
    const auto message = template_error(text);
    CHECK_THAT(message, Contains("replicas(<role>)"));
  }
}

// Regression (fixed): role names are DNS labels and may contain '-' (trainingRoles accepts
// "trainer-node", and JobSet replicatedJob names such as "dataset-initializer" are common), but
// replicas() reads only letters and digits, so replicas(trainer-node) is a compile error.
TEST_CASE("replicas() accepts a role name containing a dash", "[template][expression]") {
  auto e = expression::compile("replicas(trainer-node)");
  REQUIRE(e.ok());
  variable_values values;
  values.set_replicas({{"trainer-node", 4}});
  auto n = e->evaluate(values);
  REQUIRE(n.ok());
  CHECK(*n == 4);
}

TEST_CASE("a text variable alone renders its text", "[template][expression]") {
  CHECK(render_ok("${job}") == "llama");
  CHECK(render_ok("${ job }") == "llama");
  CHECK(render_ok("${nprocPerNode}") == "8");
  CHECK(expression_ok("job").uses(variable::job));
  CHECK_FALSE(expression_ok("job").is_integer());
  CHECK(expression_ok("numNodes").is_integer());
}

TEST_CASE("an integer expression renders as decimal text in a template", "[template][expression]") {
  CHECK(render_ok("--nnodes=${numNodes - 1}") == "--nnodes=3");
  CHECK(render_ok("${job}-node-0-${index * 2}.${job}") == "llama-node-0-6.llama");
  CHECK(render_ok("${1 - 5}") == "-4");
}

TEST_CASE("a text variable in arithmetic is a compile error naming it", "[template][expression]") {
  for (const char* text : {"${job + 1}", "${1 + job}", "${max(role, 1)}", "${nprocPerNode * 2}"}) {
    const auto message = template_error(text);
    CHECK_THAT(message, Contains("is text"));
  }
  CHECK_THAT(template_error("${job + 1}"), Contains("${job}"));
  CHECK_THAT(template_error("${2 * nprocPerNode}"), Contains("${nprocPerNode}"));
}

TEST_CASE("an unknown variable inside arithmetic is an error naming it", "[template][expression]") {
  const auto message = template_error("${numNodes * gpus}");
  CHECK_THAT(message, Contains("unknown variable gpus"));
  CHECK_THAT(message, Contains(variable_names()));
}

TEST_CASE("an unknown function is an error naming it and the known ones",
          "[template][expression]") {
  const auto message = template_error("${ceil(numNodes)}");
  CHECK_THAT(message, Contains("ceil()"));
  CHECK_THAT(message, Contains("max()") && Contains("min()") && Contains("replicas()"));
}

TEST_CASE("an expression error quotes the expression and the whole template",
          "[template][expression]") {
  const auto message = template_error("--n=${numNodes +}");
  CHECK_THAT(message, Contains("${numNodes +}"));
  CHECK_THAT(message, Contains("\"--n=${numNodes +}\""));
}

TEST_CASE("malformed arithmetic is a compile error", "[template][expression]") {
  for (const char* text : {"${numNodes +}", "${* 2}", "${numNodes numNodes}", "${-1}",
                           "${(1 + 2) * 3}", "${1 / 2}", "${numNodes 1}", "${max(1 2)}"}) {
    INFO("template: " << text);
    CHECK_FALSE(template_string::compile(text).ok());
  }
}

TEST_CASE("a literal number beyond 2^40 is a compile error", "[template][expression]") {
  CHECK(evaluate_ok("1099511627776") == 1099511627776);
  CHECK_THAT(template_error("${1099511627777}"), Contains("number too large"));
  CHECK_THAT(template_error("${numNodes * 99999999999999999999999}"), Contains("number too large"));
}

TEST_CASE("an arithmetic result beyond 2^40 is an evaluation error", "[template][expression]") {
  CHECK_THAT(evaluate_error("1099511627776 + 1", numeric_values()), Contains("out of range"));
  CHECK_THAT(evaluate_error("0 - 1099511627776 - 1", numeric_values()), Contains("out of range"));
  CHECK_THAT(evaluate_error("1048576 * 1048576 * 2", numeric_values()), Contains("out of range"));
}

// Regression (fixed): evaluate() checks the range only after multiplying in int64; two factors
// within 2^40 whose product passes 2^63 overflow (undefined behaviour) and here wrap to 0 instead
// of an error. Input: "${1099511627776 * 16777216}" (2^40 * 2^24 = 2^64) evaluates to 0.
TEST_CASE("a product overflowing int64 is an evaluation error, not a wrapped value",
          "[template][expression]") {
  for (const char* text : {"1099511627776 * 16777216", "1099511627776 * 1099511627776"}) {
    auto e = expression::compile(text);
    REQUIRE(e.ok());
    auto n = e->evaluate(numeric_values());
    INFO("expression: " << text << " evaluated to " << (n.ok() ? std::to_string(*n) : n.message()));
    CHECK_FALSE(n.ok());
  }
}

TEST_CASE("evaluate fails with the reason when an integer variable is unavailable",
          "[template][expression]") {
  auto values = numeric_values();
  values.set_unavailable(variable::index, "trainenv: no index for pod \"p\"");
  CHECK(evaluate_error("index * 2", values) == "trainenv: no index for pod \"p\"");
  CHECK(evaluate_error("max(1, index)", values) == "trainenv: no index for pod \"p\"");
  const auto t = compile_ok("--rank=${index + 1}");
  auto r = t.render(values);
  REQUIRE_FALSE(r.ok());
  CHECK(r.message() == "trainenv: no index for pod \"p\"");
}

TEST_CASE("integer variables hold numbers and text variables hold text", "[template]") {
  // The types are the check that no count travels as text: a number is never parsed back.
  variable_values values;
  values.set(variable::num_nodes, std::int64_t{4});
  values.set(variable::job, "j");
  CHECK(values.number(variable::num_nodes) == 4);
  CHECK(values.text(variable::num_nodes) == nullptr);
  REQUIRE(values.text(variable::job) != nullptr);
  CHECK(*values.text(variable::job) == "j");
  CHECK_FALSE(values.number(variable::job).has_value());
  STATIC_REQUIRE(is_integer_variable(variable::num_nodes));
  STATIC_REQUIRE_FALSE(is_integer_variable(variable::nproc_per_node));
  STATIC_REQUIRE(variable_name(variable::line) == "i");
}

TEST_CASE("evaluate reads a negative variable value", "[template][expression]") {
  auto values = numeric_values();
  values.set(variable::index, std::int64_t{-2});
  CHECK(evaluate_ok("index + 5", values) == 3);
}

TEST_CASE("evaluate of a text variable alone is an error, render is its text",
          "[template][expression]") {
  const auto e = expression_ok("job");
  auto n = e.evaluate(numeric_values());
  REQUIRE_FALSE(n.ok());
  CHECK_THAT(n.message(), Contains("${job}") && Contains("not a number"));
  auto r = e.render(numeric_values());
  REQUIRE(r.ok());
  CHECK(*r == "llama");
}

TEST_CASE("uses reports the variables inside expressions, not function names",
          "[template][expression]") {
  const auto t = compile_ok("${numNodes * max(gpusPerNode, 1)}-${replicas(master)}-${job}");
  CHECK(t.uses(variable::num_nodes));
  CHECK(t.uses(variable::gpus_per_node));
  CHECK(t.uses(variable::job));
  CHECK_FALSE(t.uses(variable::slots));
  CHECK_FALSE(t.uses(variable::processes_per_node));
  CHECK_FALSE(t.uses(variable::line));
  CHECK(t.used() == (variable_bit(variable::num_nodes) | variable_bit(variable::gpus_per_node) |
                     variable_bit(variable::job) | replicas_bit));
}

TEST_CASE("used is the union of every expression's variables", "[template][expression]") {
  CHECK(compile_ok("${i}").used() == variable_bit(variable::line));
  CHECK(compile_ok("${slots * i + 1}").used() ==
        (variable_bit(variable::slots) | variable_bit(variable::line)));
  CHECK(compile_ok("${replicas(master)}").used() == replicas_bit);  // no variable, but marked
  CHECK(compile_ok("${1 + 2}").used() == 0);
  CHECK_FALSE(compile_ok("${1 + 2}").is_literal());
  CHECK(compile_ok("plain").used() == 0);
}

TEST_CASE("expression uses reports its variables", "[template][expression]") {
  const auto e = expression_ok("min(processesPerNode, slots) - i");
  CHECK(e.uses(variable::processes_per_node));
  CHECK(e.uses(variable::slots));
  CHECK(e.uses(variable::line));
  CHECK_FALSE(e.uses(variable::num_nodes));
}

TEST_CASE("condition evaluates each comparison operator", "[template][condition]") {
  // numNodes is 4.
  CHECK(condition_ok("numNodes == 4"));
  CHECK_FALSE(condition_ok("numNodes == 3"));
  CHECK(condition_ok("numNodes != 3"));
  CHECK_FALSE(condition_ok("numNodes != 4"));
  CHECK(condition_ok("numNodes < 5"));
  CHECK_FALSE(condition_ok("numNodes < 4"));
  CHECK(condition_ok("numNodes <= 4"));
  CHECK_FALSE(condition_ok("numNodes <= 3"));
  CHECK(condition_ok("numNodes > 3"));
  CHECK_FALSE(condition_ok("numNodes > 4"));
  CHECK(condition_ok("numNodes >= 4"));
  CHECK_FALSE(condition_ok("numNodes >= 5"));
}

TEST_CASE("condition operators work without spaces", "[template][condition]") {
  CHECK(condition_ok("numNodes>=4"));
  CHECK(condition_ok("numNodes<=4"));
  CHECK(condition_ok("3<numNodes"));
  CHECK_FALSE(condition_ok("3>numNodes"));
  CHECK(condition_ok("numNodes==4"));
  CHECK(condition_ok("numNodes!=0"));
}

TEST_CASE("condition compares arithmetic on both sides", "[template][condition]") {
  CHECK(condition_ok("numNodes * processesPerNode > 1"));
  CHECK(condition_ok("replicas(master) > 0"));
  CHECK_FALSE(condition_ok("replicas(master) > 0", sample_values()));
  CHECK(condition_ok("max(gpusPerNode, 1) == 2 * numNodes"));
}

TEST_CASE("condition uses reports the variables of both sides", "[template][condition]") {
  auto c = condition::compile("index + 1 < numNodes");
  REQUIRE(c.ok());
  CHECK(c->uses(variable::index));
  CHECK(c->uses(variable::num_nodes));
  CHECK_FALSE(c->uses(variable::rank));
  CHECK(c->used() == (variable_bit(variable::index) | variable_bit(variable::num_nodes)));
}

TEST_CASE("a condition without a comparison operator is rejected with an example",
          "[template][condition]") {
  for (const char* text : {"numNodes", "numNodes = 1", "", "true"}) {
    const auto message = condition_error(text);
    CHECK_THAT(message, Contains("is not a comparison"));
    CHECK_THAT(message, Contains("numNodes > 1"));
  }
}

TEST_CASE("a condition comparing text is rejected", "[template][condition]") {
  for (const char* text : {"job == 1", "1 != role", "nprocPerNode > 1", "job == namespace"}) {
    const auto message = condition_error(text);
    CHECK_THAT(message, Contains("compares text"));
    CHECK_THAT(message, Contains(text));
  }
}

TEST_CASE("a condition with a bad side is rejected naming the problem", "[template][condition]") {
  CHECK_THAT(condition_error("nodes > 1"), Contains("unknown variable nodes"));
  CHECK_THAT(condition_error("numNodes > "), Contains("missing a value"));
  CHECK_THAT(condition_error("== 1"), Contains("missing a value"));
  CHECK_FALSE(condition::compile("1 < 2 < 3").ok());
  CHECK_FALSE(condition::compile("numNodes =< 1").ok());
}

TEST_CASE("condition evaluate fails with the reason of an unavailable variable",
          "[template][condition]") {
  auto values = numeric_values();
  values.set_unavailable(variable::gpus_per_node, "no GPUs known");
  auto c = condition::compile("1 < gpusPerNode");
  REQUIRE(c.ok());
  auto r = c->evaluate(values);
  REQUIRE_FALSE(r.ok());
  CHECK(r.message() == "no GPUs known");
}

TEST_CASE("template_json keeps numbers and booleans beside rendered expressions",
          "[template][expression]") {
  auto t = template_json::compile(json::parse(R"({
    "secret": {"secretName": "${job}-mpi-ssh-auth", "defaultMode": 256, "optional": false,
               "items": [{"key": "k", "path": "p-${numNodes - 1}", "mode": 420}]}
  })"));
  REQUIRE(t.ok());
  CHECK(t->uses(variable::job));
  CHECK(t->uses(variable::num_nodes));
  auto r = t->render(numeric_values());
  REQUIRE(r.ok());
  CHECK(*r == json::parse(R"({
    "secret": {"secretName": "llama-mpi-ssh-auth", "defaultMode": 256, "optional": false,
               "items": [{"key": "k", "path": "p-3", "mode": 420}]}
  })"));
  CHECK((*r)["secret"]["defaultMode"].is_number_integer());
  CHECK((*r)["secret"]["optional"].is_boolean());
  CHECK((*r)["secret"]["items"][0]["mode"].is_number_integer());
}

TEST_CASE("template_json rejects a text variable in arithmetic in a nested string",
          "[template][expression]") {
  auto t = template_json::compile(json{{"a", {{"b", json::array({"${role * 2}"})}}}});
  REQUIRE_FALSE(t.ok());
  CHECK_THAT(t.message(), Contains("${role}") && Contains("is text"));
}

TEST_CASE("template_json render fails when a nested expression cannot be evaluated",
          "[template][expression]") {
  auto values = numeric_values();
  values.set_unavailable(variable::slots, "no slots");
  auto t = template_json::compile(json{{"n", 1}, {"deep", {{"s", "x${slots + 1}"}}}});
  REQUIRE(t.ok());
  auto r = t->render(values);
  REQUIRE_FALSE(r.ok());
  CHECK(r.message() == "no slots");
}
