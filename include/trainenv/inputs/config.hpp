// Command-line flags -> validated configuration for each subcommand.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "trainenv/core/decide/engine.hpp"
#include "trainenv/core/policy/owners.hpp"
#include "trainenv/core/text/names.hpp"
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
  // The previews' own listener (docs/security.md); no host: none.
  endpoint_spec preview_listen{};
  std::string tls_cert = "certs/tls.crt";
  std::string tls_key = "certs/tls.key";
  std::string client_ca;  // empty: no client certificates asked for
  // With client_ca: the names a client certificate must carry (a DNS SAN, else its CN); empty:
  // any certificate of that CA.
  std::vector<std::string> client_names;
  std::string policies = "policies/";
  std::string log_format = "text";  // text | json
  std::string log_level = "info";
  unsigned threads = 0;                                          // 0: one per core
  std::size_t max_body_bytes = std::size_t{7} * 1024 * 1024;     // /mutate
  std::size_t max_preview_body_bytes = std::size_t{512} * 1024;  // /preview, /preview/job
  std::size_t max_header_bytes = std::size_t{16} * 1024;
  // What the requests in flight may hold at once: bodies and what is parsed of them, and the API
  // server's answers (server::memory_budget; docs/security.md, "Budgets").
  std::size_t max_request_memory = std::size_t{160} * 1024 * 1024;
  // Open connections per listener: the admission port, the previews', the plain metrics port.
  std::size_t max_connections = 2048;
  std::size_t max_preview_connections = 256;
  std::size_t max_metrics_connections = 64;
  std::chrono::milliseconds drain_delay{5'000};
  std::chrono::milliseconds shutdown_deadline{25'000};
  std::chrono::milliseconds handshake_timeout{10'000};
  std::chrono::milliseconds read_timeout{10'000};
  std::chrono::milliseconds idle_timeout{120'000};
  // Owner lookups (docs/owner-lookup.md). kubeconfig empty: the service account when
  // KUBERNETES_SERVICE_HOST is set, else no API access.
  std::string kubeconfig;
  std::chrono::milliseconds lookup_timeout{
      core::default_lookup_budget};  // all the lookups of one pod
  std::chrono::milliseconds owner_cache_ttl{10'000};
  // server::owner_cache_options::max_bytes says why.
  std::size_t owner_cache_bytes = std::size_t{32} * 1024 * 1024;
  std::string owners;  // --owners FILE: owners from a file instead of the API (no cluster)
  std::string cluster_domain{core::default_cluster_domain};  // the pods' full DNS names end in it
  // The readiness wait (docs/contract.md §3.1): auto (each policy's) or off, and its image.
  std::string wait = "auto";
  std::string wait_image{core::default_wait_image};
  // serve --help states these defaults; the tests parse them back and compare.
  friend bool operator==(const serve_config&, const serve_config&) = default;
};

struct preview_config {
  std::string file = "-";  // "-" is standard input
  std::string policy;      // forced policy name
  std::string policies;    // empty: the policies built in (inputs/policy_dir.hpp)
  std::string owners;      // --owners FILE: owner objects, offline
  std::string kubeconfig;  // --kubeconfig FILE: read the owners from that cluster
  std::chrono::milliseconds lookup_timeout{core::default_lookup_budget};
  std::string cluster_domain{core::default_cluster_domain};
  bool job = false;  // --job: FILE is a whole job (TrainJob, JobSet, Job, Volcano Job)
  // -o json|table|yaml; empty: a pod's preview is JSON (the answer /preview gives), a job's a
  // table.
  std::string output;
};

// trainenv wait: what the readiness wait checks (docs/contract.md §3.1).
struct wait_config {
  std::int64_t timeout_seconds = 600;
  std::string job;                   // "jobset/bert": the job `trainenv doctor` explains
  std::string namespace_name;        // its namespace
  std::vector<std::string> resolve;  // names that must resolve
  std::vector<std::string> connect;  // HOST:PORT that must accept
  std::string hostfile;              // every host of this MPI hostfile ...
  std::uint16_t hostfile_port = 0;   // ... accepting on this port (0: resolving)
  std::vector<std::string> skip;     // ... but these (the pod itself)
  std::string termination_log = "/dev/termination-log";
  unsigned parallel = 32;  // checks in flight at most
  std::chrono::milliseconds progress_every{10'000};
  std::chrono::milliseconds connect_timeout{2'000};
};

struct check_config {
  std::string policies;  // empty: the policies built in (inputs/policy_dir.hpp)
};

// trainenv doctor: why a live job does not start (docs/contract.md §5).
struct doctor_config {
  std::string target;          // "jobset/bert": trainjob, jobset, job, vcjob or pod, then a name
  std::string namespace_name;  // -n; else the one the dump's objects share
  std::string from;            // --from FILE: a `kubectl get -o json` List of the job's objects
  // --kubeconfig FILE; neither this nor --from: $KUBECONFIG, ~/.kube/config, then in-cluster
  std::string kubeconfig;
  std::chrono::milliseconds lookup_timeout{std::chrono::seconds(10)};  // each read of the API
  bool logs = false;           // --logs: the pods' logs held against the known start-up failures
  bool until_healthy = false;  // --until-healthy: read and diagnose again until healthy
  std::chrono::seconds timeout{std::chrono::minutes(10)};  // --timeout: how long it tries
  std::string policies;  // empty: the policies built in (inputs/policy_dir.hpp)
  std::string cluster_domain{core::default_cluster_domain};
  std::string output = "table";  // -o table|json
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
[[nodiscard]] parsed<wait_config> parse_wait(const std::vector<std::string>& args);
[[nodiscard]] parsed<doctor_config> parse_doctor(const std::vector<std::string>& args);

[[nodiscard]] core::result<endpoint_spec> parse_endpoint(const std::string& text);

// Every serve flag's value as `name=value` (listen=0.0.0.0:8443 tls_cert=... ), "-" where
// none is set: the start-up log's one line of effective configuration.
[[nodiscard]] std::string describe(const serve_config& config);

[[nodiscard]] std::string main_help();
[[nodiscard]] std::string serve_help();
[[nodiscard]] std::string preview_help();
[[nodiscard]] std::string check_help();
[[nodiscard]] std::string wait_help();
[[nodiscard]] std::string doctor_help();

}  // namespace trainenv::inputs
