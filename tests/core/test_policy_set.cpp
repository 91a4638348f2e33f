// core/policy.hpp, the policy set: selection by name, framework and default, the
// cross-policy checks, and replaces (docs/contract.md §1, §3).
#include <catch2/catch.hpp>

#include "test_policy_support.hpp"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using nlohmann::json;
using namespace trainenv::core;
using namespace policy_test;

// --- policy_set ---

TEST_CASE("policy_set finds policies by name, by framework and the default", "[policy]") {
  std::vector<policy> list;
  list.push_back(named("torch", "a.yaml", {"torch", "pytorch"}, true));
  list.push_back(named("mpi", "b.yaml", {"mpi", "deepspeed", "mlx"}));
  auto set = policy_set::build(std::move(list));
  REQUIRE(set.ok());
  REQUIRE(set->by_name("torch") != nullptr);
  CHECK(set->by_name("torch")->source == "a.yaml");
  REQUIRE(set->by_name("mpi") != nullptr);
  CHECK(set->by_name("mpi")->name == "mpi");
  CHECK(set->by_name("jax") == nullptr);
  CHECK(set->by_name("") == nullptr);

  REQUIRE(set->by_framework("pytorch") != nullptr);
  CHECK(set->by_framework("pytorch")->name == "torch");
  REQUIRE(set->by_framework("deepspeed") != nullptr);
  CHECK(set->by_framework("deepspeed")->name == "mpi");
  CHECK(set->by_framework("xgboost") == nullptr);
  CHECK(set->by_framework("Torch") == nullptr);

  REQUIRE(set->default_policy() != nullptr);
  CHECK(set->default_policy()->name == "torch");
  CHECK(set->all().size() == 2);
}

TEST_CASE("policy_set without a default policy has none", "[policy]") {
  std::vector<policy> list;
  list.push_back(named("mpi", "b.yaml", {"mpi"}));
  auto set = policy_set::build(std::move(list));
  REQUIRE(set.ok());
  CHECK(set->default_policy() == nullptr);
}

TEST_CASE("policy_set rejects two policies with the same name naming both files", "[policy]") {
  std::vector<policy> list;
  list.push_back(named("torch", "a.yaml"));
  list.push_back(named("torch", "b.yaml"));
  auto set = policy_set::build(std::move(list));
  REQUIRE_FALSE(set.ok());
  CHECK_THAT(set.message(), StartsWith("b.yaml: metadata.name: "));
  CHECK_THAT(set.message(), Contains("a.yaml"));
  CHECK_THAT(set.message(), Contains("\"torch\""));
}

TEST_CASE("policy_set rejects a framework value claimed by two policies", "[policy]") {
  std::vector<policy> list;
  list.push_back(named("torch", "a.yaml", {"torch", "deepspeed"}));
  list.push_back(named("mpi", "b.yaml", {"mpi", "deepspeed"}));
  auto set = policy_set::build(std::move(list));
  REQUIRE_FALSE(set.ok());
  CHECK_THAT(set.message(), StartsWith("b.yaml: spec.frameworks: "));
  CHECK_THAT(set.message(), Contains("\"deepspeed\""));
  CHECK_THAT(set.message(), Contains("\"torch\"") && Contains("a.yaml"));
}

TEST_CASE("policy_set rejects two default policies", "[policy]") {
  std::vector<policy> list;
  list.push_back(named("torch", "a.yaml", {}, true));
  list.push_back(named("platform", "b.yaml", {}, true));
  auto set = policy_set::build(std::move(list));
  REQUIRE_FALSE(set.ok());
  CHECK_THAT(set.message(), StartsWith("b.yaml: spec.default: "));
  CHECK_THAT(set.message(), Contains("\"torch\"") && Contains("a.yaml"));
}

TEST_CASE("policy_set of parsed documents keeps each policy's source", "[policy]") {
  std::vector<policy> list;
  auto torch = parse_policy(full_doc(), "torch.yaml");
  json other = minimal_doc("platform");
  other["spec"]["frameworks"] = {"platform"};
  auto platform = parse_policy(other, "platform.yaml");
  REQUIRE(torch.ok());
  REQUIRE(platform.ok());
  list.push_back(std::move(torch).value());
  list.push_back(std::move(platform).value());
  auto set = policy_set::build(std::move(list));
  REQUIRE(set.ok());
  REQUIRE(set->by_framework("platform") != nullptr);
  CHECK(set->by_framework("platform")->source == "platform.yaml");
  CHECK(set->default_policy() == set->by_name("torch"));
}

TEST_CASE("an empty policy_set finds nothing", "[policy]") {
  auto set = policy_set::build({});
  REQUIRE(set.ok());
  CHECK(set->by_name("torch") == nullptr);
  CHECK(set->by_framework("torch") == nullptr);
  CHECK(set->default_policy() == nullptr);
}

// replaces

