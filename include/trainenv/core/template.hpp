// Policy text templates: "${job}-node-0-0.${job}" compiled once at policy load, rendered per
// request against the pod's variables. "$${" writes a literal "${"; any other "$" is literal,
// so Kubernetes' own "$(VAR)" references pass through untouched.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainenv/core/result.hpp"

namespace trainenv::core {

enum class variable : std::uint8_t {
  job,
  namespace_name,
  role,
  index,
  num_nodes,
  nproc_per_node,
  master_port,
  world_size,
  rank,
};
inline constexpr std::size_t variable_count = 9;

[[nodiscard]] std::string_view variable_name(variable v);
[[nodiscard]] std::optional<variable> variable_from_name(std::string_view name);
// "job, namespace, role, ..." for error messages.
[[nodiscard]] std::string variable_names();

// The values of one pod's variables. An unavailable one carries the reason instead, which
// becomes the violation message when a policy item needs it.
class variable_values {
 public:
  void set(variable v, std::string value);
  void set_unavailable(variable v, std::string reason);
  [[nodiscard]] const std::string* get(variable v) const;
  [[nodiscard]] const std::string& unavailable_reason(variable v) const;

 private:
  std::array<std::optional<std::string>, variable_count> values_{};
  std::array<std::string, variable_count> reasons_{};
};

class template_string {
 public:
  struct segment {
    std::string literal;          // emitted before the variable
    std::optional<variable> var;  // none on a trailing literal
  };

  [[nodiscard]] static result<template_string> compile(std::string_view text);

  [[nodiscard]] bool uses(variable v) const;
  [[nodiscard]] bool is_literal() const { return variables_used_ == 0; }
  [[nodiscard]] result<std::string> render(const variable_values& values) const;
  [[nodiscard]] const std::string& source() const { return source_; }

 private:
  std::vector<segment> segments_;
  std::uint32_t variables_used_ = 0;  // bit per variable
  std::string source_;
};

// A JSON value whose strings may hold templates (a policy's valueFrom, say).
class template_json {
 public:
  [[nodiscard]] static result<template_json> compile(const nlohmann::json& value);

  [[nodiscard]] bool uses(variable v) const;
  [[nodiscard]] result<nlohmann::json> render(const variable_values& values) const;

 private:
  nlohmann::json value_;
  std::vector<std::pair<nlohmann::json::json_pointer, template_string>> templated_strings_;
};

}  // namespace trainenv::core
