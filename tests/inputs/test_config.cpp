// app/config.hpp: command-line flags of serve, preview and check-policies (docs/contract.md §5,
// §6).
#include <catch2/catch.hpp>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "trainenv/inputs/config.hpp"

using Catch::Matchers::Contains;
using namespace trainenv::inputs;
using args = std::vector<std::string>;

namespace {

serve_config serve_ok(const args& a) {
  auto p = parse_serve(a);
  INFO("failure: " << p.failure.message);
  REQUIRE(p.ok);
  return p.config;
}

parse_failure serve_fails(const args& a) {
  auto p = parse_serve(a);
  REQUIRE_FALSE(p.ok);
  CHECK_FALSE(p.failure.help);
  return p.failure;
}

// Both spellings of a flag with a value: "--flag value" and "--flag=value".
std::vector<args> spellings(const std::string& flag, const std::string& value) {
  return {{flag, value}, {flag + "=" + value}};
}

}  // namespace

// --- serve defaults (docs/contract.md §5, §6) ---

TEST_CASE("serve listens on 0.0.0.0:8443 by default", "[config]") {
  const auto c = serve_ok({});
  CHECK(c.listen.host == "0.0.0.0");
  CHECK(c.listen.port == 8443);
}

TEST_CASE("serve serves metrics on 0.0.0.0:9090 by default", "[config]") {
  const auto c = serve_ok({});
  CHECK(c.metrics_listen.host == "0.0.0.0");
  CHECK(c.metrics_listen.port == 9090);
}

TEST_CASE("serve reads certs/tls.crt and certs/tls.key by default", "[config]") {
  const auto c = serve_ok({});
  CHECK(c.tls_cert == "certs/tls.crt");
  CHECK(c.tls_key == "certs/tls.key");
  CHECK(c.client_ca.empty());
}

TEST_CASE("serve reads policies/ by default", "[config]") {
  CHECK(serve_ok({}).policies == "policies/");
}

TEST_CASE("serve limits and timeouts default to the documented values", "[config]") {
  const auto c = serve_ok({});
  CHECK(c.max_body_bytes == 7U * 1024 * 1024);
  CHECK(c.read_timeout == std::chrono::seconds(10));
  CHECK(c.idle_timeout >= std::chrono::seconds(90));
  CHECK(c.log_format == "text");
  CHECK(c.log_level == "info");
  CHECK(c.threads == 0);
}

TEST_CASE("serve reads owners with a 2 s budget and a 10 s cache, API access found", "[config]") {
  const auto c = serve_ok({});
  CHECK(c.kubeconfig.empty());
  CHECK(c.lookup_timeout == std::chrono::seconds(2));
  CHECK(c.owner_cache_ttl == std::chrono::seconds(10));
  const auto set =
      serve_ok({"--kubeconfig", "/k", "--lookup-timeout", "0.5", "--owner-cache-ttl=30"});
  CHECK(set.kubeconfig == "/k");
  CHECK(set.lookup_timeout == std::chrono::milliseconds(500));
  CHECK(set.owner_cache_ttl == std::chrono::seconds(30));
  CHECK_FALSE(parse_serve({"--lookup-timeout", "0"}).ok);
  CHECK(c.owner_cache_bytes == 32U * 1024 * 1024);
  CHECK(serve_ok({"--owner-cache-bytes", "100000000"}).owner_cache_bytes == 100'000'000);
  CHECK_FALSE(parse_serve({"--owner-cache-bytes", "1000"}).ok);
}

// The start-up log's configuration line is written from the flags, every one of them.
TEST_CASE("describe names every serve flag with its value", "[config]") {
  const auto d =
      describe(serve_ok({"--listen", "127.0.0.1:8443", "--owner-cache-bytes", "7000000"}));
  CHECK_THAT(d, Contains("listen=127.0.0.1:8443 tls_cert=certs/tls.crt tls_key=certs/tls.key "
                         "client_ca=- client_names=- preview_listen=- policies=policies/ "
                         "metrics_listen=0.0.0.0:9090"));
  CHECK_THAT(d, Contains(" threads=- "));
  CHECK_THAT(d, Contains(" owner_cache_bytes=7000000 "));
  CHECK_THAT(d, Contains(" cluster_domain=cluster.local"));
  std::size_t listed = 0;
  for (std::size_t at = d.find('='); at != std::string::npos; at = d.find('=', at + 1)) ++listed;
  std::size_t flags = 0;
  std::istringstream help(serve_help());
  for (std::string line; std::getline(help, line);) flags += line.rfind("  --", 0) == 0 ? 1 : 0;
  CHECK(listed == flags);
}

