#include "trainenv/server/dir_watcher.hpp"

#include <sys/inotify.h>
#include <unistd.h>

#include <array>
#include <atomic>

#include <spdlog/spdlog.h>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

namespace trainenv::server {

namespace asio = boost::asio;

struct dir_watcher::impl : std::enable_shared_from_this<impl> {
  impl(asio::io_context& ioc, std::string dir, std::chrono::milliseconds poll_interval,
       std::function<void()> on_change, std::chrono::milliseconds debounce)
      : dir(std::move(dir)),
        poll_interval(poll_interval),
        debounce(debounce),
        on_change(std::move(on_change)),
        strand(asio::make_strand(ioc)),
        events(strand),
        poll_timer(strand),
        debounce_timer(strand) {}

  void wait_for_events() {
    events.async_wait(
        asio::posix::stream_descriptor::wait_read, [self = shared_from_this()](auto ec) {
          if (ec || self->stopped) return;
          // Drain; what changed does not matter, only that something did.
          std::array<char, 16 * 1024> buffer{};
          while (::read(self->events.native_handle(), buffer.data(), buffer.size()) > 0) {
          }
          self->schedule();
          self->wait_for_events();
        });
  }

  void poll() {
    poll_timer.expires_after(poll_interval);
    poll_timer.async_wait([self = shared_from_this()](auto ec) {
      if (ec || self->stopped) return;
      self->schedule();
      self->poll();
    });
  }

  // Bursts of events (a ConfigMap update touches several entries) become one call.
  void schedule() {
    if (pending) return;
    pending = true;
    debounce_timer.expires_after(debounce);
    debounce_timer.async_wait([self = shared_from_this()](auto ec) {
      self->pending = false;
      if (ec || self->stopped) return;
      self->on_change();
    });
  }

  std::string dir;
  std::chrono::milliseconds poll_interval;
  std::chrono::milliseconds debounce;
  std::function<void()> on_change;
  // Every handler runs on this strand, so the state below needs no lock.
  asio::strand<asio::io_context::executor_type> strand;
  asio::posix::stream_descriptor events;
  asio::steady_timer poll_timer;
  asio::steady_timer debounce_timer;
  bool pending = false;
  bool stopped = false;
  std::atomic<bool> stop_requested{false};
};

dir_watcher::dir_watcher(asio::io_context& ioc, std::string dir,
                         std::chrono::milliseconds poll_interval, std::function<void()> on_change,
                         std::chrono::milliseconds debounce)
    : impl_(std::make_shared<impl>(ioc, std::move(dir), poll_interval, std::move(on_change),
                                   debounce)) {}

dir_watcher::~dir_watcher() {
  try {
    stop();
  } catch (
      ...) {  // NOLINT(bugprone-empty-catch): a destructor must not throw; stopping is best effort
  }
}

bool dir_watcher::start() {
  asio::post(impl_->strand, [self = impl_] { self->poll(); });
  const int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) {
    spdlog::warn("cannot watch {} with inotify; polling every {} ms", impl_->dir,
                 impl_->poll_interval.count());
    return false;
  }
  constexpr std::uint32_t mask = IN_CREATE | IN_DELETE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO |
                                 IN_MOVED_FROM | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF;
  if (::inotify_add_watch(fd, impl_->dir.c_str(), mask) < 0) {
    ::close(fd);
    spdlog::warn("cannot watch {} with inotify; polling every {} ms", impl_->dir,
                 impl_->poll_interval.count());
    return false;
  }
  impl_->events.assign(fd);
  asio::post(impl_->strand, [self = impl_] { self->wait_for_events(); });
  return true;
}

void dir_watcher::stop() {
  auto self = impl_;
  if (!self || self->stop_requested.exchange(true)) return;
  asio::post(self->strand, [self] {
    self->stopped = true;
    boost::system::error_code ignored;
    self->poll_timer.cancel();
    self->debounce_timer.cancel();
    self->events.close(ignored);
  });
}

}  // namespace trainenv::server
