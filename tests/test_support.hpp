// Helpers shared by the tests: fixtures, policies, and the independent patch oracle.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "trainenv/core/text/string_map.hpp"

namespace trainenv::test {

// A string_map as a JSON object: each string value, null for a value that is not a string.
inline nlohmann::json as_json(const core::string_map& map) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& e : map.entries())
    out[std::string(e.key)] = e.is_string ? nlohmann::json(std::string(e.value)) : nlohmann::json();
  return out;
}

// The seed of a property test's run: TRAINENV_PROPERTY_SEED repeats one, else a fresh one (each
// test prints it with its failures).
inline std::uint64_t property_seed() {
  if (const char* given = std::getenv("TRAINENV_PROPERTY_SEED"))
    return std::strtoull(given, nullptr, 10);
  return std::random_device{}();
}

// How many rounds a property test draws: TRAINENV_PROPERTY_ROUNDS, else `full`. The sanitizer
// builds' ctest entries ask for fewer (ASan at -O0 is some twenty times slower); the seed is
// fresh each run, so runs add up to more layouts than any one draws.
inline int property_rounds(int full) {
  if (const char* given = std::getenv("TRAINENV_PROPERTY_ROUNDS")) return std::atoi(given);
  return full;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline nlohmann::json fixture(const std::string& name) {
  return nlohmann::json::parse(read_file(std::string(TRAINENV_FIXTURES_DIR) + "/" + name));
}

// An AdmissionReview of a pod CREATE, as the kube-apiserver sends it for `pod`.
inline nlohmann::json pod_review(const nlohmann::json& pod, const std::string& uid) {
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", uid},
            {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
            {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
            {"namespace", pod["metadata"].value("namespace", "default")},
            {"operation", "CREATE"},
            {"userInfo", {{"username", "system:serviceaccount:kube-system:job-controller"}}},
            {"object", pod}}}};
}

}  // namespace trainenv::test