TEST_CASE("preview takes --owners or --kubeconfig, not both", "[config]") {
  auto owners = parse_preview({"--owners", "o.yaml"});
  REQUIRE(owners.ok);
  CHECK(owners.config.owners == "o.yaml");
  auto kube = parse_preview({"--kubeconfig", "k"});
  REQUIRE(kube.ok);
  CHECK(kube.config.kubeconfig == "k");
  auto both = parse_preview({"--owners", "o.yaml", "--kubeconfig", "k"});
  CHECK_FALSE(both.ok);
  CHECK_THAT(both.failure.message, Contains("not both"));
}

// --- serve flags, both spellings ---

TEST_CASE("serve --listen takes HOST:PORT", "[config]") {
  for (const auto& a : spellings("--listen", "127.0.0.1:9443")) {
    const auto c = serve_ok(a);
    CHECK(c.listen.host == "127.0.0.1");
    CHECK(c.listen.port == 9443);
  }
}

TEST_CASE("serve --metrics-listen takes HOST:PORT", "[config]") {
  for (const auto& a : spellings("--metrics-listen", "[::]:0")) {
    const auto c = serve_ok(a);
    CHECK(c.metrics_listen.host == "::");
    CHECK(c.metrics_listen.port == 0);
  }
}

TEST_CASE("serve --tls-cert, --tls-key and --client-ca take files", "[config]") {
  for (const auto& a : spellings("--tls-cert", "/etc/tls/tls.crt")) {
    CHECK(serve_ok(a).tls_cert == "/etc/tls/tls.crt");
  }
  for (const auto& a : spellings("--tls-key", "/etc/tls/tls.key")) {
    CHECK(serve_ok(a).tls_key == "/etc/tls/tls.key");
  }
  for (const auto& a : spellings("--client-ca", "/etc/tls/ca.crt")) {
    CHECK(serve_ok(a).client_ca == "/etc/tls/ca.crt");
  }
}

TEST_CASE("serve --policies takes a directory", "[config]") {
  for (const auto& a : spellings("--policies", "/etc/trainenv/policies")) {
    CHECK(serve_ok(a).policies == "/etc/trainenv/policies");
  }
}

TEST_CASE("serve --log-format takes json or text", "[config]") {
  for (const auto& a : spellings("--log-format", "json")) CHECK(serve_ok(a).log_format == "json");
  CHECK(serve_ok({"--log-format", "text"}).log_format == "text");
}

TEST_CASE("serve --log-level takes a level name", "[config]") {
  for (const char* level : {"trace", "debug", "info", "warn", "error", "off"}) {
    for (const auto& a : spellings("--log-level", level)) CHECK(serve_ok(a).log_level == level);
  }
}

TEST_CASE("serve --threads takes a count from 1 to 256", "[config]") {
  for (const auto& a : spellings("--threads", "4")) CHECK(serve_ok(a).threads == 4);
  CHECK(serve_ok({"--threads", "1"}).threads == 1);
  CHECK(serve_ok({"--threads", "256"}).threads == 256);
}

TEST_CASE("serve --max-body-bytes and --max-header-bytes take sizes", "[config]") {
  for (const auto& a : spellings("--max-body-bytes", "1048576")) {
    CHECK(serve_ok(a).max_body_bytes == 1048576);
  }
  for (const auto& a : spellings("--max-header-bytes", "8192")) {
    CHECK(serve_ok(a).max_header_bytes == 8192);
  }
}

TEST_CASE("serve timeouts take seconds, fractions included", "[config]") {
  for (const auto& a : spellings("--read-timeout", "2.5")) {
    CHECK(serve_ok(a).read_timeout == std::chrono::milliseconds(2500));
  }
  for (const auto& a : spellings("--idle-timeout", "90")) {
    CHECK(serve_ok(a).idle_timeout == std::chrono::seconds(90));
  }
  for (const auto& a : spellings("--handshake-timeout", "0.5")) {
    CHECK(serve_ok(a).handshake_timeout == std::chrono::milliseconds(500));
  }
}

