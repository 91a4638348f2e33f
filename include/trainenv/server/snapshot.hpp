// One immutable value that a writer replaces whole and any number of readers take, for the
// policies and the serving certificate: a reload publishes a new snapshot while requests in
// flight keep the one they took, so a reload never tears or blocks a request.
#pragma once

#include <atomic>
#include <memory>

namespace trainenv::server {

template <class T>
class snapshot {
 public:
  snapshot() = default;
  explicit snapshot(std::shared_ptr<const T> first) : current_(std::move(first)) {}
  snapshot(const snapshot&) = delete;
  snapshot& operator=(const snapshot&) = delete;

  // The value published last (null before the first publish). Readers never wait on a writer:
  // the value they hold stays alive for as long as they hold it.
  [[nodiscard]] std::shared_ptr<const T> read() const {
    return current_.load(std::memory_order_acquire);
  }
  void publish(std::shared_ptr<const T> next) {
    current_.store(std::move(next), std::memory_order_release);
  }

 private:
  std::atomic<std::shared_ptr<const T>> current_;
};

}  // namespace trainenv::server
