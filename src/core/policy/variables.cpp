#include "trainenv/core/policy/variables.hpp"

#include <cassert>

namespace trainenv::core {

std::optional<variable> variable_from_name(std::string_view name) {
  for (const auto& info : variable_table) {
    if (info.name == name) return info.id;
  }
  return std::nullopt;
}

std::string variable_names() {
  std::string out;
  for (const auto& info : variable_table) {
    if (!out.empty()) out += ", ";
    out += info.name;
  }
  return out;
}

void variable_values::set(variable v, std::string text) {
  assert(!is_integer_variable(v));
  values_[static_cast<std::size_t>(v)] = std::move(text);
}

void variable_values::set(variable v, std::int64_t number) {
  assert(is_integer_variable(v));
  values_[static_cast<std::size_t>(v)] = number;
}

void variable_values::set_unavailable(variable v, std::string reason) {
  values_[static_cast<std::size_t>(v)] = std::monostate{};
  reasons_[static_cast<std::size_t>(v)] = std::move(reason);
}

const std::string* variable_values::text(variable v) const {
  return std::get_if<std::string>(&values_[static_cast<std::size_t>(v)]);
}

std::optional<std::int64_t> variable_values::number(variable v) const {
  const auto* n = std::get_if<std::int64_t>(&values_[static_cast<std::size_t>(v)]);
  return n != nullptr ? std::optional(*n) : std::nullopt;
}

const std::string& variable_values::unavailable_reason(variable v) const {
  return reasons_[static_cast<std::size_t>(v)];
}

std::int64_t variable_values::replicas(std::string_view role) const {
  for (const auto& [name, count] : replicas_) {
    if (name == role) return count;
  }
  return 0;
}

}  // namespace trainenv::core