TEST_CASE("serve accepts several flags together", "[config]") {
  const auto c = serve_ok({"--listen", ":8443", "--policies=/p", "--log-format", "json",
                           "--threads=2", "--tls-cert", "a.crt", "--tls-key=a.key"});
  CHECK(c.listen.host == "0.0.0.0");
  CHECK(c.policies == "/p");
  CHECK(c.log_format == "json");
  CHECK(c.threads == 2);
  CHECK(c.tls_cert == "a.crt");
  CHECK(c.tls_key == "a.key");
}

TEST_CASE("a later flag overrides an earlier one", "[config]") {
  CHECK(serve_ok({"--policies", "/a", "--policies", "/b"}).policies == "/b");
}

// --- help and failures ---

TEST_CASE("serve --help sets failure.help and lists every flag", "[config]") {
  for (const char* flag : {"--help", "-h"}) {
    auto p = parse_serve({"--listen", ":1", flag});
    CHECK_FALSE(p.ok);
    CHECK(p.failure.help);
    CHECK(p.failure.message == serve_help());
  }
  for (const char* flag : {"--listen",
                           "--tls-cert",
                           "--tls-key",
                           "--client-ca",
                           "--client-names",
                           "--preview-listen",
                           "--policies",
                           "--metrics-listen",
                           "--log-format",
                           "--log-level",
                           "--threads",
                           "--max-body-bytes",
                           "--max-preview-body-bytes",
                           "--max-request-memory",
                           "--max-header-bytes",
                           "--read-timeout",
                           "--idle-timeout",
                           "--handshake-timeout",
                           "--kubeconfig",
                           "--lookup-timeout",
                           "--owner-cache-ttl",
                           "--owner-cache-bytes",
                           "--max-connections",
                           "--max-preview-connections",
                           "--max-metrics-connections",
                           "--drain-delay",
                           "--shutdown-deadline",
                           "--owners",
                           "--cluster-domain"}) {
    CHECK_THAT(serve_help(), Contains(flag));
  }
}

// The help is written from serve_config's defaults; read each "(default X)" back through the
// flag and the result must be the default configuration, so help and struct cannot drift.
TEST_CASE("serve --help states serve_config's defaults", "[config]") {
  const serve_config defaults;
  const std::regex line(R"(^  (--[a-z-]+) .*\(default ([^;)]+)[;)])");
  // A flag's text wraps onto lines indented under it: each flag on one line again.
  std::vector<std::string> lines;
  std::istringstream help(serve_help());
  for (std::string text; std::getline(help, text);) {
    if (text.rfind(std::string(29, ' '), 0) == 0 && !lines.empty()) {
      lines.back() += text.substr(28);
    } else {
      lines.push_back(text);
    }
  }
  std::vector<std::string> stated;
  for (const auto& text : lines) {
    std::smatch m;
    if (!std::regex_search(text, m, line)) continue;
    INFO(text);
    stated.push_back(m[1]);
    const auto p = parse_serve({m[1], m[2]});
    REQUIRE(p.ok);
    CHECK(p.config == defaults);
  }
  // Every flag but --client-ca, --client-names, --preview-listen, --threads and --kubeconfig,
  // whose defaults are words, and --owners, which has none.
  CHECK(stated.size() == 25);
  CHECK_THAT(serve_help(), Contains("says which) (default: none)"));
  CHECK_THAT(serve_help(), Contains("I/O threads (default: one per core)"));
  // And the check can fail: a different value is a different configuration.
  CHECK_FALSE(serve_ok({"--read-timeout", "11"}) == defaults);
}

TEST_CASE("serve rejects an unknown flag naming it", "[config]") {
  CHECK_THAT(serve_fails({"--bogus"}).message, Contains("--bogus"));
  CHECK_THAT(serve_fails({"--listen-address=:1"}).message, Contains("--listen-address"));
}

TEST_CASE("serve rejects a positional argument", "[config]") {
  CHECK_THAT(serve_fails({"extra"}).message, Contains("\"extra\""));
}

