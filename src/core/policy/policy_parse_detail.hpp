// The policy parser's class and the helpers its two files share (policy_parse.cpp: the
// document, its spec and defaults; policy_parse_items.cpp: the items a spec lists and the rules
// on their scopes and variables). Internal to the policy wing (not under include/).
#pragma once

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainenv/core/policy/policy.hpp"
#include "trainenv/core/policy/policy_fields.hpp"
#include "trainenv/core/policy/policy_objects.hpp"
#include "trainenv/core/text/json_access.hpp"

namespace trainenv::core::policy_parse_detail {

using nlohmann::json;

// Internal to the parser: unwinds to parse_policy, which turns it into an error value. The
// first problem ends the parse, and a throw keeps each rule to one line.
struct policy_error {
  std::string message;
};

[[noreturn]] inline void fail(const std::string& field, const std::string& problem) {
  throw policy_error{field_error(field, problem).message};
}

inline void check(std::optional<error> problem) {
  if (problem) throw policy_error{std::move(problem->message)};
}

template <class T>
inline T take(result<T> r) {
  if (!r) throw policy_error{std::move(r).take_error().message};
  return std::move(r).value();
}

inline void check_keys(const json& object, const std::string& field,
                       std::initializer_list<std::string_view> known) {
  check(check_fields(object, field, known));
}

inline const json& require_object(const json& value, const std::string& field) {
  check(expect_object(value, field));
  return value;
}

inline const json& require_array(const json& value, const std::string& field) {
  check(expect_array(value, field));
  return value;
}

inline std::string require_string(const json& value, const std::string& field) {
  return take(read_string(value, field));
}

inline bool require_bool(const json& value, const std::string& field) {
  return take(read_bool(value, field));
}

inline template_string require_template(const json& value, const std::string& field) {
  auto compiled = template_string::compile(require_string(value, field));
  if (!compiled) fail(field, compiled.message());
  return std::move(compiled).value();
}

inline template_json require_template_json(const json& value, const std::string& field) {
  auto compiled = template_json::compile(value);
  if (!compiled) fail(field, compiled.message());
  return std::move(compiled).value();
}

// Conservative: two items are disjoint only with a `when` each, or two explicit lists of plain
// role names that share none.
inline bool scopes_overlap(const item_scope& a, const item_scope& b) {
  if (a.when && b.when) return false;
  const auto& x = a.roles;
  const auto& y = b.roles;
  if (x.all || y.all || x.training || y.training) return true;
  return std::any_of(x.names.begin(), x.names.end(), [&](const auto& r) {
    return std::find(y.names.begin(), y.names.end(), r) != y.names.end();
  });
}

// A TrainingPolicy document, field by field, into `out`; the first problem throws policy_error.
class parser {
 public:
  explicit parser(policy& out) : p_(out) {}

  void parse(const json& doc);

 private:
  // Runs `parse_item(item, field)` over the list at spec.<key>, if present.
  template <class F>
  void each(const json& spec, const char* key, F parse_item) {
    if (!spec.contains(key)) return;
    const std::string field = std::string("spec.") + key;
    const auto& list = require_array(spec[key], field);
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string item_field = field + "[" + std::to_string(i) + "]";
      require_object(list[i], item_field);
      parse_item(list[i], item_field);
    }
  }

  void parse_spec(const json& spec);
  void parse_dns_search(const json& item, const std::string& field);
  void parse_hostfile(const json& item);
  void parse_wait(const json& item);
  void parse_replaces(const json& replaces);
  static std::vector<std::string> require_tokens(const json& value, const std::string& field);
  void parse_defaults(const json& defaults);

  // A whole number, or a template over `allowed` variables that renders to one.
  static template_string require_count_template(const json& value, const std::string& field,
                                                variable_mask allowed);
  static item_scope parse_scope(const json& item, const std::string& field);

  // What an item's templates and condition may use: WORLD_SIZE and RANK exist only for training
  // roles (the Volcano fix), a node rank only for the roles an item names, ${i} only inside an
  // annotation's lines and ${host} only in a hostfile's line.
  void check_variables(const item_scope& scope, variable_mask used, const std::string& field,
                       bool in_lines = false, bool in_hostfile = false);
  void parse_env(const json& item, const std::string& field);
  void parse_port(const json& item, const std::string& field);
  void parse_args(const json& args);
  void parse_volume(const json& item, const std::string& field);
  void parse_mount(const json& item, const std::string& field);
  void parse_annotation(const json& item, const std::string& field);

  policy& p_;
};

}  // namespace trainenv::core::policy_parse_detail
