// core/policy.hpp, the parser: valid documents parse into their values, and the policy
// language's when, extraContainers, defaults.replicas and args (docs/policies.md).
#include <catch2/catch.hpp>

#include "test_policy_support.hpp"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using nlohmann::json;
using namespace trainenv::core;
using namespace policy_test;

// --- valid documents ---

TEST_CASE("a policy with every field parses into its values", "[policy]") {
  const auto p = parse_ok(full_doc());
  CHECK(p.name == "torch");
  CHECK(p.source == source);
  CHECK(p.frameworks == std::vector<std::string>{"torch", "pytorch"});
  CHECK(p.is_default);
  CHECK(p.container == "trainer");
  CHECK(p.training_roles == std::vector<std::string>{"master", "worker"});
  CHECK(p.default_master_port == 23456);
  CHECK(p.default_num_nodes == 2);
  CHECK(p.default_nproc.kind == nproc_setting::mode::gpu);

  REQUIRE(p.env.size() == 6);
  CHECK(p.env[0].name == "PET_NNODES");
  REQUIRE(p.env[0].value.has_value());
  CHECK(p.env[0].value->source() == "${numNodes}");
  CHECK(p.env[0].scope.roles.all);
  CHECK_FALSE(p.env[1].value.has_value());
  CHECK(p.env[1].value_from.has_value());
  CHECK(p.env[3].scope.roles.training);
  CHECK_FALSE(p.env[3].scope.roles.all);
  CHECK(p.env[4].scope.roles.names == std::vector<std::string>{"master", "worker"});
  CHECK(p.env[5].scope.roles.names == std::vector<std::string>{"launcher"});

  REQUIRE(p.ports.size() == 2);
  CHECK(p.ports[0].container_port.uses(variable::master_port));
  CHECK(p.ports[0].name == "master");
  CHECK(p.ports[0].protocol == "TCP");
  CHECK(p.ports[0].scope.roles.names == std::vector<std::string>{"master"});
  CHECK(p.ports[1].container_port.is_literal());
  CHECK(p.ports[1].container_port.source() == "8080");
  CHECK(p.ports[1].protocol == "UDP");
  CHECK(p.ports[1].name.empty());
}

TEST_CASE("a minimal policy takes the documented defaults", "[policy]") {
  const auto p = parse_ok(minimal_doc("plain"));
  CHECK(p.name == "plain");
  CHECK(p.frameworks.empty());
  CHECK_FALSE(p.is_default);
  CHECK(p.container == "node");
  CHECK(p.training_roles == std::vector<std::string>{"master", "worker", "node"});
  CHECK(p.default_master_port == 29500);
  CHECK(p.default_num_nodes == 1);
  CHECK(p.default_nproc.kind == nproc_setting::mode::automatic);
  CHECK(p.env.empty());
  CHECK(p.ports.empty());
}

TEST_CASE("valueFrom fieldRef gets apiVersion v1 so reinvocation stays silent", "[policy]") {
  const auto p = parse_ok(full_doc());
  REQUIRE(p.env[1].value_from.has_value());
  auto rendered = p.env[1].value_from->render(values_for_render());
  REQUIRE(rendered.ok());
  CHECK(*rendered == json::parse(R"({"fieldRef": {"apiVersion": "v1", "fieldPath":
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"}})"));
}

TEST_CASE("a templated value renders against the pod variables", "[policy]") {
  const auto p = parse_ok(full_doc());
  auto rendered = p.env[2].value->render(values_for_render());
  REQUIRE(rendered.ok());
  CHECK(*rendered == "j-master-0.j");
}

TEST_CASE("an integer nprocPerNode default is a count", "[policy]") {
  json doc = minimal_doc();
  doc["spec"]["defaults"] = {{"nprocPerNode", 4}};
  const auto p = parse_ok(doc);
  CHECK(p.default_nproc.kind == nproc_setting::mode::count);
  CHECK(p.default_nproc.count == 4);
}

TEST_CASE("WORLD_SIZE scoped to named training roles is accepted", "[policy]") {
  const auto p = parse_ok(with_env({{"name", "WORLD_SIZE"},
                                    {"value", "${worldSize}"},
                                    {"roles", {"master", "worker", "node"}}}));
  CHECK(p.env[0].scope.roles.names.size() == 3);
}

