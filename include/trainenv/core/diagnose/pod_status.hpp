// A live pod's status as doctor reads it: its phase and readiness, its trainenv-wait, and what
// keeps it from running (unschedulable, gated, an image that does not pull, a mount that fails,
// a crash loop), from its status and the kubelet's and scheduler's events about it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainenv/core/diagnose/doctor.hpp"

namespace trainenv::core {

class pod_status {
 public:
  explicit pod_status(const nlohmann::json& pod);

  [[nodiscard]] std::string phase() const;  // status.phase; "Pending" when none yet
  [[nodiscard]] bool ready() const;         // condition Ready is True
  [[nodiscard]] bool finished() const;      // Succeeded or Failed
  [[nodiscard]] bool has_address() const;   // status.podIP
  [[nodiscard]] bool has_init_container(std::string_view name) const;

  // The init container `name`: "done", "waiting", "gave up", "not started", "-" (none).
  [[nodiscard]] std::string wait_state(std::string_view name) const;
  // Its termination message (or reason) when it exited 75, now or before a restart.
  [[nodiscard]] std::optional<std::string> wait_gave_up(std::string_view name) const;
  // When it started, while it runs.
  [[nodiscard]] std::optional<std::string> waiting_in(std::string_view name) const;
  // What it checks, from its arguments: "host", "host:port", "the hostfile's hosts on :22".
  [[nodiscard]] std::vector<std::string> wait_targets(std::string_view name) const;

  // What keeps it from running, each a finding without its pods (the caller adds the pod).
  [[nodiscard]] std::vector<finding> pending_causes(
      const std::vector<nlohmann::json>& events) const;

 private:
  [[nodiscard]] const std::string& name() const;
  void scheduling_causes(std::vector<finding>& out) const;
  void container_causes(const nlohmann::json& c, std::vector<finding>& out) const;
  void mount_causes(const std::vector<nlohmann::json>& events, std::vector<finding>& out) const;
  // "; last exit 1: <its termination message>" of container status `c`, or "".
  [[nodiscard]] static std::string last_exit(const nlohmann::json& c);
  [[nodiscard]] const nlohmann::json* container_status(std::string_view name) const;
  [[nodiscard]] const nlohmann::json* condition(std::string_view type) const;

  const nlohmann::json& pod_;
};

// A termination message as a finding quotes it: its lines joined, cut at `max` characters.
[[nodiscard]] std::string quoted_message(std::string_view message, std::size_t max = 400);

}  // namespace trainenv::core
