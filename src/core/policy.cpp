// The policy values' own rules (nproc_setting, role_scope, policy) and the policy set: its
// cross-policy checks and constant-time selection. The parser is policy_parse.cpp.
#include "trainenv/core/policy.hpp"

#include <algorithm>

namespace trainenv::core {

std::optional<nproc_setting> nproc_setting::parse(std::string_view text) {
  if (text == "auto") return nproc_setting{mode::automatic, 0};
  if (text == "cpu") return nproc_setting{mode::cpu, 0};
  if (text == "gpu") return nproc_setting{mode::gpu, 0};
  const auto n = parse_decimal(text, 1'000'000);
  if (!n || *n < 1) return std::nullopt;
  return nproc_setting{mode::count, *n};
}

bool role_scope::matches(std::string_view role, bool is_training_role) const {
  if (all || (training && is_training_role)) return true;
  return std::find(names.begin(), names.end(), role) != names.end();
}

bool policy::is_training_role(std::string_view role) const {
  return std::find(training_roles.begin(), training_roles.end(), role) != training_roles.end();
}

std::uint32_t variables_used_by(const policy& p) {
  std::uint32_t used = p.when ? p.when->used() : 0;
  const auto scope = [&used](const item_scope& s) {
    if (s.when) used |= s.when->used();
  };
  for (const auto& [role, count] : p.default_replicas) used |= count.used();
  for (const auto& item : p.env) {
    scope(item.scope);
    if (item.value) used |= item.value->used();
    if (item.value_from) used |= item.value_from->used();
  }
  for (const auto& item : p.ports) {
    scope(item.scope);
    used |= item.container_port.used();
  }
  for (const auto& item : p.args) {
    scope(item.scope);
    used |= item.value.used();
  }
  for (const auto& item : p.volume_mounts) {
    scope(item.scope);
    used |= item.mount.used();
  }
  for (const auto& item : p.volumes) {
    scope(item.scope);
    used |= item.volume.used();
  }
  for (const auto& item : p.annotations) {
    scope(item.scope);
    if (item.value) used |= item.value->used();
    if (item.line_count) used |= item.line_count->used();
    if (item.line) used |= item.line->used();
  }
  return used;
}

result<policy_set> policy_set::build(std::vector<policy> policies, owner_kind_set owner_kinds) {
  policy_set set;
  set.policies_ = std::move(policies);
  set.owner_kinds_ = std::move(owner_kinds);
  for (std::size_t i = 0; i < set.policies_.size(); ++i) {
    const auto& p = set.policies_[i];
    if (auto [it, inserted] = set.by_name_.emplace(p.name, i); !inserted) {
      return error{p.source + ": metadata.name: policy \"" + p.name + "\" is already defined in " +
                   set.policies_[it->second].source + "; give each policy its own name"};
    }
    for (const auto& framework : p.frameworks) {
      if (auto [it, inserted] = set.by_framework_.emplace(framework, i); !inserted) {
        const auto& owner = set.policies_[it->second];
        return error{p.source + ": spec.frameworks: \"" + framework +
                     "\" is already claimed by policy \"" + owner.name + "\" (" + owner.source +
                     "); a framework value selects one policy"};
      }
    }
    if (p.is_default) {
      if (set.default_) {
        const auto& other = set.policies_[*set.default_];
        return error{p.source + ": spec.default: policy \"" + other.name + "\" (" + other.source +
                     ") is already the default; mark only one policy default: true"};
      }
      set.default_ = i;
    }
  }
  for (const auto& p : set.policies_) {
    if (!p.replaces) continue;
    const auto* target = set.by_name(p.replaces->policy);
    if (target == nullptr) {
      return error{p.source + ": spec.replaces.policy: no policy is named \"" + p.replaces->policy +
                   "\"; name a loaded policy"};
    }
    if (target == &p)
      return error{p.source + ": spec.replaces.policy: a policy cannot replace itself"};
    set.replacements_[p.replaces->policy].push_back(&p);
  }
  return set;
}

const std::vector<const policy*>& policy_set::replacements_of(std::string_view name) const {
  static const std::vector<const policy*> none;
  auto it = replacements_.find(name);
  return it == replacements_.end() ? none : it->second;
}

const policy* policy_set::by_name(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &policies_[it->second];
}

const policy* policy_set::by_framework(std::string_view framework) const {
  auto it = by_framework_.find(framework);
  return it == by_framework_.end() ? nullptr : &policies_[it->second];
}

const policy* policy_set::default_policy() const {
  return default_ ? &policies_[*default_] : nullptr;
}

}  // namespace trainenv::core
