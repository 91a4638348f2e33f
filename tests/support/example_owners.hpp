// The pods of examples/owners, exactly as their controllers create them, and their owner
// objects, as the server tests read them.
#pragma once

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../test_support.hpp"
#include "trainenv/inputs/yaml.hpp"

namespace trainenv::test {

inline std::string example(const std::string& name) {
  return std::string(TRAINENV_SOURCE_DIR) + "/examples/owners/" + name;
}

inline nlohmann::json example_pod(const std::string& pod_file) {
  auto pod = inputs::parse_document(read_file(example(pod_file)));
  REQUIRE(pod.ok());
  return std::move(*pod);
}

inline std::vector<nlohmann::json> example_documents(const std::string& owners_file) {
  auto docs = inputs::parse_documents(read_file(example(owners_file)));
  REQUIRE(docs.ok());
  return std::move(*docs);
}

// The document of `kind` in an example owners file.
inline nlohmann::json example_owner(const std::string& owners_file, const std::string& kind) {
  for (auto& doc : example_documents(owners_file)) {
    if (doc.value("kind", "") == kind) return std::move(doc);
  }
  FAIL("no " << kind << " in " << owners_file);
  return {};
}

}  // namespace trainenv::test
