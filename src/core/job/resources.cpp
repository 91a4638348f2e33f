#include "trainenv/core/job/resources.hpp"

#include <algorithm>
#include <cctype>

#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/json_ref.hpp"
#include "trainenv/core/text/keys.hpp"
#include "trainenv/core/text/quantity.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;

// The two JSON models a container comes in (a pod's, read in place; a pod template's in an
// owner, as nlohmann values), read alike below.
bool is_number(const json* value) {
  return value->is_number();
}
bool is_number(const json_ref& value) {
  return value.is_number();
}
// A quantity as written: a string's text, a number's JSON.
std::string quantity_text(const json* value) {
  return value->is_string() ? value->get<std::string>() : value->dump();
}
std::string quantity_text(const json_ref& value) {
  return value.is_string() ? std::string(value.string()) : to_json(value).dump();
}
template <class Visit>
void for_each_member(const json& object, Visit visit) {
  if (!object.is_object()) return;
  for (const auto& [name, value] : object.items()) visit(std::string_view(name), &value);
}
template <class Visit>
void for_each_member(const json_ref& object, Visit visit) {
  for (const auto [name, value] : object.members()) visit(name, value);
}

// resources.requests first, then resources.limits (Kubeflow Trainer's order).
template <class Json>
auto container_resource(const Json& container, std::string_view name, std::string& where) {
  const auto resources = member(container, "resources");
  for (std::string_view section : {"requests", "limits"}) {
    const auto list = resources ? member(*resources, section) : decltype(resources){};
    const auto value = list ? member(*list, name) : decltype(resources){};
    if (value) {
      where = "resources." + std::string(section) + "." + std::string(name);
      return value;
    }
  }
  return decltype(resources){};
}

// Calls `visit(section, name, value)` for each resource of the container whose name contains
// "gpu" (case-insensitive), requests before limits, until it returns false.
template <class Json, class Visit>
void for_each_gpu_resource(const Json& container, Visit visit) {
  const auto resources = member(container, "resources");
  if (!resources) return;
  for (std::string_view section : {"requests", "limits"}) {
    const auto list = member(*resources, section);
    if (!list) continue;
    bool more = true;
    for_each_member(*list, [&](std::string_view name, const auto& value) {
      if (!more) return;
      std::string lower(name);
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (lower.find("gpu") != std::string::npos) more = visit(section, name, value);
    });
    if (!more) return;
  }
}

template <class Json>
bool asks_for_gpu(const Json& container) {
  bool found = false;
  for_each_gpu_resource(container, [&](std::string_view, std::string_view, const auto&) {
    found = true;
    return false;
  });
  return found;
}

template <class Json>
std::string container_name(const Json& container) {
  const auto name = string_member(container, "name");
  return name ? std::string(*name) : std::string();
}

template <class Json>
result<std::int64_t> cpu_count(const Json& container) {
  std::string where;
  const auto cpu = container_resource(container, "cpu", where);
  if (!cpu) return std::int64_t{1};
  // Kubernetes serialises quantities as strings but accepts JSON numbers too.
  const std::string text = quantity_text(cpu);
  const auto q = cpu->is_string() || is_number(cpu) ? parse_quantity(text) : std::nullopt;
  const auto ceiling = q ? q->ceil() : std::nullopt;
  if (!ceiling) {
    return error{"trainenv: " + where + " of container " + quote(container_name(container)) +
                 " is " + quote(text) + "; expected a Kubernetes quantity such as 4, 2.5 or 2500m"};
  }
  return std::max<std::int64_t>(1, *ceiling);
}

template <class Json>
result<std::int64_t> gpu_count_of(const Json& container) {
  std::optional<error> bad;
  std::int64_t count = 0;
  for_each_gpu_resource(
      container, [&](std::string_view section, std::string_view name, const auto& value) {
        const std::string text = quantity_text(value);
        const auto q = value->is_string() || is_number(value) ? parse_quantity(text) : std::nullopt;
        const auto n = q ? q->ceil() : std::nullopt;
        if (!n) {
          bad = error{"trainenv: resources." + std::string(section) + "." + std::string(name) +
                      " of container " + quote(container_name(container)) + " is " + quote(text) +
                      "; expected a whole number of GPUs"};
          return false;
        }
        count = *n;
        return count <= 0;  // keep looking past a zero count
      });
  if (bad) return std::move(*bad);
  return std::max<std::int64_t>(count, 0);
}

