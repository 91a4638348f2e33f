#include "trainenv/server/policy_store.hpp"

#include <spdlog/spdlog.h>

#include "trainenv/server/state.hpp"

namespace trainenv::server {

policy_reloader::policy_reloader(boost::asio::io_context& ioc, std::string dir, server_state& state,
                                 std::chrono::milliseconds poll_interval,
                                 std::size_t loaded_fingerprint)
    : dir_(std::move(dir)),
      state_(state),
      fingerprint_(loaded_fingerprint),
      watcher_(ioc, dir_, poll_interval, [this] { reload(); }) {}

void policy_reloader::reload() {
  if (inputs::policy_dir_fingerprint(dir_) == fingerprint_) return;
  auto loaded = inputs::load_policy_dir(dir_);
  // Remember even a failed set, so it is reported once, not at every poll.
  fingerprint_ = loaded.fingerprint;
  if (!loaded.errors.empty()) {
    state_.policy_reload_errors.fetch_add(1, std::memory_order_relaxed);
    for (const auto& e : loaded.errors)
      spdlog::error("policy reload failed, keeping the last good set: {}", e);
    return;
  }
  std::string names;
  for (const auto& p : loaded.policies->all()) names += (names.empty() ? "" : ",") + p.name;
  state_.policies.replace(std::move(loaded.policies));
  state_.policy_reloads.fetch_add(1, std::memory_order_relaxed);
  spdlog::info("policies reloaded from {}: [{}]", dir_, names);
}

}  // namespace trainenv::server
