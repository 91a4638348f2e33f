// Watches a directory for changes and reports them, debounced: inotify for promptness, and a
// periodic poll as a fallback where inotify sees nothing (some network and overlay file
// systems). Kubernetes ConfigMap and Secret volumes swap a `..data` symlink by rename, which
// inotify reports as a move into the directory.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

namespace trainenv::server {

class dir_watcher {
 public:
  // `on_change` runs on the io_context, at most once per `debounce`, after any change and at
  // every `poll_interval`; it decides itself whether anything it cares about changed.
  dir_watcher(boost::asio::io_context& ioc, std::string dir,
              std::chrono::milliseconds poll_interval, std::function<void()> on_change,
              std::chrono::milliseconds debounce = std::chrono::milliseconds(100));
  ~dir_watcher();
  dir_watcher(const dir_watcher&) = delete;
  dir_watcher& operator=(const dir_watcher&) = delete;

  // Starts watching; false (and polling only) when inotify cannot watch the directory.
  bool start();
  void stop();

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace trainenv::server
