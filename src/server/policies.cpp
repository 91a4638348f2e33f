// The policy directory as a reload source.
#include "trainenv/server/policies.hpp"

#include "trainenv/inputs/policy_dir.hpp"

namespace trainenv::server {

reload_source policy_source(std::string dir, policy_snapshot& target) {
  reload_source source;
  source.reloaded = "policies reloaded";
  source.refused = "policy reload failed, keeping the last good set";
  source.fingerprint = [dir] { return inputs::policy_dir_fingerprint(dir); };
  source.load = [dir, &target]() -> core::result<std::string> {
    auto loaded = inputs::load_policy_dir(dir);
    if (!loaded.errors.empty()) {
      std::string errors;
      for (const auto& e : loaded.errors) errors += (errors.empty() ? "" : "; ") + e;
      return core::error{std::move(errors)};
    }
    std::string names;
    for (const auto& p : loaded.policies->all()) names += (names.empty() ? "" : ",") + p.name;
    target.publish(std::move(loaded.policies));
    return "[" + names + "] from " + dir;
  };
  source.retry_refused = false;
  source.dir = std::move(dir);  // last: the lambdas above keep their own copies
  return source;
}

}  // namespace trainenv::server