TEST_CASE("serve rejects a flag missing its value naming the flag", "[config]") {
  for (const char* flag : {"--listen", "--tls-cert", "--threads", "--read-timeout"}) {
    const auto failure = serve_fails({flag});
    CHECK_THAT(failure.message, Contains(flag) && Contains("needs a value"));
  }
}

TEST_CASE("serve rejects an empty file value naming the flag", "[config]") {
  CHECK_THAT(serve_fails({"--tls-cert="}).message, Contains("--tls-cert"));
  CHECK_THAT(serve_fails({"--policies", ""}).message, Contains("--policies"));
}

TEST_CASE("serve rejects a bad endpoint naming the flag", "[config]") {
  CHECK_THAT(serve_fails({"--listen", "8443"}).message, Contains("--listen"));
  CHECK_THAT(serve_fails({"--metrics-listen=example.com:9090"}).message,
             Contains("--metrics-listen"));
}

TEST_CASE("serve rejects a log format or level outside the choices", "[config]") {
  CHECK_THAT(serve_fails({"--log-format", "xml"}).message,
             Contains("--log-format") && Contains("text, json"));
  CHECK_THAT(serve_fails({"--log-level=verbose"}).message, Contains("--log-level"));
}

TEST_CASE("serve rejects a thread count outside 1 to 256", "[config]") {
  for (const char* bad : {"0", "257", "-1", "two", ""}) {
    INFO("threads \"" << bad << "\"");
    CHECK_THAT(serve_fails({"--threads", bad}).message, Contains("--threads"));
  }
}

TEST_CASE("serve rejects sizes outside their range", "[config]") {
  CHECK_THAT(serve_fails({"--max-body-bytes", "10"}).message, Contains("--max-body-bytes"));
  CHECK_THAT(serve_fails({"--max-body-bytes", "2000000000"}).message, Contains("--max-body-bytes"));
  CHECK_THAT(serve_fails({"--max-header-bytes=1k"}).message, Contains("--max-header-bytes"));
}

TEST_CASE("serve rejects timeouts that are not positive seconds", "[config]") {
  for (const char* bad : {"0", "-1", "abc", "10s", "", "100000", "inf"}) {
    INFO("read-timeout \"" << bad << "\"");
    CHECK_THAT(serve_fails({"--read-timeout", bad}).message, Contains("--read-timeout"));
  }
}

// Regression (fixed): the seconds parser uses std::from_chars, which accepts "nan"; NaN passes both
// range checks (NaN <= 0 and NaN > 86400 are false) and is then cast to an integer (undefined
// behaviour). Input: --read-timeout nan (also --idle-timeout, --handshake-timeout).
TEST_CASE("serve rejects a NaN timeout", "[config]") {
  for (const char* flag : {"--read-timeout", "--idle-timeout", "--handshake-timeout"}) {
    INFO("flag " << flag);
    auto p = parse_serve({flag, "nan"});
    CHECK_FALSE(p.ok);
  }
}

// --- parse_endpoint ---

TEST_CASE("parse_endpoint reads an IPv4 address and port", "[config]") {
  auto e = parse_endpoint("0.0.0.0:8443");
  REQUIRE(e.ok());
  CHECK(e->host == "0.0.0.0");
  CHECK(e->port == 8443);
}

TEST_CASE("parse_endpoint reads a bracketed IPv6 address and port zero", "[config]") {
  auto e = parse_endpoint("[::1]:0");
  REQUIRE(e.ok());
  CHECK(e->host == "::1");
  CHECK(e->port == 0);
}

TEST_CASE("parse_endpoint with an empty host listens on every IPv4 address", "[config]") {
  auto e = parse_endpoint(":8443");
  REQUIRE(e.ok());
  CHECK(e->host == "0.0.0.0");
  CHECK(e->port == 8443);
}

TEST_CASE("parse_endpoint maps localhost to 127.0.0.1", "[config]") {
  auto e = parse_endpoint("localhost:1");
  REQUIRE(e.ok());
  CHECK(e->host == "127.0.0.1");
  CHECK(e->port == 1);
}

TEST_CASE("parse_endpoint accepts the highest port", "[config]") {
  auto e = parse_endpoint("127.0.0.1:65535");
  REQUIRE(e.ok());
  CHECK(e->port == 65535);
}

