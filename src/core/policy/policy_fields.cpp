// The typed field reads every document parser shares (policy_fields.hpp), and the one
// unknown-field message with its nearest-name suggestion.
#include "trainenv/core/policy/policy_fields.hpp"

#include <algorithm>

#include "trainenv/core/text/names.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;

// Suggest only near misses: a typo, a dropped or doubled letter, a wrong case.
constexpr std::size_t near_distance = 2;

std::string range(std::int64_t min, std::int64_t max) {
  return std::to_string(min) + " to " + std::to_string(max);
}

std::optional<error> check_type(const json& member, field_type type, std::string_view field) {
  switch (type) {
    case field_type::string:
      if (!member.is_string()) return field_error(field, "must be a string");
      break;
    case field_type::boolean:
      if (!member.is_boolean()) return field_error(field, "must be true or false");
      break;
    case field_type::list:
      return expect_array(member, field);
    case field_type::object:
      return expect_object(member, field);
    case field_type::file_mode: {
      // Or one "${...}" that computes it (${sshKeyMode}); template_json checks the expression.
      const bool templated = member.is_string() &&
                             member.get_ref<const std::string&>().rfind("${", 0) == 0 &&
                             member.get_ref<const std::string&>().back() == '}';
      if (!templated && (!member.is_number_integer() || member.get<std::int64_t>() < 0 ||
                         member.get<std::int64_t>() > 0777)) {
        return field_error(field,
                           "must be a file mode from 0 to 0777 (write it in octal, e.g. 0644), "
                           "or one ${...} that computes one, e.g. \"${sshKeyMode}\"");
      }
      break;
    }
  }
  return std::nullopt;
}

}  // namespace

std::string member_field(std::string_view object_field, std::string_view key) {
  std::string out(object_field);
  if (!out.empty()) out += '.';
  return out.append(key);
}

std::string item_field(std::string_view list_field, std::size_t index) {
  return std::string(list_field) + "[" + std::to_string(index) + "]";
}

error field_error(std::string_view field, std::string_view problem) {
  if (field.empty()) return error{std::string(problem)};
  return error{std::string(field) + ": " + std::string(problem)};
}

std::string unknown_field(std::string_view key, std::span<const std::string_view> known) {
  std::string_view nearest;
  std::size_t best = near_distance + 1;
  for (auto candidate : known) {
    const auto d = edit_distance(key, candidate);
    if (d < best) best = d, nearest = candidate;
  }
  std::string out = "unknown field " + quote(key);
  if (!nearest.empty()) return out + "; did you mean " + quote(nearest) + "?";
  out += "; known fields here: ";
  for (auto k : known) out.append(k).append(", ");
  out.resize(out.size() - 2);
  return out;
}

std::optional<error> check_fields(const json& object, std::string_view field,
                                  std::initializer_list<std::string_view> known) {
  for (const auto& item : object.items()) {
    if (std::find(known.begin(), known.end(), item.key()) == known.end())
      return field_error(field, unknown_field(item.key(), {known.begin(), known.size()}));
  }
  return std::nullopt;
}

std::optional<error> check_members(const json& object, std::string_view field,
                                   std::initializer_list<field_rule> rules) {
  if (auto e = expect_object(object, field)) return e;
  std::vector<std::string_view> names;
  for (const auto& r : rules) names.push_back(r.name);
  for (const auto& item : object.items()) {
    const auto& key = item.key();
    const auto* rule = std::find_if(rules.begin(), rules.end(),
                                    [&](const field_rule& r) { return r.name == key; });
    if (rule == rules.end()) return field_error(field, unknown_field(key, names));
    if (auto e = check_type(item.value(), rule->type, member_field(field, key))) return e;
  }
  for (const auto& r : rules) {
    if (r.required && !object.contains(std::string(r.name)))
      return field_error(member_field(field, r.name), "missing");
  }
  return std::nullopt;
}

std::optional<error> expect_object(const json& value, std::string_view field) {
  if (!value.is_object()) return field_error(field, "must be a mapping (key: value)");
  return std::nullopt;
}

std::optional<error> expect_array(const json& value, std::string_view field) {
  if (!value.is_array()) return field_error(field, "must be a list");
  return std::nullopt;
}

result<std::string> read_string(const json& value, std::string_view field) {
  if (!value.is_string()) {
    return field_error(field, "must be a string; quote it, e.g. \"" +
                                  (value.is_primitive() ? value.dump() : "") + "\"");
  }
  return value.get<std::string>();
}

result<std::string> read_text(const json& value, std::string_view field) {
  if (!value.is_string() || value.get_ref<const std::string&>().empty())
    return field_error(field, "must be a non-empty string");
  return value.get<std::string>();
}

result<bool> read_bool(const json& value, std::string_view field) {
  if (!value.is_boolean()) return field_error(field, "must be true or false");
  return value.get<bool>();
}

result<std::int64_t> read_int(const json& value, std::string_view field, std::int64_t min,
                              std::int64_t max) {
  if (!value.is_number_integer())
    return field_error(field, "must be a whole number from " + range(min, max));
  const auto n = value.get<std::int64_t>();
  if (n < min || n > max) {
    return field_error(
        field, std::to_string(n) + " is out of range; write a number from " + range(min, max));
  }
  return n;
}

result<std::vector<std::string>> read_names(const json& value, std::string_view field) {
  if (auto e = expect_array(value, field)) return std::move(*e);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const auto at = item_field(field, i);
    auto name = read_string(value[i], at);
    if (!name) return std::move(name).take_error();
    if (!is_dns_label(*name)) {
      return field_error(at,
                         "\"" + *name +
                             "\" is not a valid name; use lower-case letters, digits and '-', at "
                             "most 63 characters");
    }
    if (std::find(out.begin(), out.end(), *name) != out.end())
      return field_error(at, "\"" + *name + "\" is listed twice");
    out.push_back(std::move(*name));
  }
  return out;
}

}  // namespace trainenv::core
