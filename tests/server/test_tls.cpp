// Certificate rotation and client authentication over real TLS (docs/contract.md §5, §7): files
// swapped the way a Secret volume swaps them, while requests flow.
#include <catch2/catch.hpp>

#include <linux/capability.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <array>
#include <atomic>
#include <filesystem>
#include <functional>
#include <set>

#include "server_harness.hpp"
#include "test_certs.hpp"

using namespace trainenv;
using namespace trainenv::test;
namespace fs = std::filesystem;

namespace {

// A certificate directory laid out as the kubelet mounts a Secret: tls.crt and tls.key link
// through ..data to a timestamped directory, swapped by one rename.
class secret_dir {
 public:
  secret_dir() : root_(fs::temp_directory_path() / ("trainenv-tls-" + std::to_string(::getpid()))) {
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~secret_dir() { fs::remove_all(root_); }

  void publish(const pem_pair& pair) {
    const auto version = "..v" + std::to_string(++versions_);
    fs::create_directory(root_ / version);
    write_file((root_ / version / "tls.crt").string(), pair.cert);
    write_file((root_ / version / "tls.key").string(), pair.key);
    fs::create_symlink(version, root_ / "..data_tmp");
    fs::rename(root_ / "..data_tmp", root_ / "..data");
    for (const char* name : {"tls.crt", "tls.key"}) {
      if (!fs::is_symlink(root_ / name))
        fs::create_symlink(std::string("..data/") + name, root_ / name);
    }
  }
  [[nodiscard]] std::string file(const char* name) const { return (root_ / name).string(); }

 private:
  fs::path root_;
  int versions_ = 0;
};

// The test's own CA, trusted by the clients through extra_ca_file.
struct test_ca {
  test_ca()
      : pair(make_cert({"trainenv test CA", true})),
        file(fs::temp_directory_path() / ("trainenv-ca-" + std::to_string(::getpid()) + "-" +
                                          std::to_string(++instances) + ".crt")) {
    write_file(file.string(), pair.cert);
  }
  ~test_ca() { fs::remove(file); }
  [[nodiscard]] pem_pair issue(cert_options o = {}) const { return make_cert(o, &pair); }
  pem_pair pair;
  fs::path file;
  static inline int instances = 0;
};

std::string serial_of(const pem_pair& pair) {
  BIO* bio = BIO_new_mem_buf(pair.cert.data(), static_cast<int>(pair.cert.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  std::string out = serial_hex(cert);
  X509_free(cert);
  return out;
}

}  // namespace

TEST_CASE("load_server_tls refuses a mismatched key, an expired and a not-yet-valid certificate",
          "[tls]") {
  const test_ca ca;
  secret_dir dir;
  const auto good = ca.issue();
  const auto other = ca.issue();
  const auto expired = ca.issue({"expired", false, false, -7200, -3600});
  const auto future = ca.issue({"future", false, false, 3600, 7200});
  const auto try_pair = [&](const std::string& cert, const std::string& key) {
    write_file(dir.file("a.crt"), cert);
    write_file(dir.file("a.key"), key);
    return server::load_server_tls({dir.file("a.crt"), dir.file("a.key"), ""});
  };
  CHECK(try_pair(good.cert, good.key).ok());
  CHECK(try_pair(good.cert, good.key)->serial == serial_of(good));
  CHECK_THAT(try_pair(good.cert, other.key).message(), Catch::Contains("does not match"));
  CHECK_THAT(try_pair(expired.cert, expired.key).message(), Catch::Contains("expired"));
  CHECK_THAT(try_pair(future.cert, future.key).message(), Catch::Contains("not valid yet"));
  CHECK_THAT(try_pair("not a certificate", good.key).message(), Catch::Contains("--tls-cert"));
}

namespace {

// Runs `load` in a child process that file modes bind: root reads any file whatever its mode,
// so the child gives up the capabilities that let it (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH) and
// stays root otherwise, so the test's directories stay its own. Returns what `load` says.
std::string as_unprivileged(const std::function<std::string()>& load) {
  int out[2];
  REQUIRE(::pipe(out) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(out[0]);
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    std::array<__user_cap_data_struct, 2> caps{};
    if (::syscall(SYS_capget, &header, caps.data()) != 0) ::_exit(2);
    for (const int cap : {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH})
      caps[0].effective &= ~(1U << static_cast<unsigned>(cap));
    if (::syscall(SYS_capset, &header, caps.data()) != 0) ::_exit(2);
    const auto said = load();
    const bool written =
        ::write(out[1], said.data(), said.size()) == static_cast<ssize_t>(said.size());
    ::_exit(written ? 0 : 3);
  }
  ::close(out[1]);
  std::string said;
  char buffer[4096];
  for (ssize_t n = 0; (n = ::read(out[0], buffer, sizeof buffer)) > 0;) said.append(buffer, n);
  ::close(out[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return said;
}

}  // namespace

TEST_CASE("a certificate or key that cannot be read is refused with the system's reason", "[tls]") {
  const test_ca ca;
  secret_dir dir;
  const auto good = ca.issue();
  write_file(dir.file("a.crt"), good.cert);
  write_file(dir.file("a.key"), good.key);
  fs::permissions(dir.file("a.key"), fs::perms::none);
  const server::tls_files files{dir.file("a.crt"), dir.file("a.key"), ""};
  CHECK(as_unprivileged([&] { return server::load_server_tls(files).message(); }) ==
        "--tls-key " + dir.file("a.key") + ": cannot read: Permission denied");
  CHECK(server::load_server_tls({dir.file("none.crt"), dir.file("a.key"), ""}).message() ==
        "--tls-cert " + dir.file("none.crt") + ": cannot read: No such file or directory");
  CHECK(server::load_server_tls({dir.file("a.crt"), dir.file("a.key"), dir.file("none.pem")})
            .message() ==
        "--client-ca " + dir.file("none.pem") + ": cannot read: No such file or directory");
}

TEST_CASE(
    "a rotated certificate serves new handshakes while open connections and requests carry on",
    "[tls][rotation]") {
  const test_ca ca;
  secret_dir dir;
  const auto first = ca.issue();
  dir.publish(first);
  server_options options;
  options.tls = {dir.file("tls.crt"), dir.file("tls.key"), ""};
  options.rotate_certificates = true;
  running_server server(options);
  const client_options trust{0, ca.file.string()};

  // A long-lived keep-alive connection, opened on the first certificate.
  tls_client pooled(server.tls_port(), trust);
  REQUIRE_FALSE(pooled.handshake());
  CHECK(pooled.server_serial() == serial_of(first));

  // Meanwhile new connections, one request each, record the serial they were shown.
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0}, requests{0};
  std::mutex seen_mutex;
  std::set<std::string> seen;
  std::thread fresh([&] {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!stop && std::chrono::steady_clock::now() < deadline) {
      tls_client c(server.tls_port(), trust);
      if (c.handshake() ||
          c.send(make_request(http::verb::get, "/healthz", "", "")).result() != http::status::ok) {
        ++failures;
      }
      ++requests;
      std::lock_guard lock(seen_mutex);
      seen.insert(c.server_serial());
    }
  });
  const auto seen_contains = [&](const std::string& serial) {
    std::lock_guard lock(seen_mutex);
    return seen.count(serial) == 1;
  };

  std::this_thread::sleep_for(200ms);
  const auto second = ca.issue();
  dir.publish(second);
  const auto published = std::chrono::steady_clock::now();
  while (!seen_contains(serial_of(second)) && std::chrono::steady_clock::now() < published + 5s) {
    CHECK(pooled.send(make_request(http::verb::get, "/healthz", "", "")).result() ==
          http::status::ok);
    std::this_thread::sleep_for(20ms);
  }
  CHECK(seen_contains(serial_of(second)));
  CHECK(std::chrono::steady_clock::now() - published < 3s);
  CHECK(server.state.metrics.value(trainenv::server::counter::certificate_reloads) == 1);

  // An invalid pair (the key of another certificate) is refused; the second one stays.
  const auto third = ca.issue();
  dir.publish({third.cert, second.key});
  while (server.state.metrics.value(trainenv::server::counter::certificate_reload_errors) == 0 &&
         std::chrono::steady_clock::now() < published + 8s) {
    std::this_thread::sleep_for(20ms);
  }
  CHECK(server.state.metrics.value(trainenv::server::counter::certificate_reload_errors) >= 1);
  std::this_thread::sleep_for(200ms);
  {
    tls_client c(server.tls_port(), trust);
    REQUIRE_FALSE(c.handshake());
    CHECK(c.server_serial() == serial_of(second));
  }
  stop = true;
  fresh.join();

  // The pooled connection still speaks the first certificate's session.
  CHECK(pooled.server_serial() == serial_of(first));
  CHECK(pooled.send(make_request(http::verb::get, "/readyz", "", "")).result() == http::status::ok);
  CHECK(requests > 5);
  CHECK(failures == 0);
}

TEST_CASE("with --client-ca, only clients with a certificate from that CA are served",
          "[tls][client-auth]") {
  const test_ca server_ca;
  const test_ca client_ca;
  const test_ca stranger_ca;
  secret_dir dir;
  dir.publish(server_ca.issue());
  server_options options;
  options.tls = {dir.file("tls.crt"), dir.file("tls.key"), client_ca.file.string()};
  running_server server(options);

  // TLS 1.3 reports a refused client certificate after the handshake, on the first read, so
  // each attempt is a handshake plus one request.
  const auto served = [&](const client_options& o) {
    tls_client c(server.tls_port(), o);
    if (c.handshake()) return false;
    try {
      return c.send(make_request(http::verb::get, "/healthz", "", "")).result() == http::status::ok;
    } catch (const std::exception&) {
      return false;
    }
  };
  client_options anonymous{0, server_ca.file.string()};
  CHECK_FALSE(served(anonymous));

  const auto stranger = stranger_ca.issue({"apiserver", false, true});
  CHECK_FALSE(served({0, server_ca.file.string(), stranger.cert, stranger.key}));

  const auto apiserver = client_ca.issue({"apiserver", false, true});
  CHECK(served({0, server_ca.file.string(), apiserver.cert, apiserver.key}));
  CHECK(served({TLS1_2_VERSION, server_ca.file.string(), apiserver.cert, apiserver.key}));
  CHECK_FALSE(served({TLS1_2_VERSION, server_ca.file.string()}));
}

// A CA that signs more than the API server's certificate (a cluster CA signs kubelets' too) lets
// them all in, unless --client-names says whose (issue 37: a kubelet's certificate got through).
TEST_CASE("with --client-names, only the named certificates of the CA are served",
          "[tls][client-auth][adversarial]") {
  const test_ca server_ca;
  const test_ca client_ca;
  secret_dir dir;
  dir.publish(server_ca.issue());
  server_options options;
  options.tls = {dir.file("tls.crt"),
                 dir.file("tls.key"),
                 client_ca.file.string(),
                 {"kube-apiserver", "apiserver.cluster.internal", "system:kube-apiserver"}};
  running_server server(options);
  const auto served = [&](const pem_pair& cert) {
    tls_client c(server.tls_port(), {0, server_ca.file.string(), cert.cert, cert.key});
    if (c.handshake()) return false;
    try {
      return c.send(make_request(http::verb::get, "/healthz", "", "")).result() == http::status::ok;
    } catch (const std::exception&) {
      return false;
    }
  };
  // Named by its CN (no DNS name), or by a DNS name.
  CHECK(served(client_ca.issue({"kube-apiserver", false, true})));
  CHECK(served(client_ca.issue({"system:kube-apiserver", false, true})));
  CHECK(served(client_ca.issue(
      {"system:apiserver", false, true, -60, 3600, "DNS:apiserver.cluster.internal"})));
  // Leaves of the same CA that are not the API server.
  CHECK_FALSE(served(client_ca.issue({"system:node:worker-1", false, true})));
  CHECK_FALSE(served(client_ca.issue({"kubelet", false, true, -60, 3600, "DNS:worker-1"})));
  // A CN that names it, but DNS names that do not: the DNS names decide.
  CHECK_FALSE(
      served(client_ca.issue({"kube-apiserver", false, true, -60, 3600, "DNS:something-else"})));
  // A wildcard in the certificate matches nothing.
  CHECK_FALSE(served(client_ca.issue({"x", false, true, -60, 3600, "DNS:*.cluster.internal"})));
  // The server still serves the named one after all that.
  CHECK(served(client_ca.issue({"kube-apiserver", false, true})));
}
