#pragma once
// The policy directory: every policy file in it read, parsed and validated as one set.

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
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

// The repository's policies/ as this binary was built with it (CMakeLists.txt generates the
// list): the default of the commands that read policies without serving them, so that they work
// from any directory. Named "built-in/<file>" in messages.
struct shipped_file {
  std::string_view name;
  std::string_view text;
};
[[nodiscard]] std::span<const shipped_file> shipped_policy_files();

// What the commands say for `dir` empty: the policies built in.
inline constexpr std::string_view built_in_policies = "the built-in policies";

// load_policy_dir(dir), or the built-in policies when `dir` is empty.
[[nodiscard]] policy_load load_policies(const std::string& dir);

}  // namespace trainenv::inputs
