#pragma once
// The policy directory: every policy file in it read, parsed and validated as one set.

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "trainenv/core/policy/policy.hpp"

namespace trainenv::inputs {

struct policy_load {
  std::shared_ptr<const core::policy_set> policies;  // null when errors is not empty
  std::vector<std::string> errors;                   // "<file>: <field>: <problem>; <fix>"
  std::vector<std::string> files;                    // the files read
  std::size_t fingerprint = 0;                       // of the files' names and contents
};

// Reads every *.yaml, *.yml and *.json file directly in `dir` (skipping dot-files, so a
// ConfigMap mount's ..data links are not read twice), each possibly holding several documents.
[[nodiscard]] policy_load load_policy_dir(const std::string& dir);

// The fingerprint load_policy_dir would report, without parsing anything.
[[nodiscard]] std::size_t policy_dir_fingerprint(const std::string& dir);

}  // namespace trainenv::inputs
