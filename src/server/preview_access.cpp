#include "trainenv/server/preview_access.hpp"

namespace trainenv::server {

namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;

namespace {

preview_caller refused(int status, std::string message) {
  preview_caller out;
  out.status = status;
  out.message = std::move(message);
  return out;
}

// A bearer token as RFC 6750 writes it: the scheme (any case), one space, then the token's
// characters (no spaces or controls).
std::optional<std::string_view> bearer_token(std::string_view header) {
  constexpr std::string_view scheme = "bearer ";
  if (header.size() <= scheme.size()) return std::nullopt;
  for (std::size_t i = 0; i < scheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != scheme[i]) return std::nullopt;
  }
  const auto token = header.substr(scheme.size());
  if (token.size() > std::size_t{16} * 1024) return std::nullopt;
  for (const char c : token) {
    if (c <= ' ' || c == 0x7f) return std::nullopt;
  }
  return token;
}

}  // namespace

preview_access::preview_access(kube_client reviews, metrics& m, options o)
    : reviews_(std::move(reviews)), metrics_(m), options_(o) {}

void preview_access::remember(const std::string& key, bool accepted, const std::string& username,
                              std::chrono::milliseconds ttl) const {
  const std::lock_guard lock(mutex_);
  if (const auto it = seen_.find(key); it != seen_.end()) {
    order_.erase(it->second.order);
    seen_.erase(it);
  }
  while (!order_.empty() && seen_.size() >= options_.max_entries) {
    seen_.erase(order_.front());
    order_.pop_front();
  }
  order_.push_back(key);
  seen_.emplace(key,
                remembered{accepted, username, clock_type::now() + ttl, std::prev(order_.end())});
}

asio::awaitable<preview_caller> preview_access::authenticate(std::string_view authorization) const {
  const auto token = bearer_token(authorization);
  if (!token) {
    metrics_.count(counter::preview_auth_failures);
    co_return refused(401,
                      "a preview on this port reads the cluster as its caller: send your bearer "
                      "token (Authorization: Bearer $(kubectl create token ...))");
  }
  auto rights = read_rights::of_caller(*token);
  {
    const std::lock_guard lock(mutex_);
    const auto it = seen_.find(rights.key);
    if (it != seen_.end() && clock_type::now() < it->second.expires) {
      if (!it->second.accepted) {
        metrics_.count(counter::preview_auth_failures);
        co_return refused(401, "the API server does not accept this bearer token");
      }
      preview_caller out;
      out.username = it->second.username;
      out.rights = std::move(rights);
      co_return out;
    }
  }
  // Named, not a temporary: GCC 12 destroys a temporary argument of a co_await'ed call twice.
  std::string presented(*token);
  const auto review = co_await reviews_.review_token(std::move(presented), options_.budget);
  if (review.failed) {
    metrics_.count(counter::preview_auth_failures);
    co_return refused(503, "cannot check the bearer token: " + review.error);
  }
  remember(rights.key, review.authenticated, review.username,
           review.authenticated ? options_.accepted_ttl : options_.rejected_ttl);
  if (!review.authenticated) {
    metrics_.count(counter::preview_auth_failures);
    co_return refused(
        401, "the API server does not accept this bearer token" +
                 (review.error.empty() ? std::string() : " (" + review.error.substr(0, 120) + ")"));
  }
  preview_caller out;
  out.username = review.username;
  out.rights = std::move(rights);
  co_return out;
}

}  // namespace trainenv::server
