// The typed reads of a document's fields: a TrainingPolicy's or an OwnerKind's, decoded from
// YAML or JSON into nlohmann::json by the shell. Every parser reads through these, so a wrong
// type, a missing member or an unknown field reads the same wherever it is. Each returns the
// value or an error whose message reads "<field>: <problem>; <what to write>"; the parser puts
// its source in front.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainenv/core/text/result.hpp"

namespace trainenv::core {

// "spec" and "env" -> "spec.env"; "" (the document) and "spec" -> "spec".
[[nodiscard]] std::string member_field(std::string_view object_field, std::string_view key);
// "spec.env" and 2 -> "spec.env[2]".
[[nodiscard]] std::string item_field(std::string_view list_field, std::size_t index);

// "<field>: <problem>", or "<problem>" alone for the document itself (field "").
[[nodiscard]] error field_error(std::string_view field, std::string_view problem);

// The one unknown-field problem: `unknown field "contaner"; did you mean "container"?` with the
// nearest known name, or, when no known name is near, `...; known fields here: a, b, c`.
[[nodiscard]] std::string unknown_field(std::string_view key,
                                        std::span<const std::string_view> known);

// The first member of `object` (at `field`) whose key is not `known`, as an error at `field`.
[[nodiscard]] std::optional<error> check_fields(const nlohmann::json& object,
                                                std::string_view field,
                                                std::initializer_list<std::string_view> known);

// A member of a Kubernetes object a policy writes whole (a volume source, an EnvVarSource).
enum class field_type : std::uint8_t {
  string,
  boolean,
  list,
  object,
  file_mode,  // an integer from 0 to 0777 (YAML's 0644 is octal)
};
struct field_rule {
  std::string_view name;
  bool required;
  field_type type;
};

// `object` is a mapping whose members are all in `rules`, of their type, the required ones
// present: as the apiserver will decode it, so the patched pod always decodes.
[[nodiscard]] std::optional<error> check_members(const nlohmann::json& object,
                                                 std::string_view field,
                                                 std::initializer_list<field_rule> rules);

[[nodiscard]] std::optional<error> expect_object(const nlohmann::json& value,
                                                 std::string_view field);
[[nodiscard]] std::optional<error> expect_array(const nlohmann::json& value,
                                                std::string_view field);

// Any string; a number or a boolean is refused with a hint to quote it.
[[nodiscard]] result<std::string> read_string(const nlohmann::json& value, std::string_view field);
// A non-empty string.
[[nodiscard]] result<std::string> read_text(const nlohmann::json& value, std::string_view field);
[[nodiscard]] result<bool> read_bool(const nlohmann::json& value, std::string_view field);
// A whole number from `min` to `max`.
[[nodiscard]] result<std::int64_t> read_int(const nlohmann::json& value, std::string_view field,
                                            std::int64_t min, std::int64_t max);
// A list of DNS labels, none twice.
[[nodiscard]] result<std::vector<std::string>> read_names(const nlohmann::json& value,
                                                          std::string_view field);

}  // namespace trainenv::core
