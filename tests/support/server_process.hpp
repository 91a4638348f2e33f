// The built `trainenv serve` as a process of its own, for the tests and benchmarks that measure
// it from outside (its RSS, its descriptors, its exit status) or run several: loopback ports
// picked by the kernel, read back from its log line; SIGKILLed if the caller leaves early. No
// Catch2 here (the benchmarks use it too): a failure to start throws, naming the log.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../test_support.hpp"
#include "process_stats.hpp"

extern char** environ;

namespace trainenv::test {

// The built binary the hidden process tests drive (their ctest entries set it).
inline std::string built_binary() {
  const char* binary = std::getenv("TRAINENV_BINARY");
  if (binary == nullptr) throw std::runtime_error("TRAINENV_BINARY is not set");
  return binary;
}

class server_process {
 public:
  // `trainenv serve` with the certificates in `certs` (certs/mint.sh's tls.crt and tls.key) and
  // the shipped policies on loopback, plus `flags`; its standard error into `log`.
  server_process(const std::string& binary, const std::filesystem::path& log,
                 const std::vector<std::string>& flags, const std::string& certs)
      : log_(log) {
    std::vector<std::string> args = {binary,
                                     "serve",
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--metrics-listen",
                                     "127.0.0.1:0",
                                     "--tls-cert",
                                     certs + "/tls.crt",
                                     "--tls-key",
                                     certs + "/tls.key",
                                     "--policies",
                                     TRAINENV_POLICIES_DIR};
    args.insert(args.end(), flags.begin(), flags.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    const int rc = posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("cannot start " + binary);
    // The bound ports, from the log line "listening https=127.0.0.1:P http=127.0.0.1:Q
    // [previews=127.0.0.1:R]".
    static const std::regex listening(
        R"(listening https=127\.0\.0\.1:(\d+) http=127\.0\.0\.1:(\d+)(?: previews=127\.0\.0\.1:(\d+))?)");
    const auto start = std::chrono::steady_clock::now();
    std::smatch m;
    std::string text;
    while (std::chrono::steady_clock::now() - start < std::chrono::seconds(20)) {
      text = log_text();
      if (std::regex_search(text, m, listening)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (m.empty()) throw std::runtime_error("serve did not start; its log:\n" + text);
    port_ = static_cast<unsigned short>(std::stoi(m[1]));
    plain_port_ = static_cast<unsigned short>(std::stoi(m[2]));
    if (m[3].matched) preview_port_ = static_cast<unsigned short>(std::stoi(m[3]));
  }
  ~server_process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  server_process(const server_process&) = delete;
  server_process& operator=(const server_process&) = delete;

  [[nodiscard]] unsigned short port() const { return port_; }
  [[nodiscard]] unsigned short plain_port() const { return plain_port_; }
  [[nodiscard]] unsigned short preview_port() const { return preview_port_; }
  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] long rss_kib() const { return proc_status_kib("VmRSS", std::to_string(pid_)); }
  // The most it has held at once since it started (or since reset_peak()).
  [[nodiscard]] long peak_rss_kib() const { return proc_status_kib("VmHWM", std::to_string(pid_)); }
  [[nodiscard]] long open_fds() const {
    long n = 0;
    for ([[maybe_unused]] const auto& e :
         std::filesystem::directory_iterator("/proc/" + std::to_string(pid_) + "/fd"))
      ++n;
    return n;
  }
  [[nodiscard]] std::string log_text() const {
    try {
      return read_file(log_.string());
    } catch (const std::exception&) {
      return {};
    }
  }
  // Sends `signal` and returns at once (a drain runs on).
  void signal(int signal) const { ::kill(pid_, signal); }
  // SIGTERM, then the exit status (-1 if it did not exit by itself within `limit`).
  int terminate(std::chrono::seconds limit) {
    ::kill(pid_, SIGTERM);
    return wait_exit(limit);
  }
  // The exit status once it exits (-1 if it did not within `limit`).
  int wait_exit(std::chrono::seconds limit) {
    const auto start = std::chrono::steady_clock::now();
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() - start > limit) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  std::filesystem::path log_;
  pid_t pid_ = -1;
  unsigned short port_ = 0;
  unsigned short plain_port_ = 0;
  unsigned short preview_port_ = 0;
};

}  // namespace trainenv::test
