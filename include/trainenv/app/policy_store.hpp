// Loads the policy directory into an immutable snapshot and hands it out atomically, so a
// reload never blocks or tears a request in flight.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "trainenv/core/policy.hpp"
#include "trainenv/core/result.hpp"

namespace trainenv::app {

struct policy_load {
  std::shared_ptr<const core::policy_set> policies;  // null when errors is not empty
  std::vector<std::string> errors;                   // "<file>: <field>: <problem>; <fix>"
  std::vector<std::string> files;                    // the files read
};

// Reads every *.yaml, *.yml and *.json file directly in `dir` (skipping dot-files, so a
// ConfigMap mount's ..data links are not read twice), each possibly holding several documents.
[[nodiscard]] policy_load load_policy_dir(const std::string& dir);

class policy_store {
 public:
  [[nodiscard]] std::shared_ptr<const core::policy_set> current() const { return current_.load(); }
  void replace(std::shared_ptr<const core::policy_set> policies) {
    current_.store(std::move(policies));
  }

 private:
  std::atomic<std::shared_ptr<const core::policy_set>> current_;
};

}  // namespace trainenv::app