TEST_CASE("replaces names the policy and the command prefix", "[policy][replaces]") {
  const auto p = parse_ok(
      with_spec(R"({"replaces": {"policy": "torch-base", "commandPrefix": ["tune", "run"]}})"));
  REQUIRE(p.replaces.has_value());
  CHECK(p.replaces->policy == "torch-base");
  CHECK(p.replaces->command_prefix == std::vector<std::string>{"tune", "run"});
  CHECK_FALSE(parse_ok(minimal_doc()).replaces.has_value());
}

TEST_CASE("replaces without policy is rejected", "[policy][replaces]") {
  CHECK_THAT(parse_error(with_spec(R"({"replaces": {"commandPrefix": ["tune"]}})")),
             StartsWith(at("spec.replaces.policy") + "missing"));
}

TEST_CASE("replaces without commandPrefix is rejected", "[policy][replaces]") {
  CHECK_THAT(parse_error(with_spec(R"({"replaces": {"policy": "torch"}})")),
             StartsWith(at("spec.replaces.commandPrefix") + "missing"));
}

TEST_CASE("replaces with an empty commandPrefix is rejected", "[policy][replaces]") {
  const auto message =
      parse_error(with_spec(R"({"replaces": {"policy": "torch", "commandPrefix": []}})"));
  CHECK_THAT(message, StartsWith(at("spec.replaces.commandPrefix")));
  CHECK_THAT(message, Contains("is empty"));
}

TEST_CASE("replaces rejects a commandPrefix that is not a list of strings", "[policy][replaces]") {
  CHECK_THAT(
      parse_error(with_spec(R"({"replaces": {"policy": "torch", "commandPrefix": "tune run"}})")),
      StartsWith(at("spec.replaces.commandPrefix")));
  CHECK_THAT(
      parse_error(with_spec(R"({"replaces": {"policy": "torch", "commandPrefix": ["tune", 1]}})")),
      StartsWith(at("spec.replaces.commandPrefix[1]")));
}

TEST_CASE("replaces rejects a policy that is not a string", "[policy][replaces]") {
  CHECK_THAT(
      parse_error(with_spec(R"({"replaces": {"policy": ["torch"], "commandPrefix": ["tune"]}})")),
      StartsWith(at("spec.replaces.policy")));
}

TEST_CASE("replaces rejects unknown keys and non-mappings", "[policy][replaces]") {
  const auto message =
      parse_error(with_spec(R"({"replaces": {"policy": "torch", "commandPrefx": ["tune"]}})"));
  CHECK(message ==
        at("spec.replaces") + "unknown field \"commandPrefx\"; did you mean \"commandPrefix\"?");
  CHECK_THAT(parse_error(with_spec(R"({"replaces": "torch"})")), StartsWith(at("spec.replaces")));
}

TEST_CASE("policy_set rejects replaces naming no loaded policy", "[policy][replaces]") {
  std::vector<policy> list;
  list.push_back(named("torch", "torch.yaml"));
  list.push_back(replacing("torchtune", "pytorch"));
  auto set = policy_set::build(std::move(list));
  REQUIRE_FALSE(set.ok());
  CHECK_THAT(set.message(), StartsWith("torchtune.yaml: spec.replaces.policy: "));
  CHECK_THAT(set.message(), Contains("\"pytorch\""));
}

TEST_CASE("policy_set rejects a policy that replaces itself", "[policy][replaces]") {
  std::vector<policy> list;
  list.push_back(replacing("torchtune", "torchtune"));
  auto set = policy_set::build(std::move(list));
  REQUIRE_FALSE(set.ok());
  CHECK_THAT(set.message(), StartsWith("torchtune.yaml: spec.replaces.policy: "));
  CHECK_THAT(set.message(), Contains("itself"));
}

TEST_CASE("replacements_of lists the policies that replace a policy", "[policy][replaces]") {
  std::vector<policy> list;
  list.push_back(replacing("torchtune", "torch"));
  list.push_back(named("torch", "torch.yaml"));
  list.push_back(named("mpi", "mpi.yaml"));
  list.push_back(replacing("other", "torch"));
  auto set = policy_set::build(std::move(list));
  REQUIRE(set.ok());
  const auto& replacers = set->replacements_of("torch");
  REQUIRE(replacers.size() == 2);
  CHECK(replacers[0] == set->by_name("torchtune"));
  CHECK(replacers[1] == set->by_name("other"));
  CHECK(set->replacements_of("mpi").empty());
  CHECK(set->replacements_of("torchtune").empty());
  CHECK(set->replacements_of("nothing").empty());
}

TEST_CASE("replacements_of points into a moved policy_set", "[policy][replaces]") {
  std::vector<policy> list;
  list.push_back(named("torch", "torch.yaml"));
  list.push_back(replacing("torchtune", "torch"));
  auto built = policy_set::build(std::move(list));
  REQUIRE(built.ok());
  const policy_set set = std::move(built).value();
  REQUIRE(set.replacements_of("torch").size() == 1);
  CHECK(set.replacements_of("torch")[0] == set.by_name("torchtune"));
  CHECK(set.replacements_of("torch")[0]->replaces->command_prefix ==
        std::vector<std::string>{"tune", "run"});
}
