#include "trainenv/core/template.hpp"

namespace trainenv::core {
namespace {

constexpr std::array<std::string_view, variable_count> names = {
    "job",          "namespace",  "role",      "index", "numNodes",
    "nprocPerNode", "masterPort", "worldSize", "rank",
};

void collect_strings(const nlohmann::json& value, nlohmann::json::json_pointer& at,
                     std::vector<std::pair<nlohmann::json::json_pointer, std::string>>& out) {
  if (value.is_string()) {
    out.emplace_back(at, value.get<std::string>());
  } else if (value.is_object()) {
    for (const auto& [key, child] : value.items()) {
      at.push_back(key);
      collect_strings(child, at, out);
      at.pop_back();
    }
  } else if (value.is_array()) {
    for (std::size_t i = 0; i < value.size(); ++i) {
      at.push_back(std::to_string(i));
      collect_strings(value[i], at, out);
      at.pop_back();
    }
  }
}

}  // namespace

std::string_view variable_name(variable v) {
  return names[static_cast<std::size_t>(v)];
}

std::optional<variable> variable_from_name(std::string_view name) {
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<variable>(i);
  }
  return std::nullopt;
}

std::string variable_names() {
  std::string out;
  for (auto name : names) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

void variable_values::set(variable v, std::string value) {
  values_[static_cast<std::size_t>(v)] = std::move(value);
}

void variable_values::set_unavailable(variable v, std::string reason) {
  values_[static_cast<std::size_t>(v)].reset();
  reasons_[static_cast<std::size_t>(v)] = std::move(reason);
}

const std::string* variable_values::get(variable v) const {
  const auto& slot = values_[static_cast<std::size_t>(v)];
  return slot ? &*slot : nullptr;
}

const std::string& variable_values::unavailable_reason(variable v) const {
  return reasons_[static_cast<std::size_t>(v)];
}

result<template_string> template_string::compile(std::string_view text) {
  template_string out;
  out.source_ = std::string(text);
  std::string literal;
  std::size_t i = 0;
  while (i < text.size()) {
    if (text.compare(i, 3, "$${") == 0) {
      literal += "${";
      i += 3;
      continue;
    }
    if (text.compare(i, 2, "${") != 0) {
      literal += text[i++];
      continue;
    }
    const auto close = text.find('}', i + 2);
    if (close == std::string_view::npos) {
      return error{"unterminated \"${\" in \"" + std::string(text) +
                   "\": write ${name}, or $${ for a literal ${"};
    }
    const auto name = text.substr(i + 2, close - i - 2);
    const auto var = variable_from_name(name);
    if (!var) {
      return error{"unknown variable ${" + std::string(name) + "} in \"" + std::string(text) +
                   "\": use one of " + variable_names()};
    }
    out.segments_.push_back({std::move(literal), var});
    out.variables_used_ |= 1U << static_cast<unsigned>(*var);
    literal.clear();
    i = close + 1;
  }
  if (!literal.empty() || out.segments_.empty()) out.segments_.push_back({std::move(literal), {}});
  return out;
}

bool template_string::uses(variable v) const {
  return (variables_used_ & (1U << static_cast<unsigned>(v))) != 0;
}

result<std::string> template_string::render(const variable_values& values) const {
  std::string out;
  for (const auto& seg : segments_) {
    out += seg.literal;
    if (!seg.var) continue;
    const auto* value = values.get(*seg.var);
    if (value == nullptr) return error{values.unavailable_reason(*seg.var)};
    out += *value;
  }
  return out;
}

result<template_json> template_json::compile(const nlohmann::json& value) {
  template_json out;
  out.value_ = value;
  std::vector<std::pair<nlohmann::json::json_pointer, std::string>> strings;
  nlohmann::json::json_pointer root;
  collect_strings(value, root, strings);
  for (auto& [at, text] : strings) {
    auto compiled = template_string::compile(text);
    if (!compiled) return std::move(compiled).take_error();
    // Escaped "$${" must be rendered too, or it would reach the pod verbatim.
    if (!compiled->is_literal() || text.find("$${") != std::string::npos) {
      out.templated_strings_.emplace_back(at, std::move(*compiled));
    }
  }
  return out;
}

bool template_json::uses(variable v) const {
  for (const auto& [at, text] : templated_strings_) {
    if (text.uses(v)) return true;
  }
  return false;
}

result<nlohmann::json> template_json::render(const variable_values& values) const {
  nlohmann::json out = value_;
  for (const auto& [at, text] : templated_strings_) {
    auto rendered = text.render(values);
    if (!rendered) return std::move(rendered).take_error();
    out[at] = std::move(*rendered);
  }
  return out;
}

}  // namespace trainenv::core
