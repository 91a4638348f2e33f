// Who may preview, and with whose rights the preview reads (docs/security.md): on the previews'
// own listener a request carries its caller's bearer token; the API server's TokenReview says
// who that is, and the owners are read with that token as it is, so the API server's RBAC
// decides what a preview may read. trainenv needs no right but `create tokenreviews`, and never
// impersonates anyone.
#pragma once

#include <chrono>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include <boost/asio/awaitable.hpp>

#include "trainenv/server/kube_client.hpp"
#include "trainenv/server/metrics.hpp"

namespace trainenv::server {

// What authenticating one request gave: the caller's rights, or why not (401, or 503 when the
// TokenReview itself could not be had).
struct preview_caller {
  std::optional<read_rights> rights;
  std::string username;  // who the API server says the token is
  int status = 401;      // when there are no rights
  std::string message;   // when there are no rights
};

class preview_access {
 public:
  struct options {
    // How long a TokenReview's answer is reused for the same token: a preview is a person's or a
    // tool's few requests, and a token revoked meanwhile reads nothing anyway (the reads carry
    // it). A rejected token is remembered briefly, so a flood of one bad token costs one review
    // per interval.
    std::chrono::milliseconds accepted_ttl{10'000};
    std::chrono::milliseconds rejected_ttl{2'000};
    std::size_t max_entries = 4096;           // tokens remembered at most; the oldest go first
    std::chrono::milliseconds budget{2'000};  // for one TokenReview
  };

  // `reviews`: a client with the webhook's own credentials, of its own (its connections are not
  // /mutate's); `m` counts failures.
  preview_access(kube_client reviews, metrics& m, options o);

  // The caller of a request with this Authorization header value (empty: none).
  [[nodiscard]] boost::asio::awaitable<preview_caller> authenticate(
      std::string_view authorization) const;

 private:
  struct remembered {
    bool accepted = false;
    std::string username;
    std::chrono::steady_clock::time_point expires;
    std::list<std::string>::iterator order;
  };
  void remember(const std::string& key, bool accepted, const std::string& username,
                std::chrono::milliseconds ttl) const;

  kube_client reviews_;
  metrics& metrics_;
  options options_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::string, remembered> seen_;  // by the token's digest
  mutable std::list<std::string> order_;                      // oldest first
};

}  // namespace trainenv::server
