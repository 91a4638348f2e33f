#include "trainenv/core/job/resources.hpp"

#include <algorithm>
#include <cctype>

#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/quantity.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;

// resources.requests first, then resources.limits (Kubeflow Trainer's order).
const json* container_resource(const json& container, std::string_view name, std::string& where) {
  const auto* resources = member(container, "resources");
  if (resources == nullptr) return nullptr;
  for (std::string_view section : {"requests", "limits"}) {
    const auto* list = member(*resources, section);
    const auto* value = list != nullptr ? member(*list, name) : nullptr;
    if (value != nullptr) {
      where = "resources." + std::string(section) + "." + std::string(name);
      return value;
    }
  }
  return nullptr;
}

// Calls `visit(section, name, value)` for each resource of the container whose name contains
// "gpu" (case-insensitive), requests before limits, until it returns false.
template <class Visit>
void for_each_gpu_resource(const json& container, Visit visit) {
  const auto* resources = member(container, "resources");
  if (resources == nullptr) return;
  for (std::string_view section : {"requests", "limits"}) {
    const auto* list = member(*resources, section);
    if (list == nullptr || !list->is_object()) continue;
    for (const auto& [name, value] : list->items()) {
      std::string lower = name;
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (lower.find("gpu") != std::string::npos && !visit(section, name, value)) return;
    }
  }
}

bool asks_for_gpu(const json& container) {
  bool found = false;
  for_each_gpu_resource(container, [&](std::string_view, const std::string&, const json&) {
    found = true;
    return false;
  });
  return found;
}

result<std::int64_t> cpu_count(const json& container) {
  std::string where;
  const auto* cpu = container_resource(container, "cpu", where);
  if (cpu == nullptr) return std::int64_t{1};
  // Kubernetes serialises quantities as strings but accepts JSON numbers too.
  const std::string text = cpu->is_string() ? cpu->get<std::string>() : cpu->dump();
  const auto q = cpu->is_string() || cpu->is_number() ? parse_quantity(text) : std::nullopt;
  const auto ceiling = q ? q->ceil() : std::nullopt;
  if (!ceiling) {
    const auto* name = string_member(container, "name");
    return error{"trainenv: " + where + " of container " + quote(name ? *name : "") + " is " +
                 quote(text) + "; expected a Kubernetes quantity such as 4, 2.5 or 2500m"};
  }
  return std::max<std::int64_t>(1, *ceiling);
}

}  // namespace

result<std::int64_t> gpu_count(const json& container) {
  std::optional<error> bad;
  std::int64_t count = 0;
  for_each_gpu_resource(
      container, [&](std::string_view section, const std::string& name, const json& value) {
        const std::string text = value.is_string() ? value.get<std::string>() : value.dump();
        const auto q = value.is_string() || value.is_number() ? parse_quantity(text) : std::nullopt;
        const auto n = q ? q->ceil() : std::nullopt;
        if (!n) {
          const auto* cname = string_member(container, "name");
          bad = error{"trainenv: resources." + std::string(section) + "." + name +
                      " of container " + quote(cname ? *cname : "") + " is " + quote(text) +
                      "; expected a whole number of GPUs"};
          return false;
        }
        count = *n;
        return count <= 0;  // keep looking past a zero count
      });
  if (bad) return std::move(*bad);
  return std::max<std::int64_t>(count, 0);
}

std::string resolved_nproc::text() const {
  return count ? std::to_string(*count) : std::string(symbolic);
}

result<resolved_nproc> resolve_nproc(const nproc_setting& setting, const json& container) {
  using mode = nproc_setting::mode;
  switch (setting.kind) {
    case mode::count:
      return resolved_nproc{setting.count, {}};
    case mode::gpu:
      return resolved_nproc{std::nullopt, "gpu"};
    case mode::automatic:
      if (asks_for_gpu(container)) return resolved_nproc{std::nullopt, "auto"};
      [[fallthrough]];
    case mode::cpu: {
      auto n = cpu_count(container);
      if (!n) return std::move(n).take_error();
      return resolved_nproc{*n, {}};
    }
  }
  return resolved_nproc{std::nullopt, "auto"};
}

}  // namespace trainenv::core
