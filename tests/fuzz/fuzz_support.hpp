// Shared by the fuzz targets: the shipped policies, loaded once per process, and a loud stop.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "trainenv/inputs/policy_dir.hpp"

namespace trainenv::fuzz {

inline const core::policy_set& shipped_policies() {
  static const auto load = inputs::load_policy_dir(TRAINENV_POLICIES_DIR);
  if (!load.errors.empty()) {
    std::fprintf(stderr, "fuzz: the shipped policies do not load: %s\n",
                 load.errors.front().c_str());
    std::abort();
  }
  return *load.policies;
}

// A broken invariant is a finding: abort, so libFuzzer saves the input.
inline void require(bool holds, const char* what, const std::string& detail = {}) {
  if (holds) return;
  std::fprintf(stderr, "fuzz: invariant broken: %s\n%s\n", what, detail.substr(0, 2000).c_str());
  std::abort();
}

}  // namespace trainenv::fuzz
