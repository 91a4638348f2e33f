// core/policy.hpp and core/names.hpp: the values' own rules (nproc_setting, role_scope,
// training roles) and the shared validators.
#include <catch2/catch.hpp>

#include "trainenv/core/text/names.hpp"

#include "test_policy_support.hpp"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using nlohmann::json;
using namespace trainenv::core;
using namespace policy_test;

// --- shared validators ---

TEST_CASE("nproc_setting parses counts and the three keywords", "[policy]") {
  auto four = nproc_setting::parse("4");
  REQUIRE(four.has_value());
  CHECK(four->kind == nproc_setting::mode::count);
  CHECK(four->count == 4);
  CHECK(nproc_setting::parse("1")->count == 1);
  CHECK(nproc_setting::parse("auto")->kind == nproc_setting::mode::automatic);
  CHECK(nproc_setting::parse("cpu")->kind == nproc_setting::mode::cpu);
  CHECK(nproc_setting::parse("gpu")->kind == nproc_setting::mode::gpu);
}

TEST_CASE("nproc_setting rejects zero, negatives and other words", "[policy]") {
  for (const char* bad :
       {"0", "-1", "", "Auto", "GPU", "1.5", " 4", "4 ", "four", "1e3", "99999999999999999999"}) {
    INFO("nproc \"" << bad << "\"");
    CHECK_FALSE(nproc_setting::parse(bad).has_value());
  }
}

TEST_CASE("role_scope without roles matches every role", "[policy]") {
  const role_scope scope;
  CHECK(scope.matches("launcher", false));
  CHECK(scope.matches("worker", true));
}

TEST_CASE("role_scope training matches only training roles", "[policy]") {
  role_scope scope;
  scope.all = false;
  scope.training = true;
  CHECK(scope.matches("worker", true));
  CHECK(scope.matches("anything", true));
  CHECK_FALSE(scope.matches("launcher", false));
  CHECK_FALSE(scope.matches("worker", false));
}

TEST_CASE("role_scope names match exactly the listed roles", "[policy]") {
  role_scope scope;
  scope.all = false;
  scope.names = {"launcher", "evaluator"};
  CHECK(scope.matches("launcher", false));
  CHECK(scope.matches("evaluator", true));
  CHECK_FALSE(scope.matches("worker", true));
  CHECK_FALSE(scope.matches("Launcher", false));
}

TEST_CASE("role_scope training plus names matches either", "[policy]") {
  role_scope scope;
  scope.all = false;
  scope.training = true;
  scope.names = {"launcher"};
  CHECK(scope.matches("launcher", false));
  CHECK(scope.matches("master", true));
  CHECK_FALSE(scope.matches("evaluator", false));
}

TEST_CASE("policy knows its training roles", "[policy]") {
  const auto p = parse_ok(full_doc());
  CHECK(p.is_training_role("master"));
  CHECK(p.is_training_role("worker"));
  CHECK_FALSE(p.is_training_role("node"));
  CHECK_FALSE(p.is_training_role("launcher"));
}

TEST_CASE("is_dns_label accepts lower-case names up to 63 characters", "[policy]") {
  const std::vector<std::string> names = {"a", "torch", "intel-mpi",         "a1",
                                          "0", "x-y-z", std::string(63, 'a')};
  for (const auto& good : names) {
    INFO("name \"" << good << "\"");
    CHECK(is_dns_label(good));
  }
}

TEST_CASE("is_dns_label rejects empty, long, upper-case, dotted and dash-edged names", "[policy]") {
  const std::vector<std::string> names = {
      "", std::string(64, 'a'), "Torch", "a.b", "a_b", "-a", "a-", "a b", "é"};
  for (const auto& bad : names) {
    INFO("name \"" << bad << "\"");
    CHECK_FALSE(is_dns_label(bad));
  }
}

TEST_CASE("parse_decimal reads unsigned decimal integers up to the maximum", "[policy]") {
  CHECK(parse_decimal("0", 10) == 0);
  CHECK(parse_decimal("10", 10) == 10);
  CHECK(parse_decimal("65535", 65535) == 65535);
  CHECK(parse_decimal("999999999999999999", INT64_MAX) == 999'999'999'999'999'999);
}

TEST_CASE("parse_decimal rejects signs, spaces, empty, over-maximum and overlong text",
          "[policy]") {
  for (const char* bad :
       {"", "-1", "+1", " 1", "1 ", "1.0", "0x1", "abc", "11", "1000000000000000000"}) {
    INFO("text \"" << bad << "\"");
    CHECK_FALSE(parse_decimal(bad, 10).has_value());
  }
  CHECK_FALSE(parse_decimal("1000000000000000000", INT64_MAX).has_value());
  CHECK_FALSE(parse_decimal("65536", 65535).has_value());
}
