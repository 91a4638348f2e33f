// Command-line flags -> validated configuration for each subcommand.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "trainenv/core/text/result.hpp"

namespace trainenv::inputs {

struct endpoint_spec {
  std::string host;  // numeric address; "0.0.0.0" or "::" for all
  std::uint16_t port = 0;
  friend bool operator==(const endpoint_spec&, const endpoint_spec&) = default;
};

struct serve_config {
  endpoint_spec listen{"0.0.0.0", 8443};
  endpoint_spec metrics_listen{"0.0.0.0", 9090};
  std::string tls_cert = "certs/tls.crt";
  std::string tls_key = "certs/tls.key";
  std::string client_ca;  // empty: no client certificates asked for
  std::string policies = "policies/";
  std::string log_format = "text";  // text | json
  std::string log_level = "info";
  unsigned threads = 0;  // 0: one per core
  std::size_t max_body_bytes = std::size_t{7} * 1024 * 1024;
  std::size_t max_header_bytes = std::size_t{16} * 1024;
  std::size_t max_connections = 10'000;
  std::chrono::milliseconds drain_delay{5'000};
  std::chrono::milliseconds shutdown_deadline{25'000};
  std::chrono::milliseconds handshake_timeout{10'000};
  std::chrono::milliseconds read_timeout{10'000};
  std::chrono::milliseconds idle_timeout{120'000};
  // Owner lookups (docs/owner-lookup.md). kubeconfig empty: the service account when
  // KUBERNETES_SERVICE_HOST is set, else no API access.
  std::string kubeconfig;
  std::chrono::milliseconds lookup_timeout{2'000};  // all the lookups of one pod
  std::chrono::milliseconds owner_cache_ttl{10'000};
  std::size_t owner_cache_entries = 4096;  // server::owner_cache_options::max_entries says why
  std::string owners;  // --owners FILE: owners from a file instead of the API (no cluster)
  std::string cluster_domain = "cluster.local";  // the pods' full DNS names end in it
  // serve --help states these defaults; the tests parse them back and compare.
  friend bool operator==(const serve_config&, const serve_config&) = default;
};

struct preview_config {
  std::string file = "-";  // "-" is standard input
  std::string policy;      // forced policy name
  std::string policies = "policies/";
  std::string owners;      // --owners FILE: owner objects, offline
  std::string kubeconfig;  // --kubeconfig FILE: read the owners from that cluster
  std::chrono::milliseconds lookup_timeout{2'000};
  std::string cluster_domain = "cluster.local";
  bool job = false;              // --job: FILE is a whole job (TrainJob, JobSet, Job, Volcano Job)
  std::string output = "table";  // -o table|json, for --job (a pod's preview is always JSON)
};

struct check_config {
  std::string policies = "policies/";
};

// `--help` comes back as an error whose message is the help text and `help` set.
struct parse_failure {
  bool help = false;
  std::string message;
};

template <class T>
struct parsed {
  T config;
  bool ok = true;
  parse_failure failure;
};

[[nodiscard]] parsed<serve_config> parse_serve(const std::vector<std::string>& args);
[[nodiscard]] parsed<preview_config> parse_preview(const std::vector<std::string>& args);
[[nodiscard]] parsed<check_config> parse_check(const std::vector<std::string>& args);

[[nodiscard]] core::result<endpoint_spec> parse_endpoint(const std::string& text);

// Every serve flag's value as `name=value` (listen=0.0.0.0:8443 tls_cert=... ), "-" where
// none is set: the start-up log's one line of effective configuration.
[[nodiscard]] std::string describe(const serve_config& config);

[[nodiscard]] std::string main_help();
[[nodiscard]] std::string serve_help();
[[nodiscard]] std::string preview_help();
[[nodiscard]] std::string check_help();

}  // namespace trainenv::inputs
