#include "trainenv/core/render.hpp"

namespace trainenv::core {

using nlohmann::json;

result<wants> render(const policy& p, const topology& t) {
  const auto values = t.variables();
  container_wants target;
  target.index = t.container;

  for (const auto& item : p.env) {
    if (!item.roles.matches(t.role, t.training_role)) continue;
    json env = {{"name", item.name}};
    if (item.value) {
      auto value = item.value->render(values);
      if (!value) return std::move(value).take_error();
      env["value"] = std::move(*value);
    } else {
      auto value_from = item.value_from->render(values);
      if (!value_from) return std::move(value_from).take_error();
      env["valueFrom"] = std::move(*value_from);
    }
    target.env.push_back(std::move(env));
  }

  for (const auto& item : p.ports) {
    if (!item.roles.matches(t.role, t.training_role)) continue;
    auto text = item.container_port.render(values);
    if (!text) return std::move(text).take_error();
    const auto number = parse_decimal(*text, 65535);
    if (!number || *number == 0) {
      return error{"trainenv: policy \"" + p.name + "\" gives containerPort \"" + *text +
                   "\"; expected a port number from 1 to 65535 (check annotation " +
                   std::string(keys::master_port) + ")"};
    }
    json port = {{"containerPort", *number}, {"protocol", item.protocol}};
    if (!item.name.empty()) port["name"] = item.name;
    target.ports.push_back(std::move(port));
  }

  wants out;
  out.containers.push_back(std::move(target));
  out.annotations[std::string(keys::injected)] = p.name;
  return out;
}

}  // namespace trainenv::core