TEST_CASE("the same env name with disjoint roles is accepted", "[policy]") {
  json doc = minimal_doc();
  doc["spec"]["env"] = json::parse(R"([
    {"name": "MASTER_PORT", "value": "1", "roles": ["launcher"]},
    {"name": "MASTER_PORT", "value": "2", "roles": ["worker"]}
  ])");
  CHECK(parse_ok(doc).env.size() == 2);
}

// when

TEST_CASE("a policy-level when is compiled and keeps its source", "[policy][when]") {
  const auto p = parse_ok(with_spec(R"({"when": "replicas(master) > 0"})"));
  REQUIRE(p.when.has_value());
  CHECK(p.when_source == "replicas(master) > 0");
  CHECK(evaluate_ok(*p.when));
  variable_values none;
  CHECK_FALSE(evaluate_ok(*p.when, none));
}

TEST_CASE("a policy without when has none", "[policy][when]") {
  const auto p = parse_ok(minimal_doc());
  CHECK_FALSE(p.when.has_value());
  CHECK(p.when_source.empty());
}

TEST_CASE("a policy-level when that is not a comparison is rejected", "[policy][when]") {
  const auto message = parse_error(with_spec(R"({"when": "numNodes"})"));
  CHECK_THAT(message, StartsWith(at("spec.when")));
  CHECK_THAT(message, Contains("not a comparison"));
}

TEST_CASE("a policy-level when that is not a string is rejected", "[policy][when]") {
  CHECK_THAT(parse_error(with_spec(R"({"when": true})")), StartsWith(at("spec.when")));
}

TEST_CASE("a policy-level when may not use rank, worldSize or i", "[policy][when]") {
  for (const char* when : {"rank > 0", "worldSize > 1", "i == 0", "numNodes + rank > 0"}) {
    INFO("when: " << when);
    json doc = minimal_doc();
    doc["spec"]["when"] = when;
    const auto message = parse_error(doc);
    CHECK_THAT(message, StartsWith(at("spec.when")));
    CHECK_THAT(message, Contains("may not use"));
  }
}

TEST_CASE("a policy-level when may use index and the node counts", "[policy][when]") {
  const auto p = parse_ok(with_spec(R"({"when": "numNodes * processesPerNode > index"})"));
  REQUIRE(p.when.has_value());
  CHECK(evaluate_ok(*p.when));
}

TEST_CASE("an item's when is compiled into its scope", "[policy][when]") {
  const auto p = parse_ok(with_spec(R"({"env": [
    {"name": "A", "value": "1", "when": "numNodes > 1"},
    {"name": "B", "value": "2"}]})"));
  REQUIRE(p.env[0].scope.when.has_value());
  CHECK(evaluate_ok(*p.env[0].scope.when));
  CHECK(p.env[0].scope.roles.all);
  CHECK_FALSE(p.env[1].scope.when.has_value());
}

TEST_CASE("a bad when on any kind of item is rejected at that item's when", "[policy][when]") {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"env": [{"name": "A", "value": "1", "when": "numNodes"}]})", "spec.env[0].when"},
      {R"({"ports": [{"containerPort": 80, "when": "job > 1"}]})", "spec.ports[0].when"},
      {R"({"args": {"items": [{"value": "x", "when": "nodes > 1"}]}})", "spec.args.items[0].when"},
      {R"({"volumes": [{"name": "v", "emptyDir": {}, "when": "1 <"}]})", "spec.volumes[0].when"},
      {R"({"volumeMounts": [{"name": "v", "mountPath": "/v", "when": 1}]})",
       "spec.volumeMounts[0].when"},
      {R"({"annotations": [{"name": "a", "value": "x", "when": "a == b"}]})",
       "spec.annotations[0].when"}};
  for (const auto& [spec, field] : cases) {
    INFO("spec: " << spec);
    CHECK_THAT(parse_error(with_spec(spec)), StartsWith(at(field)));
  }
}

TEST_CASE("an item whose when uses rank must be scoped to training roles", "[policy][when]") {
  const auto message =
      parse_error(with_spec(R"({"env": [{"name": "A", "value": "1", "when": "rank == 0"}]})"));
  CHECK_THAT(message, StartsWith(at("spec.env[0]")));
  CHECK_THAT(message, Contains("roles: [training]"));
  CHECK(parse_ok(with_spec(R"({"env": [{"name": "A", "value": "1", "when": "rank == 0",
                                         "roles": ["training"]}]})"))
            .env.size() == 1);
}

