// A rolling upgrade under load loses no admission (issue 37): two replicas of the built binary
// behind a balancer that stands in for the Service (a replica leaves it when its /readyz turns
// 503), keep-alive clients that never retry a POST (as the kube-apiserver's webhook client does
// not), a new replica started and an old one sent SIGTERM, twice, in each of three rounds. Every
// admission sent must be answered; before the fix, a drain that answered without Connection:
// close and then closed the connections under the clients' next requests lost some.
//
// Hidden ([.rolling]): ctest runs it as server/rolling-upgrade against the Release binary, with
// TRAINENV_BINARY set. Everything on loopback; every wait bounded.
#include <catch2/catch.hpp>

#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <thread>

#include "hostile_clients.hpp"
#include "server_harness.hpp"
#include "server_process.hpp"
#include "temp_dir.hpp"

namespace {

using namespace trainenv;
using namespace trainenv::test;
using nlohmann::json;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

// A TCP balancer on loopback: each new client connection goes to the next replica whose /readyz
// answered 200 at its last check (every 100 ms), and is piped to it byte for byte until either
// side closes. Connections already piped stay where they are, as with a Service's conntrack.
class balancer {
 public:
  struct replica {
    unsigned short tls = 0;
    unsigned short plain = 0;
    std::atomic<bool> ready{false};
    std::atomic<bool> gone{false};
  };

