// The policy values' own rules (nproc_setting, role_scope, policy) and the policy set: its
// cross-policy checks and constant-time selection. The parser is policy_parse.cpp.
#include "trainenv/core/policy/policy.hpp"

#include "trainenv/core/text/keys.hpp"

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

std::string_view wait_check_name(wait_check check) {
  switch (check) {
    case wait_check::off:
      return "off";
    case wait_check::dns:
      return "dns";
    case wait_check::connect:
      return "connect";
  }
  return "off";
}

std::optional<wait_check> parse_wait_check(std::string_view text) {
  for (const auto check : {wait_check::off, wait_check::dns, wait_check::connect}) {
    if (text == wait_check_name(check)) return check;
  }
  return std::nullopt;
}

bool role_scope::matches(std::string_view role, bool is_training_role) const {
  if (all || (training && is_training_role)) return true;
  return std::find(names.begin(), names.end(), role) != names.end();
}

bool policy::is_training_role(std::string_view role) const {
  if (every_role_trains) return role != launcher_role;
  return std::find(training_roles.begin(), training_roles.end(), role) != training_roles.end();
}

namespace {

// Calls `f(scope, used)` for each item of `p`, `used` being what its templates use.
template <class F>
void each_item(const policy& p, F f) {
  for (const auto& item : p.env)
    f(item.scope,
      (item.value ? item.value->used() : 0) | (item.value_from ? item.value_from->used() : 0));
  for (const auto& item : p.ports) f(item.scope, item.container_port.used());
  for (const auto& item : p.args) f(item.scope, item.value.used());
  for (const auto& item : p.volume_mounts) f(item.scope, item.mount.used());
  for (const auto& item : p.volumes) f(item.scope, item.volume.used());
  for (const auto& item : p.annotations)
    f(item.scope, (item.value ? item.value->used() : 0) |
                      (item.line_count ? item.line_count->used() : 0) |
                      (item.line ? item.line->used() : 0));
  for (const auto& item : p.dns_searches) f(item.scope, item.value.used());
  if (p.hostfile) f(p.hostfile->scope, p.hostfile->line.used());
}

variable_mask with_condition(const item_scope& s, variable_mask used) {
  return used | (s.when ? s.when->used() : 0);
}

}  // namespace

variable_mask policy::variables_used_for(std::string_view role, bool training) const {
  variable_mask used = when ? when->used() : 0;
  each_item(*this, [&](const item_scope& s, variable_mask item) {
    if (s.roles.matches(role, training)) used |= with_condition(s, item);
  });
  return used;
}

variable_mask variables_used_by(const policy& p) {
  variable_mask used = p.when ? p.when->used() : 0;
  for (const auto& [role, count] : p.default_replicas) used |= count.used();
  each_item(p, [&](const item_scope& s, variable_mask item) { used |= with_condition(s, item); });
  return used;
}

result<policy_set> policy_set::build(std::vector<policy> policies, owner_kind_set owner_kinds,
                                     std::vector<std::string> sidecars,
                                     std::vector<accelerator> accelerators,
                                     std::vector<startup_failure> startup_failures) {
  policy_set set;
  set.policies_ = std::move(policies);
  set.owner_kinds_ = std::move(owner_kinds);
  set.sidecars_ = std::move(sidecars);
  set.accelerators_ = std::move(accelerators);
  set.startup_failures_ = std::move(startup_failures);
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
  for (const auto& kind : set.owner_kinds_.all()) {
    if (!kind.default_policy.empty() && set.by_name(kind.default_policy) == nullptr) {
      return error{kind.source + ": owner kind \"" + kind.name +
                   "\": spec.defaultPolicy: no policy " + "is named \"" + kind.default_policy +
                   "\"; name a loaded policy"};
    }
    for (std::size_t i = 0; i < kind.plugins.size(); ++i) {
      const auto& policy = kind.plugins[i].policy;
      if (!policy.empty() && set.by_name(policy) == nullptr) {
        return error{kind.source + ": owner kind \"" + kind.name + "\": spec.plugins[" +
                     std::to_string(i) + "].policy: no policy is named \"" + policy +
                     "\"; name a loaded policy"};
      }
    }
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