TEST_CASE("parse_endpoint rejects text without a port", "[config]") {
  auto e = parse_endpoint("host");
  REQUIRE_FALSE(e.ok());
  CHECK_THAT(e.message(), Contains("HOST:PORT"));
}

TEST_CASE("parse_endpoint rejects a host name that is not an address", "[config]") {
  auto e = parse_endpoint("a.b.c:1");
  REQUIRE_FALSE(e.ok());
  CHECK_THAT(e.message(), Contains("\"a.b.c\""));
}

TEST_CASE("parse_endpoint rejects a port above 65535", "[config]") {
  auto e = parse_endpoint("1.2.3.4:70000");
  REQUIRE_FALSE(e.ok());
  CHECK_THAT(e.message(), Contains("port"));
}

TEST_CASE("parse_endpoint rejects an empty, signed or non-numeric port", "[config]") {
  for (const char* bad : {"1.2.3.4:", "1.2.3.4:+1", "1.2.3.4:-1", "1.2.3.4:http", "1.2.3.4:8 "}) {
    INFO("endpoint " << bad);
    CHECK_FALSE(parse_endpoint(bad).ok());
  }
}

TEST_CASE("parse_endpoint rejects an unbracketed IPv6 address without port", "[config]") {
  CHECK_FALSE(parse_endpoint("[::1]").ok());
  CHECK_FALSE(parse_endpoint("").ok());
}

// --- preview and check-policies ---

TEST_CASE("preview reads standard input with the built-in policies by default", "[config]") {
  auto p = parse_preview({});
  REQUIRE(p.ok);
  CHECK(p.config.file == "-");
  CHECK(p.config.policy.empty());
  CHECK(p.config.policies.empty());  // built in (inputs::load_policies)
}

TEST_CASE("preview -f and --file take the input file", "[config]") {
  for (const auto& a : {args{"-f", "pod.yaml"}, args{"-f=pod.yaml"}, args{"--file", "pod.yaml"},
                        args{"--file=pod.yaml"}}) {
    auto p = parse_preview(a);
    REQUIRE(p.ok);
    CHECK(p.config.file == "pod.yaml");
  }
  auto dash = parse_preview({"-f", "-"});
  REQUIRE(dash.ok);
  CHECK(dash.config.file == "-");
}

TEST_CASE("preview --policy and --policies are read", "[config]") {
  auto p = parse_preview({"--policy", "mpi", "--policies=/etc/p"});
  REQUIRE(p.ok);
  CHECK(p.config.policy == "mpi");
  CHECK(p.config.policies == "/etc/p");
}

TEST_CASE("preview --help sets failure.help", "[config]") {
  auto p = parse_preview({"--help"});
  CHECK_FALSE(p.ok);
  CHECK(p.failure.help);
  CHECK(p.failure.message == preview_help());
}

TEST_CASE("preview rejects unknown flags, positionals and missing values", "[config]") {
  auto unknown = parse_preview({"--listen", ":1"});
  CHECK_FALSE(unknown.ok);
  CHECK_THAT(unknown.failure.message, Contains("--listen"));
  auto positional = parse_preview({"pod.yaml"});
  CHECK_FALSE(positional.ok);
  CHECK_THAT(positional.failure.message, Contains("pod.yaml"));
  auto missing = parse_preview({"--policy"});
  CHECK_FALSE(missing.ok);
  CHECK_THAT(missing.failure.message, Contains("--policy"));
}

TEST_CASE("check-policies reads the built-in policies by default", "[config]") {
  auto p = parse_check({});
  REQUIRE(p.ok);
  CHECK(p.config.policies.empty());
}

TEST_CASE("check-policies takes the directory as its argument", "[config]") {
  auto p = parse_check({"/etc/trainenv/policies"});
  REQUIRE(p.ok);
  CHECK(p.config.policies == "/etc/trainenv/policies");
}

TEST_CASE("check-policies rejects a second directory", "[config]") {
  auto p = parse_check({"a", "b"});
  CHECK_FALSE(p.ok);
  CHECK_FALSE(p.failure.help);
  CHECK_THAT(p.failure.message, Contains("one directory"));
}

