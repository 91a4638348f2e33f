// An OwnerKind built in a core test from its spec alone, as policies/owners.yaml would hold it:
// the unit tests of the owner walk, the layout, the engine and the job preview share it.
#pragma once

#include <string>
#include <utility>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "trainenv/core/policy/owners.hpp"

namespace trainenv::test {

inline core::owner_kind owner_kind_from_spec(const std::string& name, const std::string& spec) {
  auto k = core::parse_owner_kind(
      nlohmann::json::parse(R"({"apiVersion": "trainenv.io/v1alpha1", "kind": "OwnerKind",
          "metadata": {"name": ")" +
                            name + R"("}, "spec": )" + spec + "}"),
      "owners.json");
  if (!k) FAIL(k.message());
  return std::move(k).value();
}

}  // namespace trainenv::test
