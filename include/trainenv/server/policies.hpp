// The policy set the server answers with: a snapshot, and how the reloader refreshes it from
// the policy directory.
#pragma once

#include <string>

#include "trainenv/core/policy/policy.hpp"
#include "trainenv/server/file_reloader.hpp"
#include "trainenv/server/snapshot.hpp"

namespace trainenv::server {

using policy_snapshot = snapshot<core::policy_set>;

// The directory as a reload source: the whole set is loaded on a change; a valid set is
// published, an invalid one refused (and reported once, until the files change again).
[[nodiscard]] reload_source policy_source(std::string dir, policy_snapshot& target);

}  // namespace trainenv::server