  balancer() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(listen_fd_, 512) == 0);
    socklen_t len = sizeof addr;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
    checker_ = std::thread([this] { check_loop(); });
  }
  ~balancer() {
    stop_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    ::close(listen_fd_);
    acceptor_.join();
    checker_.join();
    // The pipes end when their connections do (the replicas are gone by now).
    const auto until = clock_type::now() + std::chrono::seconds(20);
    while (piping_ > 0 && clock_type::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  balancer(const balancer&) = delete;
  balancer& operator=(const balancer&) = delete;

  [[nodiscard]] unsigned short port() const { return port_; }

  std::shared_ptr<replica> add(const server_process& p) {
    auto r = std::make_shared<replica>();
    r->tls = p.port();
    r->plain = p.plain_port();
    const std::lock_guard lock(mutex_);
    replicas_.push_back(r);
    return r;
  }

  // Waits until the balancer sees `r` ready (or not), within `limit`.
  static bool wait_until(const replica& r, bool ready, std::chrono::seconds limit) {
    const auto until = clock_type::now() + limit;
    while (r.ready != ready && clock_type::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return r.ready == ready;
  }

 private:
  static int connect_to(unsigned short port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd);
      return -1;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
  }

  // GET /readyz on the plain port: 200 or not.
  static bool readyz(unsigned short port) {
    const int fd = connect_to(port);
    if (fd < 0) return false;
    timeval tv{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    const std::string req = "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    (void)::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
    char buf[64] = {};
    const auto n = ::recv(fd, buf, sizeof buf - 1, 0);
    ::close(fd);
    return n > 12 && std::string_view(buf, static_cast<std::size_t>(n)).substr(9, 3) == "200";
  }

  void check_loop() {
    while (!stop_) {
      std::vector<std::shared_ptr<replica>> all;
      {
        const std::lock_guard lock(mutex_);
        all = replicas_;
      }
      for (auto& r : all) r->ready = !r->gone && readyz(r->plain);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  std::shared_ptr<replica> pick() {
    const std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < replicas_.size(); ++i) {
      auto& r = replicas_[(next_ + i) % replicas_.size()];
      if (r->ready) {
        next_ = (next_ + i + 1) % replicas_.size();
        return r;
      }
    }
    return nullptr;
  }

  // Copies `from` to `to` until `from` ends, then half-closes `to`.
  static void pump(int from, int to) {
    std::array<char, 16 * 1024> buf{};
    for (;;) {
      const auto n = ::recv(from, buf.data(), buf.size(), 0);
      if (n <= 0) break;
      if (::send(to, buf.data(), static_cast<std::size_t>(n), MSG_NOSIGNAL) != n) break;
    }
    ::shutdown(to, SHUT_WR);
  }

  void accept_loop() {
    while (!stop_) {
      const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      const auto r = pick();
      const int backend = r ? connect_to(r->tls) : -1;
      if (backend < 0) {
        ++unrouted;
        ::close(client);
        continue;
      }
      ++piping_;
      std::thread([this, client, backend] {
        std::thread back([client, backend] { pump(backend, client); });
        pump(client, backend);
        back.join();
        ::close(client);
        ::close(backend);
        --piping_;
      }).detach();
    }
  }

  int listen_fd_ = -1;
  unsigned short port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::vector<std::shared_ptr<replica>> replicas_;
  std::size_t next_ = 0;
  std::atomic<int> piping_{0};  // connections being piped, each by two threads
  std::thread acceptor_;
  std::thread checker_;

 public:
  std::atomic<int> unrouted{0};  // client connections no ready replica took
};

// A keep-alive client that sends admissions until told to stop, reconnecting when an answer
// says Connection: close; a request that gets no whole answer is lost (never retried).
struct load {
  std::atomic<bool> stop{false};
  std::atomic<long> answered{0};
  std::atomic<long> lost{0};
  std::atomic<long> reconnects{0};
  std::mutex mutex;
  std::string first_loss;

  void run(unsigned short port, const std::string& review) {
    auto ctx = verifying_client_context();
    while (!stop) {
      asio::io_context ioc;
      beast::ssl_stream<beast::tcp_stream> s(ioc, ctx);
      prepare_client_stream(s);
      boost::system::error_code ec;
      beast::get_lowest_layer(s).socket().connect(loopback(port), ec);
      if (!ec) {
        // Bounded: a hang fails the test rather than the run.
        const int fd = beast::get_lowest_layer(s).socket().native_handle();
        timeval tv{10, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        s.handshake(ssl::stream_base::client, ec);
      }
      if (ec) {  // not connected: nothing was sent, nothing lost
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        continue;
      }
      ++reconnects;
      beast::flat_buffer buffer;
      while (!stop) {
        auto req = make_request(http::verb::post, "/mutate", review);
        http::write(s, req, ec);
        http::response<http::string_body> res;
        if (!ec) http::read(s, buffer, res, ec);
        if (ec || res.result_int() != 200) {
          ++lost;
          const std::lock_guard lock(mutex);
          if (first_loss.empty())
            first_loss = ec ? ec.message() : "status " + std::to_string(res.result_int());
          break;
        }
        ++answered;
        if (!res.keep_alive()) break;
      }
    }
  }
};

std::string review_body() {
  const auto text = read_file(std::string(TRAINENV_SOURCE_DIR) +
                              "/tests/fixtures/review-torch-jobset-node3.json");
  return json::parse(text).dump();
}

}  // namespace

TEST_CASE("a rolling upgrade of two replicas under keep-alive load loses no admission",
          "[.rolling]") {
  raise_fd_limit(4096);
  const test::temp_dir scratch("rolling");
  const auto& dir = scratch.path;
  const auto review = review_body();
  // The drain waits for the balancer to drop the replica (100 ms checks), as a Deployment's
  // terminating pod waits for its endpoint to go.
  const std::vector<std::string> flags = {"--threads",           "2", "--drain-delay", "1",
                                          "--shutdown-deadline", "10"};
  for (int round = 1; round <= 3; ++round) {
    INFO("round " << round);
    balancer lb;
    std::vector<std::unique_ptr<server_process>> replicas;
    std::vector<std::shared_ptr<balancer::replica>> seen;
    const auto start_replica = [&](const std::string& name) {
      replicas.push_back(std::make_unique<server_process>(
          built_binary(), dir / (name + "-" + std::to_string(round) + ".log"), flags, cert_dir()));
      seen.push_back(lb.add(*replicas.back()));
      REQUIRE(balancer::wait_until(*seen.back(), true, std::chrono::seconds(10)));
    };
    // A replica that drained (its log says "stopped") but has not exited yet: the kernel's
    // teardown of its inotify descriptor (the policy watcher's), which waits for an SRCU grace
    // period and was seen to block close() for over 14 s on this 2-core machine under the load.
    // Its listeners are closed by then, so nothing is lost: it is waited for after the round.
    std::vector<std::size_t> lingering;
    const auto stop_replica = [&](std::size_t i) {
      replicas[i]->signal(SIGTERM);
      CHECK(balancer::wait_until(*seen[i], false, std::chrono::seconds(5)));
      // The drain ends within --drain-delay + --shutdown-deadline (11 s).
      const auto status = replicas[i]->wait_exit(std::chrono::seconds(15));
      const auto log = replicas[i]->log_text();
      if (status == -1 && log.find("info stopped") != std::string::npos) {
        lingering.push_back(i);
      } else {
        INFO("replica " << i << " exit " << status << "; its log ends:\n"
                        << log.substr(log.size() > 3000 ? log.size() - 3000 : 0));
        CHECK(status == 0);
      }
      seen[i]->gone = true;
    };
    start_replica("a");
    start_replica("b");
    load l;
    std::vector<std::thread> clients;
    for (int c = 0; c < 8; ++c) clients.emplace_back([&] { l.run(lb.port(), review); });
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    start_replica("c");  // the new one, then an old one goes
    stop_replica(0);
    start_replica("d");
    stop_replica(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    l.stop = true;
    for (auto& t : clients) t.join();
    WARN("round " << round << ": " << l.answered << " admissions answered, " << l.lost << " lost, "
                  << l.reconnects << " connections, " << lb.unrouted
                  << " connections no ready replica took");
    INFO("first loss: " << l.first_loss);
    CHECK(l.lost == 0);
    CHECK(l.answered > 1000);
    for (std::size_t i = 2; i < replicas.size(); ++i)
      CHECK(replicas[i]->terminate(std::chrono::seconds(15)) == 0);
    for (const auto i : lingering) {
      const auto start = std::chrono::steady_clock::now();
      CHECK(replicas[i]->wait_exit(std::chrono::seconds(60)) == 0);
      WARN("replica " << i << " drained in time but exited "
                      << std::chrono::duration_cast<std::chrono::seconds>(
                             std::chrono::steady_clock::now() - start)
                             .count()
                      << " s after the round (closing its inotify descriptor)");
    }
  }
}