TEST_CASE("check-policies takes --policies DIR as the other commands do, not beside DIR",
          "[config]") {
  // The loader's errors say "set --policies": the command they come from must take it.
  auto p = parse_check({"--policies", "x"});
  REQUIRE(p.ok);
  CHECK(p.config.policies == "x");
  auto both = parse_check({"--policies", "x", "y"});
  CHECK_FALSE(both.ok);
  CHECK_THAT(both.failure.message, Contains("not both"));
  auto unknown = parse_check({"--policy", "x"});
  CHECK_FALSE(unknown.ok);
  CHECK_THAT(unknown.failure.message, Contains("--policy"));
}

TEST_CASE("check-policies --help sets failure.help", "[config]") {
  auto p = parse_check({"--help"});
  CHECK_FALSE(p.ok);
  CHECK(p.failure.help);
  CHECK(p.failure.message == check_help());
}

TEST_CASE("the main help names every command", "[config]") {
  CHECK_THAT(main_help(), Contains("serve") && Contains("preview") && Contains("check-policies"));
}

TEST_CASE("serve takes --owners (a local server with no cluster) or --kubeconfig, not both",
          "[config]") {
  auto owners = parse_serve({"--owners", "o.yaml"});
  REQUIRE(owners.ok);
  CHECK(owners.config.owners == "o.yaml");
  auto both = parse_serve({"--owners", "o.yaml", "--kubeconfig", "k"});
  CHECK_FALSE(both.ok);
  CHECK_THAT(both.failure.message, Contains("not both"));
}

TEST_CASE("doctor takes KIND/NAME, -n, --from or --kubeconfig, and says what is wrong",
          "[config][doctor]") {
  const auto ok = parse_doctor({"jobset/gpt", "-n", "team-a", "--from", "gpt.json", "-o", "json"});
  REQUIRE(ok.ok);
  CHECK(ok.config.target == "jobset/gpt");
  CHECK(ok.config.namespace_name == "team-a");
  CHECK(ok.config.from == "gpt.json");
  CHECK(ok.config.output == "json");
  CHECK(ok.config.policies.empty());
  const auto no_job = parse_doctor({"--from", "gpt.json"});
  REQUIRE_FALSE(no_job.ok);
  CHECK_THAT(no_job.failure.message, Catch::Contains("which job?"));
  // Neither: the cluster of $KUBECONFIG, ~/.kube/config or the service account.
  const auto cluster = parse_doctor({"jobset/gpt"});
  REQUIRE(cluster.ok);
  CHECK(cluster.config.from.empty());
  CHECK_FALSE(cluster.config.until_healthy);
  const auto both = parse_doctor({"jobset/gpt", "--from", "x", "--kubeconfig", "k"});
  REQUIRE_FALSE(both.ok);
  CHECK_THAT(both.failure.message, Catch::Contains("not both"));
  const auto polled =
      parse_doctor({"jobset/gpt", "--kubeconfig", "k", "--until-healthy", "--timeout", "1h30m"});
  REQUIRE(polled.ok);
  CHECK(polled.config.until_healthy);
  CHECK(polled.config.timeout == std::chrono::seconds(5400));
  CHECK(parse_doctor({"jobset/gpt", "--until-healthy", "--timeout", "90"}).config.timeout ==
        std::chrono::seconds(90));
  CHECK_FALSE(parse_doctor({"jobset/gpt", "--until-healthy", "--timeout", "0"}).ok);
  CHECK_FALSE(parse_doctor({"jobset/gpt", "--until-healthy", "--timeout", "2d"}).ok);
  CHECK(parse_doctor({"jobset/gpt", "--logs"}).config.logs);
  CHECK_FALSE(parse_doctor({"jobset/gpt", "--from", "x", "--logs"}).ok);  // a dump holds no logs
  // A dump does not change: polling it could only wait out the time-out.
  CHECK_FALSE(parse_doctor({"jobset/gpt", "--from", "x", "--until-healthy"}).ok);
  CHECK_FALSE(parse_doctor({"jobset/a", "jobset/b", "--from", "x"}).ok);
  CHECK_FALSE(parse_doctor({"jobset/a", "--from", "x", "-o", "yaml"}).ok);
  const auto help = parse_doctor({"--help"});
  CHECK(help.failure.help);
  CHECK_THAT(help.failure.message, Catch::Contains("kubectl get -n NS -o json"));
  CHECK_THAT(main_help(), Catch::Contains("doctor"));
}
