// A fresh directory under the system temporary directory, removed with everything in it when the
// object goes: one per test that writes files (kubeconfigs, policy directories, server logs).
// tests/leaves_no_temp_files.sh checks that none is left behind.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace trainenv::test {

class temp_dir {
 public:
  // `purpose` starts the directory's name (trainenv-<purpose>-<pid>-<time>-<n>), so that one left
  // behind says which test made it.
  explicit temp_dir(std::string_view purpose = "test") : path(make_path(purpose)) {
    std::filesystem::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  temp_dir(temp_dir&&) = delete;
  temp_dir& operator=(temp_dir&&) = delete;

  [[nodiscard]] std::string str() const { return path.string(); }
  [[nodiscard]] std::string file(const std::string& relative) const {
    return (path / relative).string();
  }
  // Writes `text` to `relative`, making the directories it needs; throws when it cannot.
  void write(const std::filesystem::path& relative, const std::string& text) const {
    const auto target = path / relative;
    std::filesystem::create_directories(target.parent_path());
    std::ofstream out(target, std::ios::binary);
    out << text;
    if (!out.good()) throw std::runtime_error("cannot write " + target.string());
  }

  const std::filesystem::path path;

 private:
  static std::filesystem::path make_path(std::string_view purpose) {
    static std::atomic<int> counter{0};
    const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    return std::filesystem::temp_directory_path() /
           ("trainenv-" + std::string(purpose) + "-" + std::to_string(::getpid()) + "-" +
            std::to_string(stamp) + "-" + std::to_string(++counter));
  }
};

}  // namespace trainenv::test
