// Owner objects from files, for engine tests: what the API would answer, read through the same
// --owners reader the CLI uses, and the engine driven with them as the shell drives it.
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "../test_support.hpp"
#include "shipped_policies.hpp"
#include "trainenv/core/decide/engine.hpp"
#include "trainenv/inputs/owner_file.hpp"

namespace trainenv::test {

// `path` relative to the source tree ("tests/fixtures/owners/ds-job-jobset.yaml").
inline inputs::owner_file owner_file_at(const std::string& path) {
  auto file =
      inputs::owner_file::parse(read_file(std::string(TRAINENV_SOURCE_DIR) + "/" + path), path);
  if (!file) FAIL(file.message());
  return std::move(*file);
}

// The shipped policies' decision for `pod`, its owners answered from `owners` (one not in the
// file is not found, as from the API).
inline core::decision decide_with(const core::pod_view& pod, const inputs::owner_file& owners) {
  return core::decide(
      pod, shipped_policies(), {},
      [&](const core::owner_ref& ref, core::owner_values& values) { owners.answer(ref, values); });
}
inline core::decision decide_with(const nlohmann::json& pod, const inputs::owner_file& owners) {
  return decide_with(core::pod_view(pod), owners);
}

}  // namespace trainenv::test
