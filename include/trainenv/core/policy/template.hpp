// Policy text templates: "${job}-node-0-0.${job}" or "${numNodes * max(gpusPerNode, 1)}",
// compiled once at policy load and rendered per request against the pod's variables.
// "$${" writes a literal "${"; any other "$" is literal, so Kubernetes' own "$(VAR)"
// references pass through untouched.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainenv/core/policy/variables.hpp"
#include "trainenv/core/text/result.hpp"

namespace trainenv::core {

// One "${...}" body: a text variable alone ("job"), or integer arithmetic over integer
// variables and literals with + - * and max(...), min(...), replicas(<role>) ("numNodes - 1").
class expression {
 public:
  [[nodiscard]] static result<expression> compile(std::string_view text);

  [[nodiscard]] bool uses(variable v) const { return (used_ & variable_bit(v)) != 0; }
  [[nodiscard]] variable_mask used() const { return used_; }
  [[nodiscard]] bool is_integer() const { return !text_variable_; }
  // Whether the expression is `v` alone ("${index}").
  [[nodiscard]] bool is_variable(variable v) const { return bare_variable() == v; }
  // The variable the expression is alone, if it is one.
  [[nodiscard]] std::optional<variable> bare_variable() const;
  [[nodiscard]] result<std::int64_t> evaluate(const variable_values& values) const;
  [[nodiscard]] result<std::string> render(const variable_values& values) const;

 private:
  enum class op_kind : std::uint8_t {
    constant,
    load,
    load_replicas,
    add,
    subtract,
    multiply,
    max,
    min
  };
  struct op {
    op_kind kind;
    std::int64_t number = 0;  // constant; argument count for max/min
    variable var = variable::job;
    std::string role = {};  // load_replicas
  };
  friend class expression_parser;

  std::vector<op> program_;  // postfix
  std::optional<variable> text_variable_;
  variable_mask used_ = 0;
};

// "<expression> <op> <expression>" with op one of == != < <= > >=, or several joined by "&&"
// (all must hold): a policy item's `when`.
class condition {
 public:
  [[nodiscard]] static result<condition> compile(std::string_view text);
  [[nodiscard]] bool uses(variable v) const { return (used_ & variable_bit(v)) != 0; }
  [[nodiscard]] variable_mask used() const { return used_; }
  [[nodiscard]] result<bool> evaluate(const variable_values& values) const;

 private:
  struct comparison {
    expression lhs;
    expression rhs;
    std::string op;
  };
  [[nodiscard]] static result<comparison> compile_one(std::string_view text,
                                                      std::string_view whole);
  std::vector<comparison> all_;
  variable_mask used_ = 0;
};

class template_string {
 public:
  struct segment {
    std::string literal;              // emitted before the expression
    std::optional<expression> value;  // none on a trailing literal
  };

  [[nodiscard]] static result<template_string> compile(std::string_view text);

  [[nodiscard]] bool uses(variable v) const { return (used_ & variable_bit(v)) != 0; }
  [[nodiscard]] variable_mask used() const { return used_; }
  [[nodiscard]] bool is_literal() const { return !has_expressions_; }
  // A whole number as written, or a single integer expression with no text around it: what a
  // count or a port must be.
  [[nodiscard]] bool is_integer() const;
  [[nodiscard]] result<std::string> render(const variable_values& values) const;
  // Whether the template uses `${v}` exactly once, alone in its ${...}.
  [[nodiscard]] bool uses_once(variable v) const;
  // Whether the template ends with `${v}` and uses `v` nowhere else ("${job}-${index}").
  [[nodiscard]] bool ends_with_variable(variable v) const;
  // The text with each bare ${v} of the variables in `marked` (a used() mask) written as
  // `marker` instead of its value, which `values` need not hold: a name's fixed parts around its
  // varying numbers ("js-node-\x1f-\x1f" for "${job}-${role}-${jobIndex}-${index}").
  [[nodiscard]] result<std::string> render_marked(const variable_values& values,
                                                  variable_mask marked, char marker) const;
  // The value of an is_integer() template as a number (a count, a port).
  [[nodiscard]] result<std::int64_t> evaluate(const variable_values& values) const;
  [[nodiscard]] const std::string& source() const { return source_; }

 private:
  std::vector<segment> segments_;
  std::optional<std::int64_t> literal_number_;  // a literal that is a whole number
  variable_mask used_ = 0;                      // bit per variable
  bool has_expressions_ = false;
  std::string source_;
};

// A JSON value whose strings may hold templates (a policy's valueFrom or volume, say);
// numbers, booleans and structure pass through as they are. A file mode (a member named `mode`
// or `defaultMode`, which Kubernetes types as an integer) may be one integer "${...}", and is
// rendered as a JSON integer.
// (clang-tidy 14 reads the implicit special members through nlohmann::json's members; none of
// them throws in practice.)
class template_json {  // NOLINT(bugprone-exception-escape)
 public:
  [[nodiscard]] static result<template_json> compile(const nlohmann::json& value);

  [[nodiscard]] bool uses(variable v) const { return (used_ & variable_bit(v)) != 0; }
  [[nodiscard]] variable_mask used() const { return used_; }
  [[nodiscard]] result<nlohmann::json> render(const variable_values& values) const;
  [[nodiscard]] const nlohmann::json& source() const { return value_; }

 private:
  struct templated {
    nlohmann::json::json_pointer at;
    template_string text;
    bool file_mode = false;  // rendered as an integer
  };
  [[nodiscard]] static bool is_file_mode_member(const nlohmann::json::json_pointer& at);

  nlohmann::json value_;
  std::vector<templated> templated_strings_;
  variable_mask used_ = 0;
};

}  // namespace trainenv::core