TEST_CASE("two env entries of the same name are accepted when both have a when", "[policy][when]") {
  const auto p = parse_ok(with_spec(R"({"env": [
    {"name": "A", "value": "1", "when": "numNodes == 1"},
    {"name": "A", "value": "2", "when": "numNodes > 1"}]})"));
  CHECK(p.env.size() == 2);
}

TEST_CASE("two env entries of the same name are rejected when only one has a when",
          "[policy][when]") {
  for (const char* spec : {R"({"env": [{"name": "A", "value": "1", "when": "numNodes == 1"},
                                       {"name": "A", "value": "2"}]})",
                           R"({"env": [{"name": "A", "value": "1"},
                                       {"name": "A", "value": "2", "when": "numNodes > 1"}]})"}) {
    INFO("spec: " << spec);
    CHECK_THAT(parse_error(with_spec(spec)), StartsWith(at("spec.env[1].name")));
  }
}

// extraContainers

TEST_CASE("extraContainers parse with init defaulting to false", "[policy][extra-containers]") {
  const auto p = parse_ok(
      with_spec(R"({"extraContainers": [{"name": "sidecar"}, {"name": "setup", "init": true}]})"));
  REQUIRE(p.extra_containers.size() == 2);
  CHECK(p.extra_containers[0].name == "sidecar");
  CHECK_FALSE(p.extra_containers[0].init);
  CHECK(p.extra_containers[1].name == "setup");
  CHECK(p.extra_containers[1].init);
}

TEST_CASE("an extra container without a valid name is rejected", "[policy][extra-containers]") {
  CHECK_THAT(parse_error(with_spec(R"({"extraContainers": [{"init": true}]})")),
             StartsWith(at("spec.extraContainers[0].name") + "missing"));
  CHECK_THAT(
      parse_error(with_spec(R"({"extraContainers": [{"name": "a"}, {"name": "Side_Car"}]})")),
      StartsWith(at("spec.extraContainers[1].name")));
  CHECK_THAT(parse_error(with_spec(R"({"extraContainers": [{"name": 3}]})")),
             StartsWith(at("spec.extraContainers[0].name")));
}

TEST_CASE("an extra container's init must be a boolean", "[policy][extra-containers]") {
  CHECK_THAT(parse_error(with_spec(R"({"extraContainers": [{"name": "a", "init": "yes"}]})")),
             StartsWith(at("spec.extraContainers[0].init")));
}

TEST_CASE("extraContainers reject unknown keys and non-lists", "[policy][extra-containers]") {
  CHECK_THAT(parse_error(with_spec(R"({"extraContainers": [{"name": "a", "inti": true}]})")),
             StartsWith(at("spec.extraContainers[0]") + "unknown field \"inti\""));
  CHECK_THAT(parse_error(with_spec(R"({"extraContainers": {"name": "a"}})")),
             StartsWith(at("spec.extraContainers")));
  CHECK_THAT(parse_error(with_spec(R"({"extraContainers": ["a"]})")),
             StartsWith(at("spec.extraContainers[0]")));
}

// defaults.replicas

TEST_CASE("defaults.replicas takes integers and templates over numNodes", "[policy][defaults]") {
  const auto p = parse_ok(with_spec(
      R"({"defaults": {"replicas": {"master": 1, "worker": "${numNodes - 1}", "extra": "2"}}})"));
  REQUIRE(p.default_replicas.size() == 3);
  std::map<std::string, std::string> rendered;
  for (const auto& [role, count] : p.default_replicas) rendered[role] = render_ok(count);
  // numNodes is 3 in pod_values().
  CHECK(rendered ==
        std::map<std::string, std::string>{{"master", "1"}, {"worker", "2"}, {"extra", "2"}});
  CHECK(parse_ok(minimal_doc()).default_replicas.empty());
}

TEST_CASE("defaults.replicas may use no variable but numNodes", "[policy][defaults]") {
  for (const char* count :
       {"${index}", "${numNodes * gpusPerNode}", "${rank}", "${i}", "${replicas(worker) + 1}"}) {
    INFO("count: " << count);
    json doc = minimal_doc();
    doc["spec"]["defaults"] = {{"replicas", {{"worker", count}}}};
    const auto message = parse_error(doc);
    CHECK_THAT(message, StartsWith(at("spec.defaults.replicas.worker")));
    CHECK_THAT(message, Contains("may use only numNodes"));
  }
  // A text variable is not a count at all.
  json doc = minimal_doc();
  doc["spec"]["defaults"] = {{"replicas", {{"worker", "${job}"}}}};
  CHECK_THAT(parse_error(doc), Contains("must be a whole number"));
}

