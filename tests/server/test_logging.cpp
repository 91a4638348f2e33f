// The log writer on its own (server/logging.cpp): lines written in batches, one write(2) per
// batch; lines dropped and counted when the output stalls or its reader goes away, and the
// "N log lines dropped" notice once the output takes lines again. The output is a pipe or a
// packet socket made here, standing in for standard error.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <string>
#include <thread>

#include <spdlog/spdlog.h>

#include "trainenv/server/logging.hpp"
#include "trainenv/server/metrics.hpp"

namespace {

using namespace std::chrono_literals;

// The log writer on `fd` for the test's length; then a logger without sinks, so the writer
// thread is joined and later tests in this process log nowhere rather than to a closed pipe.
struct logging_to {
  explicit logging_to(int fd) { trainenv::server::setup_logging("text", "info", fd); }
  ~logging_to() { spdlog::set_default_logger(std::make_shared<spdlog::logger>("silent")); }
  logging_to(const logging_to&) = delete;
  logging_to& operator=(const logging_to&) = delete;
};

// What one read(2) of `fd` returns within `wait`, or "".
std::string read_once(int fd, std::chrono::milliseconds wait = 5s) {
  pollfd in{fd, POLLIN, 0};
  if (::poll(&in, 1, static_cast<int>(wait.count())) <= 0) return {};
  std::string out(std::size_t{1} << 20, '\0');
  const auto n = ::read(fd, out.data(), out.size());
  out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return out;
}

std::size_t lines_in(const std::string& text, const std::string& marker) {
  std::size_t count = 0;
  for (auto at = text.find(marker); at != std::string::npos; at = text.find(marker, at + 1))
    ++count;
  return count;
}

// The N of "trainenv: N log lines dropped", or -1.
std::int64_t dropped_notice(const std::string& text) {
  static const std::string notice = " log lines dropped: ";
  const auto end = text.find(notice);
  if (end == std::string::npos) return -1;
  const auto start = text.rfind("trainenv: ", end);
  return start == std::string::npos ? -1 : std::stoll(text.substr(start + 10, end - start - 10));
}

// Reads `fd` until the notice has arrived (or nothing more comes within 5 s); everything read.
std::string read_to_notice(int fd) {
  std::string received;
  for (;;) {
    const auto more = read_once(fd);
    if (more.empty()) return received;
    // Only the new text (and a notice cut across two reads) is searched: the whole text is
    // megabytes, read a few KiB at a time.
    const auto from = received.size() > 64 ? received.size() - 64 : 0;
    received += more;
    if (received.find(" log lines dropped: ", from) != std::string::npos) return received;
  }
}

// Closes a pipe's read end when the test's scope ends, before the log writer is stopped: a writer
// blocked on the full pipe then fails (EPIPE) and stops, even when a check failed midway.
struct closes_at_end {
  explicit closes_at_end(int fd) : fd(fd) {}
  ~closes_at_end() { ::close(fd); }
  closes_at_end(const closes_at_end&) = delete;
  closes_at_end& operator=(const closes_at_end&) = delete;
  int fd;
};

// Waits (at most 5 s) for the writer to have counted `expected` drops in all.
bool counted(std::uint64_t expected) {
  for (int i = 0; i < 500 && trainenv::server::log_lines_dropped() < expected; ++i)
    std::this_thread::sleep_for(10ms);
  return trainenv::server::log_lines_dropped() == expected;
}

}  // namespace

TEST_CASE("lines logged together reach the output in one write", "[logging]") {
  int pair[2];
  // A packet socket keeps each write(2) one message: one read is one write.
  REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) == 0);
  {
    logging_to log(pair[1]);
    for (int i = 0; i < 50; ++i) trainenv::server::log_event("line", {{"n", std::int64_t{i}}});
    const auto batch = read_once(pair[0]);
    CHECK(lines_in(batch, " info line n=") == 50);
    CHECK(read_once(pair[0], 300ms).empty());  // nothing else was written

    // A warning is written with the lines before it, in one write.
    trainenv::server::log_event("before", {});
    spdlog::warn("a warning");
    const auto urgent = read_once(pair[0]);
    CHECK(lines_in(urgent, " info before\n") == 1);
    CHECK(lines_in(urgent, " warning a warning\n") == 1);
  }
  ::close(pair[0]);
  ::close(pair[1]);
}

TEST_CASE("an output that stops draining: lines beyond 4 MiB are dropped, counted and reported",
          "[logging]") {
  std::signal(SIGPIPE, SIG_IGN);  // as `trainenv serve` does (see closes_at_end)
  int pipe_fds[2];
  REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
  ::fcntl(pipe_fds[1], F_SETPIPE_SZ, 4096);
  const auto before = trainenv::server::log_lines_dropped();
  constexpr int logged = 80'000;  // ~5.5 MB of text: more than the pipe and 4 MiB pending hold
  {
    logging_to log(pipe_fds[1]);
    const closes_at_end reader{pipe_fds[0]};
    const std::string padding(40, 'x');
    for (int i = 0; i < logged; ++i)
      trainenv::server::log_event("line", {{"pad", padding}, {"n", std::int64_t{i}}});
    // Nothing was read: the request side went on, and some lines were dropped.
    const auto dropped = trainenv::server::log_lines_dropped() - before;
    CHECK(dropped > 0);
    CHECK(dropped < logged);

    // The reader comes back: everything pending arrives, then the notice.
    const auto received = read_to_notice(pipe_fds[0]);
    INFO(received.substr(received.size() > 300 ? received.size() - 300 : 0));
    REQUIRE(dropped_notice(received) == static_cast<std::int64_t>(dropped));
    CHECK(lines_in(received, " info line pad=") + dropped == logged);
  }
  ::close(pipe_fds[1]);
}

TEST_CASE("an output whose reader went away: lines dropped and counted, the process lives on",
          "[logging]") {
  // As `trainenv serve` does: a write to a closed pipe fails with EPIPE instead of killing.
  std::signal(SIGPIPE, SIG_IGN);
  int gone[2];
  int back[2];
  REQUIRE(::pipe2(gone, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(back, O_CLOEXEC) == 0);
  // The writer's descriptor: the first pipe's, then (dup2) the second's, as if the reader were
  // back.
  const int output = ::dup(gone[1]);
  REQUIRE(output >= 0);
  ::close(gone[0]);
  const auto before = trainenv::server::log_lines_dropped();
  {
    logging_to log(output);
    for (int i = 0; i < 10; ++i) trainenv::server::log_event("lost", {{"n", std::int64_t{i}}});
    REQUIRE(counted(before + 10));
    trainenv::server::metrics metrics;
    CHECK_THAT(metrics.render(),
               Catch::Contains("trainenv_log_lines_dropped_total " + std::to_string(before + 10)));

    REQUIRE(::dup2(back[1], output) == output);
    trainenv::server::log_event("kept", {});
    const auto received = read_to_notice(back[0]);
    CHECK(lines_in(received, " info kept\n") == 1);
    CHECK(lines_in(received, " info lost ") == 0);
    CHECK(dropped_notice(received) == 10);
  }
  ::close(output);
  ::close(gone[1]);
  ::close(back[0]);
  ::close(back[1]);
}
