// `trainenv wait`'s checks (docs/contract.md §3.1) over real sockets on loopback and the real
// resolver: what answers at once, what opens late, what never answers, and the message a time-out
// leaves for `kubectl describe`.
#include <catch2/catch.hpp>

#include <atomic>
#include <sstream>
#include <thread>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "trainenv/server/readiness_wait.hpp"

using namespace trainenv::server;
using namespace std::chrono_literals;
using Catch::Contains;

namespace {

// A loopback listener that counts the connections it accepts.
class listener {
 public:
  listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0);
    socklen_t size = sizeof at;
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&at), &size) == 0);
    port_ = ntohs(at.sin_port);
  }
  listener(const listener&) = delete;
  listener& operator=(const listener&) = delete;
  ~listener() {
    if (thread_.joinable()) {
      ::shutdown(fd_, SHUT_RDWR);
      thread_.join();
    }
    ::close(fd_);
  }
  // Starts listening: connections are refused until then.
  void open() {
    REQUIRE(::listen(fd_, 64) == 0);
    thread_ = std::thread([this] {
      for (;;) {
        const int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        ++accepted_;
        ::close(c);
      }
    });
  }
  [[nodiscard]] std::uint16_t port() const { return port_; }
  // The connections accepted once `expected` have been, or after 5 s: the last ones may still
  // be in the queue when the wait that made them returns.
  [[nodiscard]] int accepted(int expected) const {
    for (int i = 0; i < 500 && accepted_ < expected; ++i) std::this_thread::sleep_for(10ms);
    return accepted_;
  }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

wait_options quick(std::chrono::milliseconds timeout) {
  wait_options o;
  o.timeout = timeout;
  o.progress_every = 200ms;
  o.backoff_first = 50ms;
  o.backoff_most = 200ms;
  o.connect_timeout = 500ms;
  return o;
}

}  // namespace

TEST_CASE("targets that answer at once pass after two rounds of checks", "[wait]") {
  listener l;
  l.open();
  std::ostringstream log;
  const auto result = wait_for({{"localhost", 0}, {"127.0.0.1", l.port()}}, quick(5s), log);
  CHECK(result.ok);
  CHECK(result.missing.empty());
  // Every target is checked again once all have answered: the port saw two connections.
  CHECK(l.accepted(2) == 2);
  CHECK_THAT(log.str(), Contains("all 2 targets answered, twice"));
}

TEST_CASE("a port that opens late is refused, said so, then passes", "[wait]") {
  listener l;
  std::ostringstream log;
  std::thread later([&] {
    std::this_thread::sleep_for(700ms);
    l.open();
  });
  const auto result = wait_for({{"127.0.0.1", l.port()}}, quick(10s), log);
  later.join();
  CHECK(result.ok);
  CHECK(result.took >= 700ms);
  CHECK_THAT(log.str(),
             Contains("1 of 1 targets missing: refused (nothing listens yet): 127.0.0.1:"));
}

TEST_CASE("at its bound the wait gives up, naming each target, its cause and for how long",
          "[wait]") {
  listener closed;  // bound, never listening: refused
  std::ostringstream log;
  const auto result = wait_for(
      {{"localhost", 0}, {"127.0.0.1", closed.port()}, {"trainenv-no-such-name.invalid", 0}},
      quick(1500ms), log);
  CHECK_FALSE(result.ok);
  CHECK(result.took >= 1500ms);
  CHECK(result.took < 5s);
  REQUIRE(result.missing.size() == 2);
  CHECK(result.missing[0].cause == wait_cause::refused);
  // NXDOMAIN, or a resolver that does not answer at all: either way the name is said missing.
  CHECK((result.missing[1].cause == wait_cause::no_record ||
         result.missing[1].cause == wait_cause::dns_silent));
  CHECK(result.missing[0].missing_for >= 1s);
  const auto message = timeout_message(result, "trainenv doctor jobset/bert -n team-a");
  CHECK_THAT(message, Contains("gave up after 2 s: 2 of 3 targets did not answer"));
  CHECK_THAT(message, Contains("refused (nothing listens yet): 127.0.0.1:" +
                               std::to_string(closed.port()) + " (2 s)"));
  CHECK_THAT(message, Contains("trainenv-no-such-name.invalid"));
  CHECK_THAT(message, Contains("Why, and what to do: trainenv doctor jobset/bert -n team-a\n"));
  CHECK_THAT(log.str(), Contains("gave up after 2 s"));
}

TEST_CASE("the termination message stays within 4 KiB for 10,000 missing hosts", "[wait]") {
  wait_result result;
  result.took = 600s;
  result.targets = 10'001;
  for (int i = 0; i < 10'000; ++i) {
    result.missing.push_back({{"bert-worker-0-" + std::to_string(i) + ".bert", 22},
                              i % 2 == 0 ? wait_cause::no_record : wait_cause::refused,
                              {},
                              600s});
  }
  const auto message = timeout_message(result, "trainenv doctor jobset/bert -n team-a");
  CHECK(message.size() <= 4096);
  CHECK(message.size() > 3000);  // as much as fits is said
  CHECK_THAT(message, Contains("bert-worker-0-0.bert:22 (600 s)"));
  CHECK_THAT(message, Contains("more (the container's log lists them all)"));
  const std::string last = "Why, and what to do: trainenv doctor jobset/bert -n team-a\n";
  CHECK(message.substr(message.size() - last.size()) == last);
}

TEST_CASE("10,000 targets that answer pass well within the bound", "[wait]") {
  listener l;
  l.open();
  std::vector<wait_item> items;
  for (int i = 0; i < 10'000; ++i) items.push_back({"127.0.0.1", l.port()});
  std::ostringstream log;
  auto options = quick(60s);
  const auto result = wait_for(items, options, log);
  CHECK(result.ok);
  CHECK(l.accepted(20'000) == 20'000);
  WARN("10,000 loopback targets, twice: " << result.took.count() << " ms");
}
