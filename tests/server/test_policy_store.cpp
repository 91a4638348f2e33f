// server/policy_store.hpp: the atomic snapshot the server reads policies from.
#include <catch2/catch.hpp>

#include "trainenv/server/policy_store.hpp"

using trainenv::inputs::load_policy_dir;
using trainenv::server::policy_store;

TEST_CASE("policy_store hands out the set it was given", "[policy_store]") {
  policy_store store;
  CHECK(store.current() == nullptr);
  const auto load = load_policy_dir(TRAINENV_POLICIES_DIR);
  REQUIRE(load.policies != nullptr);
  store.replace(load.policies);
  CHECK(store.current() == load.policies);
  auto other = load_policy_dir(TRAINENV_POLICIES_DIR).policies;
  REQUIRE(other != nullptr);
  store.replace(other);
  CHECK(store.current() == other);
}