TEST_CASE("defaults.replicas rejects counts out of range and non-numbers", "[policy][defaults]") {
  for (const json& count : {json(-1), json(1000001), json(1.5), json(true), json::array({1})}) {
    INFO("count: " << count.dump());
    json doc = minimal_doc();
    doc["spec"]["defaults"] = {{"replicas", {{"worker", count}}}};
    CHECK_THAT(parse_error(doc), StartsWith(at("spec.defaults.replicas.worker")));
  }
}

TEST_CASE("defaults.replicas accepts the bounds 0 and 1000000", "[policy][defaults]") {
  const auto p =
      parse_ok(with_spec(R"({"defaults": {"replicas": {"master": 0, "worker": 1000000}}})"));
  REQUIRE(p.default_replicas.size() == 2);
}

TEST_CASE("defaults.replicas rejects a role that is not a DNS label", "[policy][defaults]") {
  CHECK_THAT(parse_error(with_spec(R"({"defaults": {"replicas": {"Worker": 1}}})")),
             StartsWith(at("spec.defaults.replicas.Worker")));
  CHECK_THAT(parse_error(with_spec(R"({"defaults": {"replicas": [1]}})")),
             StartsWith(at("spec.defaults.replicas")));
}

// Regression (fixed): defaults.replicas promises "a whole number, or a template over numNodes that
// renders to one", but a literal string that is no number (or text around ${numNodes}) is accepted
// at load and fails only at admission. Input: defaults: {replicas: {worker: "abc"}} (also
// "x${numNodes}").
TEST_CASE("defaults.replicas rejects a literal that is not a number at load",
          "[policy][defaults]") {
  for (const char* count : {"abc", "x${numNodes}"}) {
    INFO("count: " << count);
    json doc = minimal_doc();
    doc["spec"]["defaults"] = {{"replicas", {{"worker", count}}}};
    auto p = parse_policy(doc, source);
    CHECK_FALSE(p.ok());
    if (!p.ok()) CHECK_THAT(p.message(), StartsWith(at("spec.defaults.replicas.worker")));
  }
}

// args

TEST_CASE("args parse their command prefix and items with roles and when", "[policy][args]") {
  const auto p = parse_ok(with_spec(R"({"args": {"after": ["tune", "run"], "items": [
    {"value": "--nnodes=${numNodes}"},
    {"value": "--rdzv=${job}:${masterPort}", "when": "numNodes * processesPerNode > 1"},
    {"value": "--rank=${rank}", "roles": ["training"]}]}})"));
  CHECK(p.args_after == std::vector<std::string>{"tune", "run"});
  REQUIRE(p.args.size() == 3);
  CHECK(render_ok(p.args[0].value) == "--nnodes=3");
  CHECK(p.args[0].scope.roles.all);
  REQUIRE(p.args[1].scope.when.has_value());
  CHECK(evaluate_ok(*p.args[1].scope.when));
  CHECK(render_ok(p.args[1].value) == "--rdzv=j:29500");
  CHECK(p.args[2].scope.roles.training);
}

TEST_CASE("args without after insert with an empty prefix", "[policy][args]") {
  const auto p = parse_ok(with_spec(R"({"args": {"items": [{"value": "--x"}]}})"));
  CHECK(p.args_after.empty());
  REQUIRE(p.args.size() == 1);
  CHECK(p.args[0].value.is_literal());
}

TEST_CASE("args without items is rejected", "[policy][args]") {
  CHECK_THAT(parse_error(with_spec(R"({"args": {"after": ["tune", "run"]}})")),
             StartsWith(at("spec.args.items") + "missing"));
}

TEST_CASE("args with an empty after is rejected", "[policy][args]") {
  const auto message = parse_error(with_spec(R"({"args": {"after": [], "items": []}})"));
  CHECK_THAT(message, StartsWith(at("spec.args.after")));
  CHECK_THAT(message, Contains("is empty"));
}

