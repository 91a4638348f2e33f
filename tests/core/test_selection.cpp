// Selection among many policies: by name and framework value through hash maps, so 500
// policies select as correctly as 2 (the cost is measured in bench/core_bench).
#include <catch2/catch.hpp>

#include "synthetic_policies.hpp"
#include "trainenv/core/decide/engine.hpp"

using namespace trainenv;

TEST_CASE("among 500 policies each framework value selects its own policy", "[selection]") {
  const auto policies = test::synthetic_policies(500);
  for (int i : {0, 1, 250, 498, 499}) {
    const std::string name = "fw-" + std::to_string(i);
    const auto d = core::mutate_pod(test::pod_for_framework(name), policies);
    REQUIRE(d.allowed);
    CHECK(d.policy == name);
    CHECK(d.patch()[0]["value"][0]["value"] == std::to_string(i));
  }
}

TEST_CASE("among 500 policies an unknown framework value is denied", "[selection]") {
  const auto policies = test::synthetic_policies(500);
  const auto d = core::mutate_pod(test::pod_for_framework("fw-500"), policies);
  CHECK_FALSE(d.allowed);
  CHECK_THAT(d.message, Catch::Contains("\"fw-500\"") && Catch::Contains("and 484 more"));
  CHECK(d.message.size() < 400);
}
