// server/snapshot.hpp and server/file_reloader.hpp: the generic pieces behind the policy and
// certificate reloads (their end-to-end cases are in test_server.cpp and test_tls.cpp).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "temp_dir.hpp"
#include "trainenv/inputs/policy_dir.hpp"
#include "trainenv/server/file_reloader.hpp"
#include "trainenv/server/policies.hpp"
#include "trainenv/server/snapshot.hpp"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using trainenv::server::file_reloader;
using trainenv::server::reload_source;
using trainenv::server::snapshot;

void write(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Waits until `done` holds, at most `limit`.
bool eventually(const std::function<bool()>& done, std::chrono::milliseconds limit = 3s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// A directory holding one file, `value`, reloaded into a snapshot<std::string>; the text "bad"
// is refused.
struct watched_value {
  explicit watched_value(bool retry_refused) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    write(dir / "value", "one");
    value.publish(std::make_shared<const std::string>("one"));
    reload_source source;
    source.reloaded = "value reloaded";
    source.refused = "value reload failed, keeping the last good one";
    source.dir = dir.string();
    source.fingerprint = [this] { return std::hash<std::string>{}(read(dir / "value")); };
    source.load = [this]() -> trainenv::core::result<std::string> {
      auto text = read(dir / "value");
      if (text == "bad") return trainenv::core::error{"bad value"};
      value.publish(std::make_shared<const std::string>(text));
      return text;
    };
    source.retry_refused = retry_refused;
    reloader = std::make_unique<file_reloader>(
        ioc, std::move(source), 50ms, std::hash<std::string>{}(std::string("one")),
        [this](bool ok) { ++(ok ? loaded : refused); }, 10ms);
    reloader->start();
    thread = std::thread([this] { ioc.run(); });
  }
  ~watched_value() {
    reloader->stop();
    work.reset();
    ioc.stop();
    thread.join();
    fs::remove_all(dir);
  }
  watched_value(const watched_value&) = delete;
  watched_value& operator=(const watched_value&) = delete;

  [[nodiscard]] std::string current() const { return *value.read(); }

  fs::path dir = fs::temp_directory_path() / ("trainenv-reload-" + std::to_string(::getpid()));
  snapshot<std::string> value;
  std::atomic<int> loaded{0};
  std::atomic<int> refused{0};
  boost::asio::io_context ioc;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{ioc.get_executor()};
  std::unique_ptr<file_reloader> reloader;
  std::thread thread;
};

}  // namespace

TEST_CASE("a snapshot hands out what was published last", "[snapshot]") {
  snapshot<std::string> s;
  CHECK(s.read() == nullptr);
  auto first = std::make_shared<const std::string>("first");
  s.publish(first);
  CHECK(s.read() == first);
  s.publish(std::make_shared<const std::string>("second"));
  CHECK(*s.read() == "second");
}

TEST_CASE("a reader keeps the value it took after a new one is published", "[snapshot]") {
  snapshot<std::string> s(std::make_shared<const std::string>("old"));
  const auto held = s.read();
  const std::weak_ptr<const std::string> watch = held;
  s.publish(std::make_shared<const std::string>("new"));
  CHECK(*held == "old");
  CHECK(*s.read() == "new");
  CHECK_FALSE(watch.expired());
}

TEST_CASE("readers racing a writer only ever see whole values", "[snapshot]") {
  struct pair {
    long a;
    long b;  // always a * 2
  };
  snapshot<pair> s(std::make_shared<const pair>(pair{0, 0}));
  std::atomic<bool> stop{false};
  std::atomic<long> torn{0};
  std::atomic<long> reads{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 3; ++i) {
    readers.emplace_back([&] {
      while (!stop) {
        const auto p = s.read();
        if (p->b != p->a * 2) ++torn;
        ++reads;
      }
    });
  }
  for (long i = 1; i <= 20'000; ++i) s.publish(std::make_shared<const pair>(pair{i, i * 2}));
  // On a loaded machine the readers may not have run yet: let them read before stopping.
  for (int wait = 0; reads == 0 && wait < 5'000; ++wait)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  stop = true;
  for (auto& t : readers) t.join();
  CHECK(torn == 0);
  CHECK(reads > 0);
  CHECK(s.read()->a == 20'000);
}

TEST_CASE("the policy directory as a reload source publishes a valid set and refuses a bad one",
          "[reload][policies]") {
  const trainenv::test::temp_dir scratch("policy-source");
  const auto& dir = scratch.path;
  fs::copy_file(fs::path(TRAINENV_POLICIES_DIR) / "torch.yaml", dir / "torch.yaml");
  trainenv::server::policy_snapshot policies;
  const auto source = trainenv::server::policy_source(dir.string(), policies);
  CHECK(source.dir == dir.string());
  CHECK(source.fingerprint() == trainenv::inputs::policy_dir_fingerprint(dir.string()));
  const auto loaded = source.load();
  REQUIRE(loaded.ok());
  CHECK_THAT(*loaded, Catch::Contains("[torch]"));
  REQUIRE(policies.read() != nullptr);
  const auto good = policies.read();
  CHECK(good->by_name("torch") != nullptr);

  write(dir / "torch.yaml", read(dir / "torch.yaml") + "  bogus: [\n");
  const auto refused = source.load();
  CHECK_FALSE(refused.ok());
  CHECK_THAT(refused.message(), Catch::Contains("torch.yaml"));
  CHECK(policies.read() == good);
}

TEST_CASE("a file reloader publishes a change and keeps the last good value on a refused one",
          "[reload]") {
  watched_value w(false);
  CHECK(w.current() == "one");
  write(w.dir / "value", "two");
  REQUIRE(eventually([&] { return w.current() == "two"; }));
  // The value is published inside load(), the count after it returns: wait for both.
  CHECK(eventually([&] { return w.loaded == 1; }));

  write(w.dir / "value", "bad");
  REQUIRE(eventually([&] { return w.refused >= 1; }));
  CHECK(w.current() == "two");
  // Refused once, not at every poll: the files have not changed since.
  std::this_thread::sleep_for(300ms);
  CHECK(w.refused == 1);

  write(w.dir / "value", "three");
  REQUIRE(eventually([&] { return w.current() == "three"; }));
  CHECK(eventually([&] { return w.loaded == 2; }));
  // Unchanged files are not loaded again.
  std::this_thread::sleep_for(200ms);
  CHECK(w.loaded == 2);
}

TEST_CASE("a file reloader told to retry tries a refused state again at each poll", "[reload]") {
  watched_value w(true);
  write(w.dir / "value", "bad");
  REQUIRE(eventually([&] { return w.refused >= 3; }));
  CHECK(w.current() == "one");
  CHECK(w.loaded == 0);
}