TEST_CASE("an arg item needs a string value", "[policy][args]") {
  CHECK_THAT(parse_error(with_spec(R"({"args": {"items": [{"roles": ["node"]}]}})")),
             StartsWith(at("spec.args.items[0].value") + "missing"));
  CHECK_THAT(parse_error(with_spec(R"({"args": {"items": [{"value": "a"}, {"value": 4}]}})")),
             StartsWith(at("spec.args.items[1].value")));
  CHECK_THAT(parse_error(with_spec(R"({"args": {"items": [{"value": "${nope}"}]}})")),
             StartsWith(at("spec.args.items[0].value")));
}

TEST_CASE("args reject unknown keys and wrong shapes", "[policy][args]") {
  CHECK_THAT(parse_error(with_spec(R"({"args": {"items": [{"value": "a", "valeu": "b"}]}})")),
             StartsWith(at("spec.args.items[0]") + "unknown field \"valeu\""));
  CHECK(parse_error(with_spec(R"({"args": {"item": []}})")) ==
        at("spec.args") + "unknown field \"item\"; did you mean \"items\"?");
  CHECK_THAT(parse_error(with_spec(R"({"args": ["--x"]})")), StartsWith(at("spec.args")));
  CHECK_THAT(parse_error(with_spec(R"({"args": {"items": {"value": "a"}}})")),
             StartsWith(at("spec.args.items")));
  CHECK_THAT(parse_error(with_spec(R"({"args": {"items": ["--x"]}})")),
             StartsWith(at("spec.args.items[0]")));
}

TEST_CASE("an arg using worldSize or rank must be scoped to training roles", "[policy][args]") {
  const auto message =
      parse_error(with_spec(R"({"args": {"items": [{"value": "--world=${worldSize}"}]}})"));
  CHECK_THAT(message, StartsWith(at("spec.args.items[0]")));
  CHECK_THAT(message, Contains("roles: [training]"));
  CHECK_THAT(parse_error(with_spec(
                 R"({"args": {"items": [{"value": "--r=${rank}", "roles": ["launcher"]}]}})")),
             StartsWith(at("spec.args.items[0]")));
}

TEST_CASE("an item may not use ${nodeRank} beside an elastic job's bounds", "[policy][elastic]") {
  CHECK_THAT(parse_error(with_env({{"name", "X"},
                                   {"value", "${minNodes}:${maxNodes}@${nodeRank}"},
                                   {"roles", {"training"}}})),
             StartsWith(at("spec.env[0]")) && Contains("elastic"));
  // In its condition too: the rank would be read for a job whose rendezvous gives it.
  CHECK_THAT(parse_error(with_env({{"name", "X"},
                                   {"value", "${nodeRank}"},
                                   {"roles", {"training"}},
                                   {"when", "maxNodes > 1"}})),
             Contains("elastic"));
  // Two items, each in its own mode, are how torch.yaml writes it.
  const auto p = parse_ok(with_spec(R"({"env": [
      {"name": "PET_NNODES", "value": "${numNodes}", "when": "elastic == 0"},
      {"name": "PET_NNODES", "value": "${minNodes}:${maxNodes}", "when": "elastic == 1"},
      {"name": "PET_NODE_RANK", "value": "${nodeRank}", "roles": ["training"],
       "when": "elastic == 0"}]})"));
  CHECK(p.env.size() == 3);
}

TEST_CASE("a condition joins comparisons with &&, and all must hold", "[policy][template]") {
  auto c = condition::compile("numNodes > 1 && elastic == 0");
  REQUIRE(c);
  CHECK(c->uses(variable::num_nodes));
  CHECK(c->uses(variable::elastic));
  variable_values v;
  v.set(variable::num_nodes, std::int64_t{4});
  v.set(variable::elastic, std::int64_t{0});
  CHECK(*c->evaluate(v));
  v.set(variable::elastic, std::int64_t{1});
  CHECK_FALSE(*c->evaluate(v));
  // The first that fails decides: the rest need not be available.
  auto short_circuit = condition::compile("elastic == 0 && rank > 0");
  REQUIRE(short_circuit);
  CHECK_FALSE(*short_circuit->evaluate(v));
  CHECK_FALSE(condition::compile("numNodes > 1 &&"));
  CHECK_FALSE(condition::compile("&& numNodes > 1"));
}

