// The bytes the server's requests may hold at once (docs/security.md, "Budgets"): a request body
// and what is parsed of it, an API server's answer and what is parsed of that. Each takes its
// share before it reads (its announced length times what parsing it costs) and gives it back
// when done; one that cannot have its share waits for it, within its own deadline. So no flood
// of requests, however large each is within the limits, holds more than the budget, and the pod's
// memory limit covers the worst case (manifests/base/deployment.yaml says how it was measured).
//
// Two lanes: a share of up to `small_share` bytes may use the whole budget, a larger one all but
// `reserved_for_small`. A flood of large bodies then never starves the small ones the API server
// sends for real pods (a few KiB each).
#pragma once

#include <chrono>
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

namespace trainenv::server {

class memory_budget {
 public:
  struct options {
    std::size_t bytes = std::size_t{160} * 1024 * 1024;
    std::size_t small_share = std::size_t{4} * 1024 * 1024;
    std::size_t reserved_for_small = std::size_t{48} * 1024 * 1024;
  };

  // What parsing costs per byte read, measured (docs/security.md): a review read in place by
  // simdjson (its parser state is ~14 bytes a byte, with the body and its padded copy), and a
  // document built whole as nlohmann values (a preview's pod or job, an API server's answer).
  static constexpr std::size_t in_place_factor = 16;
  static constexpr std::size_t built_factor = 40;

  explicit memory_budget(options o);
  memory_budget(const memory_budget&) = delete;
  memory_budget& operator=(const memory_budget&) = delete;

  class share;

  // `bytes` now, or nullopt (never blocks).
  [[nodiscard]] std::optional<share> try_take(std::size_t bytes);
  // `bytes`, waiting for them until `deadline` (as others give theirs back); nullopt at the
  // deadline, or at once when `bytes` is more than its lane can ever give.
  [[nodiscard]] boost::asio::awaitable<std::optional<share>> take(
      std::size_t bytes, std::chrono::steady_clock::time_point deadline);

  [[nodiscard]] std::size_t in_use() const;
  [[nodiscard]] std::size_t peak() const;  // the most in use at once since start
  [[nodiscard]] std::size_t limit_for(std::size_t bytes) const;  // what its lane can give
  [[nodiscard]] const options& settings() const { return options_; }

 private:
  struct waiter {
    std::size_t bytes = 0;
    std::shared_ptr<boost::asio::steady_timer> timer;  // expired at once to wake it
  };
  bool take_locked(std::size_t bytes);
  // noexcept: a share goes back from destructors.
  void give_back(std::size_t bytes) noexcept;

  options options_;
  mutable std::mutex mutex_;
  std::size_t used_ = 0;
  std::size_t peak_ = 0;
  std::list<waiter> waiters_;
};

// A share of a budget, given back when it goes. Movable; empty when moved from. It may grow
// (a body whose length was not announced), within the budget, or be taken over by a larger one.
class memory_budget::share {
 public:
  share() = default;
  share(share&& other) noexcept
      : budget_(std::exchange(other.budget_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  share& operator=(share&& other) noexcept {
    if (this != &other) {
      release();
      budget_ = std::exchange(other.budget_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  share(const share&) = delete;
  share& operator=(const share&) = delete;
  ~share() { release(); }

  [[nodiscard]] std::size_t bytes() const { return bytes_; }
  // Takes `more` (of the same budget) into this share: a body that grows, a share at a time.
  void absorb(share&& more) {
    if (budget_ == nullptr) {
      *this = std::move(more);
      return;
    }
    bytes_ += std::exchange(more.bytes_, 0);
    more.budget_ = nullptr;
  }
  // Gives the share back now.
  void release() {
    if (budget_ != nullptr) budget_->give_back(bytes_);
    budget_ = nullptr;
    bytes_ = 0;
  }

 private:
  friend class memory_budget;
  share(memory_budget* budget, std::size_t bytes) : budget_(budget), bytes_(bytes) {}
  memory_budget* budget_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace trainenv::server
