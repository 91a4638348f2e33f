#include "trainenv/server/memory_budget.hpp"

#include <algorithm>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace trainenv::server {

namespace asio = boost::asio;

memory_budget::memory_budget(options o) : options_(o) {
  options_.reserved_for_small = std::min(options_.reserved_for_small, options_.bytes);
}

std::size_t memory_budget::limit_for(std::size_t bytes) const {
  return bytes <= options_.small_share ? options_.bytes
                                       : options_.bytes - options_.reserved_for_small;
}

bool memory_budget::take_locked(std::size_t bytes) {
  if (used_ + bytes > limit_for(bytes)) return false;
  used_ += bytes;
  peak_ = std::max(peak_, used_);
  return true;
}

std::optional<memory_budget::share> memory_budget::try_take(std::size_t bytes) {
  const std::lock_guard lock(mutex_);
  if (!take_locked(bytes)) return std::nullopt;
  return share(this, bytes);
}

asio::awaitable<std::optional<memory_budget::share>> memory_budget::take(
    std::size_t bytes, std::chrono::steady_clock::time_point deadline) {
  if (bytes > limit_for(bytes)) co_return std::nullopt;
  const auto executor = co_await asio::this_coro::executor;
  for (;;) {
    std::list<waiter>::iterator self;
    std::shared_ptr<asio::steady_timer> timer;
    {
      const std::lock_guard lock(mutex_);
      if (take_locked(bytes)) co_return share(this, bytes);
      if (std::chrono::steady_clock::now() >= deadline) co_return std::nullopt;
      timer = std::make_shared<asio::steady_timer>(executor, deadline);
      self = waiters_.insert(waiters_.end(), waiter{bytes, timer});
    }
    // A wake-up expires the timer through this coroutine's executor (each io_context here is
    // run by one thread), so one posted before the wait begins still ends it at once.
    co_await timer->async_wait(asio::as_tuple(asio::use_awaitable));
    const std::lock_guard lock(mutex_);
    waiters_.erase(self);
  }
}

void memory_budget::give_back(std::size_t bytes) noexcept {
  try {
    const std::lock_guard lock(mutex_);
    used_ -= std::min(bytes, used_);
    // Wake, in the order they came, the waiters whose shares now fit; the rest wait on. Each
    // takes its share itself, under the lock, so a wake-up is a chance, not a promise.
    std::size_t promised = used_;
    for (auto& w : waiters_) {
      if (promised + w.bytes > limit_for(w.bytes)) continue;
      promised += w.bytes;
      asio::post(w.timer->get_executor(), [timer = w.timer] {
        timer->expires_at(std::chrono::steady_clock::time_point::min());
      });
    }
  } catch (...) {
    // A broken mutex, or no memory to post a wake-up: the waiters still wake at their deadlines.
  }
}

std::size_t memory_budget::in_use() const {
  const std::lock_guard lock(mutex_);
  return used_;
}

std::size_t memory_budget::peak() const {
  const std::lock_guard lock(mutex_);
  return peak_;
}

}  // namespace trainenv::server
