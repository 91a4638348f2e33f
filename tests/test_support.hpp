// Helpers shared by the tests: fixtures, policies, and the independent patch oracle.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace trainenv::test {

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

}  // namespace trainenv::test