// The processes of the first listed accelerator the container asks for (a count above 0):
// its count x processes per device, by the instance type where the list keys it. nullopt: none.
template <class Json>
result<std::optional<resolved_nproc>> accelerator_processes(const Json& container,
                                                            const nproc_context& context) {
  if (context.accelerators == nullptr) return std::optional<resolved_nproc>();
  for (const auto& a : *context.accelerators) {
    std::string where;
    const auto value = container_resource(container, a.resource, where);
    if (!value) continue;
    const std::string text = quantity_text(value);
    const auto q = value->is_string() || is_number(value) ? parse_quantity(text) : std::nullopt;
    const auto devices = q ? q->ceil() : std::nullopt;
    if (!devices || *devices < 0) {
      return error{"trainenv: " + where + " of container " + quote(container_name(container)) +
                   " is " + quote(text) + "; expected a whole number of devices"};
    }
    if (*devices == 0) continue;
    resolved_nproc out;
    auto per_device = a.processes_per_device;
    std::string machine;
    if (!a.by_instance_type.empty()) {
      const auto known =
          std::find_if(a.by_instance_type.begin(), a.by_instance_type.end(),
                       [&](const auto& t) { return t.first == context.instance_type; });
      if (known != a.by_instance_type.end()) {
        per_device = known->second;
        machine = " on " + context.instance_type;
      } else {
        out.warning =
            "trainenv: " + std::to_string(*devices) + " " + a.resource + " devices at " +
            std::to_string(per_device) + " processes each (the list's default): " +
            (context.instance_type.empty()
                 ? std::string("the pod names no instance type (node.kubernetes.io/instance-type)")
                 : "instance type " + quote(context.instance_type) + " is not in the list") +
            "; set annotation " + std::string(keys::nproc_per_node) +
            ", or ask for a resource that counts cores directly";
      }
    }
    out.count = *devices * per_device;
    out.counted_from = std::to_string(*devices) + " " + a.resource + " x " +
                       std::to_string(per_device) + " per device" + machine + " (" + where + ")";
    return std::optional(std::move(out));
  }
  return std::optional<resolved_nproc>();
}

template <class Json>
result<resolved_nproc> resolve_nproc_of(const nproc_setting& setting, const Json& container,
                                        const nproc_context& context) {
  using mode = nproc_setting::mode;
  if (setting.kind == mode::automatic || setting.kind == mode::gpu) {
    auto counted = accelerator_processes(container, context);
    if (!counted) return std::move(counted).take_error();
    if (*counted) return std::move(**counted);
  }
  switch (setting.kind) {
    case mode::count:
      return resolved_nproc{setting.count, {}, {}, {}};
    case mode::gpu:
      return resolved_nproc{std::nullopt, "gpu", {}, {}};
    case mode::automatic:
      if (asks_for_gpu(container)) return resolved_nproc{std::nullopt, "auto", {}, {}};
      [[fallthrough]];
    case mode::cpu: {
      auto n = cpu_count(container);
      if (!n) return std::move(n).take_error();
      return resolved_nproc{*n, {}, {}, {}};
    }
  }
  return resolved_nproc{std::nullopt, "auto", {}, {}};
}

}  // namespace

result<std::int64_t> gpu_count(const json& container) {
  return gpu_count_of(container);
}

result<std::int64_t> gpu_count(const json_ref& container) {
  return gpu_count_of(container);
}

std::string resolved_nproc::text() const {
  return count ? std::to_string(*count) : std::string(symbolic);
}

result<resolved_nproc> resolve_nproc(const nproc_setting& setting, const json& container,
                                     const nproc_context& context) {
  return resolve_nproc_of(setting, container, context);
}

result<resolved_nproc> resolve_nproc(const nproc_setting& setting, const json_ref& container,
                                     const nproc_context& context) {
  return resolve_nproc_of(setting, container, context);
}

}  // namespace trainenv::core
