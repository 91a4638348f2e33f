// Policy value types, and the parsing and validation of a policy document (already decoded
// from YAML or JSON into nlohmann::json by the shell; no file IO here).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainenv/core/result.hpp"
#include "trainenv/core/template.hpp"

namespace trainenv::core {

inline constexpr std::string_view policy_api_version = "trainenv.io/v1alpha1";
inline constexpr std::string_view policy_kind = "TrainingPolicy";

// Processes per node as written in an annotation or a policy default.
struct nproc_setting {
  enum class mode : std::uint8_t { count, automatic, cpu, gpu };
  mode kind = mode::automatic;
  std::int64_t count = 0;  // with mode::count

  // "4", "auto", "cpu", "gpu"; nullopt for anything else.
  [[nodiscard]] static std::optional<nproc_setting> parse(std::string_view text);
};

// Which roles an item applies to. No `roles:` means every role.
struct role_scope {
  bool all = true;
  bool training = false;  // the policy's training roles
  std::vector<std::string> names;

  [[nodiscard]] bool matches(std::string_view role, bool is_training_role) const;
};

struct env_item {
  std::string name;
  std::optional<template_string> value;
  std::optional<template_json> value_from;
  role_scope roles;
};

struct port_item {
  template_string container_port;  // renders to an integer 1-65535
  std::string name;                // optional
  std::string protocol = "TCP";
  role_scope roles;
};

struct policy {
  std::string name;
  std::string source;  // where it was read from, for messages
  std::vector<std::string> frameworks;
  bool is_default = false;
  std::string container = "node";
  std::vector<std::string> training_roles = {"master", "worker", "node"};
  std::int64_t default_master_port = 29500;
  std::int64_t default_num_nodes = 1;
  nproc_setting default_nproc;
  std::vector<env_item> env;
  std::vector<port_item> ports;

  [[nodiscard]] bool is_training_role(std::string_view role) const;
};

// Parses one policy document. Errors read "<source>: <field>: <problem>; <what to write>".
[[nodiscard]] result<policy> parse_policy(const nlohmann::json& document, std::string_view source);

// An immutable set of policies with constant-time selection by name and framework value.
class policy_set {
 public:
  // Rejects duplicate names, a framework value claimed twice and more than one default.
  [[nodiscard]] static result<policy_set> build(std::vector<policy> policies);

  [[nodiscard]] const policy* by_name(std::string_view name) const;
  [[nodiscard]] const policy* by_framework(std::string_view framework) const;
  [[nodiscard]] const policy* default_policy() const;
  [[nodiscard]] const std::vector<policy>& all() const { return policies_; }

 private:
  struct string_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using index_map = std::unordered_map<std::string, std::size_t, string_hash, std::equal_to<>>;

  std::vector<policy> policies_;
  index_map by_name_;
  index_map by_framework_;
  std::optional<std::size_t> default_;
};

// Shared validators (policies and pod annotations use the same rules).
[[nodiscard]] bool is_dns_label(std::string_view s);
[[nodiscard]] std::optional<std::int64_t> parse_decimal(std::string_view s, std::int64_t max);

}  // namespace trainenv::core
