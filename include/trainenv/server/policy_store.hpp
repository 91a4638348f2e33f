// Loads the policy directory into an immutable snapshot and hands it out atomically, so a
// reload never blocks or tears a request in flight.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "trainenv/core/policy.hpp"
#include "trainenv/core/result.hpp"
#include "trainenv/inputs/policy_dir.hpp"
#include "trainenv/server/dir_watcher.hpp"

namespace trainenv::server {

class policy_store {
 public:
  [[nodiscard]] std::shared_ptr<const core::policy_set> current() const { return current_.load(); }
  void replace(std::shared_ptr<const core::policy_set> policies) {
    current_.store(std::move(policies));
  }

 private:
  std::atomic<std::shared_ptr<const core::policy_set>> current_;
};

}  // namespace trainenv::server

namespace trainenv::server {

struct server_state;

// Keeps the store in step with the directory: on a change, loads the whole set; a valid set
// replaces the old one atomically, an invalid one is logged and the last good set stays.
class policy_reloader {
 public:
  policy_reloader(boost::asio::io_context& ioc, std::string dir, server_state& state,
                  std::chrono::milliseconds poll_interval, std::size_t loaded_fingerprint);
  bool start() { return watcher_.start(); }
  void stop() { watcher_.stop(); }

 private:
  void reload();

  std::string dir_;
  server_state& state_;
  std::size_t fingerprint_;
  dir_watcher watcher_;
};

}  // namespace trainenv::server
