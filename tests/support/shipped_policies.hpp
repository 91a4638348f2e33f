// The policies shipped in policies/, loaded once per test binary through the real loader.
#pragma once

#include <catch2/catch.hpp>

#include "trainenv/inputs/policy_dir.hpp"

namespace trainenv::test {

inline const core::policy_set& shipped_policies() {
  static const auto load = inputs::load_policy_dir(TRAINENV_POLICIES_DIR);
  if (!load.errors.empty()) FAIL(load.errors.front());
  return *load.policies;
}

}  // namespace trainenv::test