TEST_CASE("an AcceleratorList parses in order, and a bad one is refused naming the field",
          "[policy][accelerators]") {
  const auto doc = [](const std::string& accelerators) {
    return nlohmann::json::parse(
        R"({"apiVersion": "trainenv.io/v1alpha1", "kind": "AcceleratorList",
        "metadata": {"name": "a"}, "spec": {"accelerators": )" +
        accelerators + "}}");
  };
  const auto listed = trainenv::core::parse_accelerator_list(
      doc(R"([{"resource": "google.com/tpu", "processesPerDevice": 1},
              {"resource": "aws.amazon.com/neuron", "processesPerDevice": 2,
               "byInstanceType": {"trn2.48xlarge": 4}}])"),
      "a.yaml");
  REQUIRE(listed);
  REQUIRE(listed->size() == 2);
  CHECK((*listed)[1].resource == "aws.amazon.com/neuron");
  CHECK((*listed)[1].by_instance_type.front().second == 4);
  const auto refused = [&](const std::string& accelerators) {
    return trainenv::core::parse_accelerator_list(doc(accelerators), "a.yaml").message();
  };
  CHECK(refused(R"([{"resource": "google.com/tpu", "processesPerDevice": 0}])") ==
        "a.yaml: spec.accelerators[0].processesPerDevice: must be a whole number from 1 to 1024");
  CHECK(refused(R"([{"resource": "x", "processesPerDevice": 1}, {"resource": "x",
                     "processesPerDevice": 2}])") ==
        "a.yaml: spec.accelerators[1].resource: \"x\" is listed twice");
  CHECK(refused(R"([{"resource": "x", "processesPerDevice": 1, "byInstanceType": {"t": "4"}}])") ==
        "a.yaml: spec.accelerators[0].byInstanceType.t: must be a whole number from 1 to 1024");
  CHECK(refused(R"([{"resource": "x", "processPerDevice": 1}])").find("unknown field") !=
        std::string::npos);
  CHECK(refused(R"({"resource": "x"})") ==
        "a.yaml: spec.accelerators: must be a list of {resource, processesPerDevice}");
}

TEST_CASE("a StartupFailureList parses in order, and a bad one is refused naming the field",
          "[policy][startup-failures]") {
  const auto doc = [](const std::string& failures) {
    return nlohmann::json::parse(
        R"({"apiVersion": "trainenv.io/v1alpha1", "kind": "StartupFailureList",
        "metadata": {"name": "f"}, "spec": {"failures": )" +
        failures + "}}");
  };
  const auto listed =
      trainenv::core::parse_startup_failure_list(doc(R"([{"name": "ssh-refused", "program": "ssh",
               "match": ["ssh: connect to host", "Connection refused"],
               "cause": "sshd not up", "fix": "start it"}])"),
                                                 "f.yaml");
  REQUIRE(listed);
  REQUIRE(listed->size() == 1);
  CHECK((*listed)[0].match.size() == 2);
  const auto refused = [&](const std::string& failures) {
    return trainenv::core::parse_startup_failure_list(doc(failures), "f.yaml").message();
  };
  const std::string rest = R"("program": "ssh", "cause": "c", "fix": "f")";
  CHECK(refused(R"([{"name": "a", "match": [], )" + rest + "}]") ==
        "f.yaml: spec.failures[0].match: must be a non-empty list of texts one log line holds");
  CHECK(refused(R"([{"name": "a", "match": [""], )" + rest + "}]") ==
        "f.yaml: spec.failures[0].match: each must be a non-empty text of at most 256 characters "
        "(matched as written, not as a pattern)");
  CHECK(refused(R"([{"name": "A b", "match": ["x"], )" + rest + "}]") ==
        "f.yaml: spec.failures[0].name: must be lower-case letters, digits and '-' (a DNS label)");
  CHECK(refused(R"([{"name": "a", "match": ["x"], "program": "ssh", "cause": "c"}])") ==
        "f.yaml: spec.failures[0].fix: must be a non-empty string");
  CHECK(refused(R"([{"name": "a", "match": ["x"], )" + rest +
                R"(}, {"name": "a", "match": ["y"], )" + rest + "}]") ==
        "f.yaml: spec.failures[1].name: \"a\" is listed twice");
  CHECK_THAT(refused(R"([{"name": "a", "match": ["x"], "regex": "y", )" + rest + "}]"),
             Catch::Contains("regex"));
  CHECK_FALSE(trainenv::core::parse_startup_failure_list(doc("{}"), "f.yaml"));
}
