#include "trainenv/core/job/controller_env.hpp"

#include <algorithm>

#include "trainenv/core/text/json_access.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;

bool holds(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The env names a template's container of this name sets.
std::vector<std::string> template_env(const json* role_template, std::string_view container) {
  std::vector<std::string> names;
  const auto* spec = role_template != nullptr ? member(*role_template, "spec") : nullptr;
  const auto* containers = spec != nullptr ? member(*spec, "containers") : nullptr;
  if (containers == nullptr || !containers->is_array()) return names;
  for (const auto& c : *containers) {
    if (string_or_empty(c, "name") != container) continue;
    const auto* env = member(c, "env");
    if (env == nullptr || !env->is_array()) continue;
    for (const auto& e : *env) {
      if (const auto* name = string_member(e, "name")) names.push_back(*name);
    }
  }
  return names;
}

}  // namespace

const std::vector<written_entry>& written_env::in(std::size_t container) const {
  static const std::vector<written_entry> none;
  return container < by_container.size() ? by_container[container] : none;
}

written_env find_written_env(const pod_view& pod, const controller_writes& writes,
                             const json* owner, const json* role_template,
                             const std::vector<std::string>& user_env) {
  written_env out;
  out.writes = &writes;
  if (!writes.when.empty() && (owner == nullptr || find_path(*owner, writes.when) == nullptr))
    return out;
  const auto& containers = pod.containers();
  out.by_container.resize(containers.size());
  std::size_t c = 0;
  for (const auto container : containers) {
    const auto at_container = c++;
    const auto container_name = string_or_empty(container, "name");
    if (!writes.container.empty() && container_name != writes.container) continue;
    const auto env = member(container, "env");
    if (!env.is_array()) continue;
    const auto users = template_env(role_template, container_name);
    // Each entry's name read once: the loop below asks of each name the controller writes.
    std::vector<std::string_view> entry_names;
    for (const auto entry : env) entry_names.push_back(string_or_empty(entry, "name"));
    for (const auto& name : writes.env) {
      std::vector<std::size_t> at;
      for (std::size_t i = 0; i < entry_names.size(); ++i) {
        if (entry_names[i] == name) at.push_back(i);
      }
      if (at.empty()) continue;
      // The user's own entry comes first (the controller appends); every entry after it, or
      // after the controller's one, is a duplicate the kubelet would have read instead.
      const bool users_first = holds(users, name) || holds(user_env, name);
      if (users_first && (!writes.appends || at.size() == 1)) continue;
      for (std::size_t k = users_first ? 1 : 0; k < at.size(); ++k) {
        out.by_container[at_container].push_back({at[k], name, users_first || k > 0});
      }
    }
  }
  return out;
}

}  // namespace trainenv::core
