// Composition root: parse the command line, wire the pieces, run, return the exit code.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "trainenv/core/text/hostfile.hpp"
#include "trainenv/inputs/config.hpp"
#include "trainenv/inputs/doctor.hpp"
#include "trainenv/inputs/exec_credential.hpp"
#include "trainenv/inputs/kube_credentials.hpp"
#include "trainenv/inputs/owner_file.hpp"
#include "trainenv/inputs/policy_dir.hpp"
#include "trainenv/inputs/preview.hpp"
#include "trainenv/inputs/yaml.hpp"
#include "trainenv/server/api_access.hpp"
#include "trainenv/server/kube_client.hpp"
#include "trainenv/server/live_job_reader.hpp"
#include "trainenv/server/logging.hpp"
#include "trainenv/server/owner_lookup.hpp"
#include "trainenv/server/readiness_wait.hpp"
#include "trainenv/server/server.hpp"
#include "trainenv/server/state.hpp"

// jemalloc's options (when it is the allocator; under a sanitizer nothing reads this): one arena
// for every thread, so that what one thread frees after a large request serves the next one on
// any thread, rather than each thread keeping its own peak. Four threads under
// tests/server/test_memory.cpp's flood: a peak of 413 MiB with an arena per thread, 248 MiB with
// one; no cost measurable in requests per second (docs/security.md, "Budgets").
extern "C" {
// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables): jemalloc's interface
const char* malloc_conf = "narenas:1";
}

namespace {

using namespace trainenv;

constexpr int exit_ok = 0;
constexpr int exit_violation = 1;
constexpr int exit_usage = 2;

template <class T>
bool usage_failed(const inputs::parsed<T>& p, int& code) {
  if (p.ok) return false;
  if (p.failure.help) {
    std::cout << p.failure.message;
    code = exit_ok;
  } else {
    std::cerr << "trainenv: " << p.failure.message << "\n";
    code = exit_usage;
  }
  return true;
}

// Who reads the API: the webhook (its service account, or --kubeconfig), or a command run by a
// person (--kubeconfig, its credential plugin run as that person).
enum class api_reader : std::uint8_t { webhook, command_line };

// Where owners are read from: --kubeconfig FILE, else, for the webhook, the service account when
// KUBERNETES_SERVICE_HOST is set (as client-go's InClusterConfig decides), else nowhere. A
// kubeconfig user's exec plugin runs for the command line only (docs/security.md).
core::result<std::optional<inputs::kube_credentials>> api_credentials(const std::string& kubeconfig,
                                                                      api_reader reader) {
  if (!kubeconfig.empty()) {
    auto c = inputs::load_kubeconfig(kubeconfig);
    if (!c) return std::move(c).take_error();
    if (c->exec && reader == api_reader::webhook) {
      return core::error{"kubeconfig " + kubeconfig +
                         ": its user's credentials come from an exec plugin, which the webhook "
                         "never runs (docs/security.md); give it a token, tokenFile or client "
                         "certificate"};
    }
    if (auto got = inputs::obtain_exec_credentials(*c); !got) return std::move(got).take_error();
    return std::optional(std::move(*c));
  }
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  if (reader != api_reader::webhook || host == nullptr || *host == '\0')
    return std::optional<inputs::kube_credentials>();
  auto c = inputs::load_in_cluster();
  if (!c) return std::move(c).take_error();
  return std::optional(std::move(*c));
}

// The --owners file, read and parsed; an error names the file.
core::result<inputs::owner_file> read_owners(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return core::error{"cannot read " + path};
  std::stringstream text;
  text << in.rdbuf();
  return inputs::owner_file::parse(text.str(), path);
}

// Owners are read from the API when there is access (or from --owners FILE); without, a pod
// whose counts only its owners give is denied (sizing fails closed), which the start-up line
// says once. An error: serve cannot start.
core::result<bool> wire_owner_lookups(const inputs::serve_config& config,
                                      boost::asio::io_context& ioc, server::server_state& state) {
  auto credentials = config.owners.empty()
                         ? api_credentials(config.kubeconfig, api_reader::webhook)
                         : core::result<std::optional<inputs::kube_credentials>>(std::nullopt);
  if (!credentials) return std::move(credentials).take_error();
  state.owners.budget = config.lookup_timeout;
  state.decide_options.cluster_domain = config.cluster_domain;
  state.decide_options.wait = config.wait != "off";
  state.decide_options.wait_image = config.wait_image;
  const bool previews_listener = !config.preview_listen.host.empty();
  if (previews_listener && !*credentials) {
    return core::error{
        "--preview-listen needs API access (in a cluster, or --kubeconfig): its previews read the "
        "cluster with their caller's token, checked by TokenReview"};
  }
  if (!config.owners.empty()) {
    auto owners = read_owners(config.owners);
    if (!owners) return core::error{"--owners " + owners.message()};
    spdlog::warn("owner lookups: from {} ({} objects), not from the API", config.owners,
                 owners->size());
    state.owners.file = std::make_shared<const inputs::owner_file>(std::move(*owners));
  } else if (*credentials) {
    const auto server_url = (*credentials)->server_url();
    const auto source = (*credentials)->source;
    const server::api_access_options options{.lookup_budget = config.lookup_timeout,
                                             .cache_ttl = config.owner_cache_ttl,
                                             .cache_bytes = config.owner_cache_bytes,
                                             .previews = previews_listener};
    if (auto connected = server::connect_api(ioc, state, **credentials, options); !connected)
      return connected;
    spdlog::info(
        "owner lookups: {} ({}), budget {} ms per pod, cached {} ms, {} bytes at most; previews "
        "{}",
        server_url, source, config.lookup_timeout.count(), config.owner_cache_ttl.count(),
        config.owner_cache_bytes,
        previews_listener ? "on --preview-listen, read with the caller's token"
                          : "off (no --preview-listen)");
  } else {
    spdlog::warn(
        "owner lookups: no API access (no --kubeconfig, KUBERNETES_SERVICE_HOST unset): pods "
        "whose counts only their owners give are denied");
  }
  return true;
}

int run_serve(const std::vector<std::string>& args) {
  const auto parsed = inputs::parse_serve(args);
  if (int code = 0; usage_failed(parsed, code)) return code;
  const auto& config = parsed.config;
  // A webhook must not die because nobody reads its log: with SIGPIPE ignored, a write to a
  // closed pipe (standard error or output whose reader went away) fails with EPIPE, and the log
  // writer counts the lines it loses. Sockets never raised it (Asio sends with MSG_NOSIGNAL).
  std::signal(SIGPIPE, SIG_IGN);
  server::setup_logging(config.log_format, config.log_level);

  server::server_state state;
  state.memory = std::make_unique<server::memory_budget>(
      server::memory_budget::options{.bytes = config.max_request_memory});
  auto loaded = inputs::load_policy_dir(config.policies);
  if (!loaded.errors.empty()) {
    for (const auto& e : loaded.errors) spdlog::critical("policy error: {}", e);
    spdlog::critical("not starting: fix the policies in {} (trainenv check-policies {})",
                     config.policies, config.policies);
    return exit_violation;
  }
  state.policies.publish(loaded.policies);

  const server::tls_files tls_files{config.tls_cert, config.tls_key, config.client_ca,
                                    config.client_names};
  auto bundle = server::load_server_tls(tls_files);
  if (!bundle) {
    spdlog::critical("not starting: {}", bundle.message());
    return exit_violation;
  }
  state.publish_certificate(*bundle);

  const unsigned threads =
      config.threads != 0 ? config.threads : std::max(1U, std::thread::hardware_concurrency());
  // Run by this thread; server::session_threads adds one io_context per further thread.
  boost::asio::io_context ioc(1);

  if (const auto wired = wire_owner_lookups(config, ioc, state); !wired) {
    spdlog::critical("not starting: {}", wired.message());
    return exit_violation;
  }
  // Policies follow their directory (a ConfigMap mount swaps a ..data link): inotify, and a
  // poll every 2 s where inotify sees nothing.
  const auto reloader = server::policy_reloader(ioc, state, config.policies,
                                                std::chrono::seconds(2), loaded.fingerprint);
  reloader->start();

  // The certificate too: cert-manager and Secret volumes rotate it in place.
  const auto tls_reloader =
      server::certificate_reloader(ioc, state, tls_files, std::chrono::seconds(2));
  tls_reloader->start();

  server::session_threads sessions(ioc, threads);
  server::server server(ioc, server::limits_from(config), state, &sessions);
  auto bound = server.start(config.listen, config.metrics_listen, config.preview_listen);
  if (!bound) {
    spdlog::critical("not starting: {}", bound.message());
    return exit_violation;
  }

  // SIGTERM or SIGINT: the server drains (server::drain) and the process exits 0 when no
  // connection is left, or at the deadline. A second signal stops at once.
  boost::asio::signal_set signals(ioc, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int signal) {
    if (ec) return;
    spdlog::info("received {}: not ready; draining for {} ms, exiting within {} ms",
                 signal == SIGTERM ? "SIGTERM" : "SIGINT", config.drain_delay.count(),
                 config.shutdown_deadline.count());
    signals.async_wait([&](const boost::system::error_code& again, int) {
      if (again) return;
      spdlog::warn("second signal: stopping now");
      ioc.stop();
    });
    server.drain(config.drain_delay, config.shutdown_deadline, [&](bool) {
      reloader->stop();
      tls_reloader->stop();
      ioc.stop();
    });
  });

  std::string policy_names;
  for (const auto& p : loaded.policies->all())
    policy_names += (policy_names.empty() ? "" : ",") + p.name;
  spdlog::info("config {} loaded=[{}] threads_running={}", inputs::describe(config), policy_names,
               threads);
  spdlog::info("certificate serial {} valid until {}", bundle->serial, bundle->not_after);
  spdlog::info("listening https={}:{} http={}:{}{}", bound->tls.address().to_string(),
               bound->tls.port(), bound->plain.address().to_string(), bound->plain.port(),
               bound->preview ? " previews=" + bound->preview->address().to_string() + ":" +
                                    std::to_string(bound->preview->port())
                              : std::string());
  state.set_ready(true);

  ioc.run();
  // Before the server goes: no connection's thread may still run. The connections the drain's
  // deadline cut short end with their io_contexts.
  sessions.stop();
  // The API clients' pooled connections are sockets of `ioc`: closed before it is destroyed.
  server::disconnect_api(state);
  spdlog::info("stopped");
  server::stop_logging();
  return exit_ok;
}

// How messages name the preview's input.
std::string input_name(const inputs::preview_config& config) {
  return config.file == "-" ? std::string("standard input") : config.file;
}

// Where the CLI reads owners (a pod's, a TrainJob's runtime): --owners FILE, else the cluster
// of --kubeconfig FILE, else nowhere; the server's own lookup, on an io_context of its own.
core::result<server::owner_lookup> cli_owners(const inputs::preview_config& config,
                                              boost::asio::io_context& ioc, server::metrics& m) {
  server::owner_lookup lookup;
  lookup.budget = config.lookup_timeout;
  lookup.no_access = "no API access (give --owners FILE or --kubeconfig FILE)";
  if (!config.owners.empty()) {
    auto owners = read_owners(config.owners);
    if (!owners) return std::move(owners).take_error();
    lookup.file = std::make_shared<const inputs::owner_file>(std::move(*owners));
  } else if (!config.kubeconfig.empty()) {
    auto credentials = api_credentials(config.kubeconfig, api_reader::command_line);
    if (!credentials) return std::move(credentials).take_error();
    server::kube_client_options client_options;
    client_options.events = &m;
    auto client =
        server::kube_client::create(ioc.get_executor(), std::move(**credentials), client_options);
    if (!client) return std::move(client).take_error();
    lookup.cache.emplace(ioc.get_executor(), std::move(*client),
                         server::owner_cache_options{.ttl = std::chrono::milliseconds(0)});
  }
  return lookup;
}

// preview --job: the whole job, its runtime (a TrainJob's) from the owners' source.
int run_job_preview(const inputs::preview_config& config, const core::policy_set& policies,
                    const std::string& text, boost::asio::io_context& ioc,
                    server::owner_lookup& lookup) {
  auto job = inputs::read_job(text);
  if (!job) {
    std::cerr << "trainenv: " << input_name(config) << ": " << job.message() << "\n";
    return exit_usage;
  }
  const auto given =
      server::run_to_end(ioc, server::fetch_objects(core::job_needs(*job), policies, lookup));
  lookup.cache.reset();  // its pooled connections are sockets of `ioc`
  core::mutate_options options;
  options.cluster_domain = config.cluster_domain;
  auto preview = core::preview_job(*job, given, policies, core::cli_preview_bounds, options);
  if (!preview) {
    std::cerr << preview.message() << "\n";
    return exit_usage;
  }
  if (config.output == "json") {
    std::cout << inputs::to_json(*preview).dump(2) << "\n";
  } else if (config.output == "yaml") {
    std::cout << inputs::to_yaml(inputs::to_json(*preview));
  } else {
    std::cout << inputs::to_table(*preview);
  }
  return preview->ok() ? exit_ok : exit_violation;
}

int run_preview(const std::vector<std::string>& args) {
  const auto parsed = inputs::parse_preview(args);
  if (int code = 0; usage_failed(parsed, code)) return code;
  const auto& config = parsed.config;

  auto loaded = inputs::load_policies(config.policies);
  if (!loaded.errors.empty()) {
    for (const auto& e : loaded.errors) std::cerr << "trainenv: " << e << "\n";
    return exit_usage;
  }
  std::stringstream text;
  if (config.file == "-") {
    text << std::cin.rdbuf();
  } else {
    std::ifstream in(config.file, std::ios::binary);
    if (!in) {
      std::cerr << "trainenv: cannot read " << config.file << "\n";
      return exit_usage;
    }
    text << in.rdbuf();
  }
  boost::asio::io_context ioc;
  server::metrics unused;
  auto lookup = cli_owners(config, ioc, unused);
  if (!lookup) {
    std::cerr << "trainenv: " << lookup.message() << "\n";
    return exit_usage;
  }
  if (config.job) return run_job_preview(config, *loaded.policies, text.str(), ioc, *lookup);
  auto documents = inputs::read_preview_documents(text.str(), input_name(config));
  if (!documents) {
    std::cerr << "trainenv: " << input_name(config) << ": " << documents.message() << "\n";
    return exit_usage;
  }
  // The server's own preview over each pod's owners, on an io_context of the command's.
  const core::mutate_options options{config.policy, config.cluster_domain};
  std::vector<inputs::preview_answer> answers;
  for (const auto& document : *documents) {
    auto answer = server::run_to_end(
        ioc,
        server::preview_with_owners(document.dump(), *loaded.policies, options, *lookup, unused));
    if (!answer) {
      std::cerr << "trainenv: " << input_name(config) << ": " << answer.message() << "\n";
      return exit_usage;
    }
    answers.push_back(std::move(*answer));
  }
  lookup->cache.reset();
  // One pod: its answer, as /preview gives it. Several: JSON an array of answers, YAML one
  // document each, a table one block each.
  nlohmann::json shown = nlohmann::json::array();
  for (const auto& answer : answers) shown.push_back(inputs::to_json(answer));
  if (config.output == "table") {
    for (std::size_t i = 0; i < answers.size(); ++i)
      std::cout << (i == 0 ? "" : "\n") << inputs::to_table(answers[i]);
  } else if (config.output == "yaml") {
    for (const auto& answer : shown) std::cout << inputs::to_yaml(answer);
  } else {
    std::cout << (answers.size() == 1 ? shown.front() : shown).dump(2) << "\n";
  }
  int code = exit_ok;
  for (const auto& answer : answers) {
    if (answer.decision.allowed) continue;
    std::cerr << answer.decision.message << "\n";
    code = exit_violation;
  }
  return code;
}

int run_check(const std::vector<std::string>& args) {
  const auto parsed = inputs::parse_check(args);
  if (int code = 0; usage_failed(parsed, code)) return code;
  const auto& dir = parsed.config.policies;
  auto loaded = inputs::load_policies(dir);
  if (!loaded.errors.empty()) {
    for (const auto& e : loaded.errors) std::cerr << e << "\n";
    std::cerr << loaded.errors.size() << " error(s) in "
              << (dir.empty() ? std::string(inputs::built_in_policies) : dir) << "\n";
    return exit_violation;
  }
  for (const auto& p : loaded.policies->all()) {
    std::string frameworks;
    for (const auto& f : p.frameworks) frameworks += (frameworks.empty() ? "" : ", ") + f;
    std::cout << p.source << ": ok: policy " << p.name
              << " (frameworks: " << (frameworks.empty() ? "none" : frameworks)
              << (p.is_default ? "; default" : "") << ")\n";
  }
  return exit_ok;
}

// Where doctor reads the cluster, in kubectl's order: --kubeconfig, the first file of
// $KUBECONFIG, ~/.kube/config, else (in a pod) the service account. Its exec plugin runs.
core::result<inputs::kube_credentials> doctor_credentials(const std::string& kubeconfig) {
  std::string file = kubeconfig;
  if (file.empty()) {
    const char* listed = std::getenv("KUBECONFIG");
    const std::string paths = listed != nullptr ? listed : "";
    for (std::size_t start = 0; start <= paths.size() && file.empty();) {
      const auto end = std::min(paths.find(':', start), paths.size());
      const auto candidate = paths.substr(start, end - start);
      if (!candidate.empty() && std::filesystem::exists(candidate)) file = candidate;
      start = end + 1;
    }
  }
  if (file.empty()) {
    const char* home = std::getenv("HOME");
    const std::string fallback = home != nullptr ? std::string(home) + "/.kube/config" : "";
    if (!fallback.empty() && std::filesystem::exists(fallback)) file = fallback;
  }
  if (file.empty()) {
    const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
    if (host == nullptr || *host == '\0') {
      return core::error{
          "no cluster to read: give --kubeconfig FILE (or set KUBECONFIG), or "
          "--from FILE"};
    }
    return inputs::load_in_cluster();
  }
  auto credentials = api_credentials(file, api_reader::command_line);
  if (!credentials) return std::move(credentials).take_error();
  return std::move(**credentials);
}

// One diagnosis, printed; its exit code.
int print_diagnosis(const inputs::doctor_config& config, const core::diagnosis& d) {
  std::cout << (config.output == "json" ? inputs::to_json(d).dump(2) + "\n" : inputs::to_table(d));
  return d.healthy() ? exit_ok : exit_violation;
}

// doctor: the live job out of --from or the cluster, diagnosed with the policies; exit 0
// healthy, 1 with an error finding, 2 when the job cannot be read or laid out. --until-healthy
// reads and diagnoses again every 5 s until healthy or --timeout.
int run_doctor(const std::vector<std::string>& args) {
  const auto parsed = inputs::parse_doctor(args);
  if (int code = 0; usage_failed(parsed, code)) return code;
  const auto& config = parsed.config;
  auto target = inputs::parse_doctor_target(config.target);
  if (!target) {
    std::cerr << "trainenv doctor: " << target.message() << "\n";
    return exit_usage;
  }
  auto loaded = inputs::load_policies(config.policies);
  if (!loaded.errors.empty()) {
    for (const auto& e : loaded.errors) std::cerr << "trainenv: " << e << "\n";
    return exit_usage;
  }
  core::mutate_options options;
  options.cluster_domain = config.cluster_domain;
  const auto diagnosed = [&](const std::vector<nlohmann::json>& objects, std::string_view ns,
                             std::string_view source, std::vector<std::string> not_checked,
                             std::vector<core::pod_log> logs) {
    auto job = inputs::live_job_from(objects, *target, ns, source);
    if (!job) return core::result<core::diagnosis>(core::error{job.message()});
    job->not_checked = std::move(not_checked);
    job->logs = std::move(logs);
    return core::diagnose(*job, *loaded.policies, options);
  };
  if (!config.from.empty()) {
    auto dump = read_owners(config.from);
    if (!dump) {
      std::cerr << "trainenv doctor: --from " << dump.message() << "\n";
      return exit_usage;
    }
    auto diagnosis = diagnosed(dump->objects(), config.namespace_name, "the --from file", {}, {});
    if (!diagnosis) {
      std::cerr << "trainenv doctor: " << diagnosis.message() << "\n";
      return exit_usage;
    }
    return print_diagnosis(config, *diagnosis);
  }

  auto credentials = doctor_credentials(config.kubeconfig);
  if (!credentials) {
    std::cerr << "trainenv doctor: " << credentials.message() << "\n";
    return exit_usage;
  }
  const std::string ns = !config.namespace_name.empty()         ? config.namespace_name
                         : !credentials->namespace_name.empty() ? credentials->namespace_name
                                                                : "default";
  const auto deadline = std::chrono::steady_clock::now() + config.timeout;
  constexpr auto poll_interval = std::chrono::seconds(5);
  boost::asio::io_context ioc;
  for (;;) {
    // A plugin's credential that has expired (or will within the interval) is asked for again,
    // as client-go does.
    if (credentials->exec && credentials->expires != std::chrono::system_clock::time_point{} &&
        credentials->expires < std::chrono::system_clock::now() + poll_interval) {
      if (auto again = inputs::obtain_exec_credentials(*credentials); !again) {
        std::cerr << "trainenv doctor: " << again.message() << "\n";
        return exit_usage;
      }
    }
    auto client = server::kube_client::create(ioc.get_executor(), *credentials);
    if (!client) {
      std::cerr << "trainenv doctor: " << client.message() << "\n";
      return exit_usage;
    }
    auto read = server::run_to_end(
        ioc, server::read_live_job(*client, *target, ns,
                                   {.budget = config.lookup_timeout, .logs = config.logs}));
    if (!read) {
      std::cerr << "trainenv doctor: " << read.message() << "\n";
      return exit_usage;
    }
    auto diagnosis = diagnosed(read->objects, ns, "the cluster", std::move(read->not_checked),
                               std::move(read->logs));
    if (!diagnosis) {
      std::cerr << "trainenv doctor: " << diagnosis.message() << "\n";
      return exit_usage;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!config.until_healthy || diagnosis->healthy() || now + poll_interval > deadline)
      return print_diagnosis(config, *diagnosis);
    std::string kinds;
    for (const auto& f : diagnosis->findings) {
      if (f.level == core::severity::error && kinds.find(f.kind) == std::string::npos)
        kinds += (kinds.empty() ? "" : ", ") + f.kind;
    }
    std::cerr << "trainenv doctor: " << diagnosis->kind << " " << ns << "/" << diagnosis->name
              << " not healthy yet (" << kinds << "); reading again in 5 s\n";
    std::this_thread::sleep_for(poll_interval);
  }
}

// EX_TEMPFAIL: what a wait that timed out exits with (docs/contract.md §3.1).
constexpr int exit_wait_timed_out = 75;

// Whether hostfile host `host` is the pod itself, named `self`: the same name, or the same first
// label (a hostfile may name it fully qualified, "<hostname>.<subdomain>.<namespace>.svc").
bool is_self(std::string_view host, std::string_view self) {
  const auto first = [](std::string_view name) { return name.substr(0, name.find('.')); };
  return host == self || first(host) == first(self);
}

int run_wait(const std::vector<std::string>& args) {
  const auto parsed = inputs::parse_wait(args);
  if (int code = 0; usage_failed(parsed, code)) return code;
  const auto& config = parsed.config;
  std::vector<server::wait_item> items;
  for (const auto& host : config.resolve) items.push_back({host, 0});
  for (const auto& target : config.connect) {
    const auto colon = target.rfind(':');
    items.push_back(
        {target.substr(0, colon), static_cast<std::uint16_t>(std::stoi(target.substr(colon + 1)))});
  }
  if (!config.hostfile.empty()) {
    std::ifstream in(config.hostfile, std::ios::binary);
    std::stringstream text;
    if (!in || !(text << in.rdbuf())) {
      std::cerr << "trainenv wait: cannot read the hostfile " << config.hostfile << "\n";
      return exit_usage;
    }
    for (auto& host : core::hostfile_hosts(text.str())) {
      if (std::any_of(config.skip.begin(), config.skip.end(),
                      [&](const std::string& self) { return is_self(host, self); }))
        continue;
      items.push_back({std::move(host), config.hostfile_port});
    }
  }
  const server::wait_options options{
      .timeout = std::chrono::seconds(config.timeout_seconds),
      .parallel = config.parallel,
      .progress_every = config.progress_every,
      .connect_timeout = config.connect_timeout,
  };
  std::cout << "trainenv wait: " << items.size() << " targets, up to " << config.timeout_seconds
            << " s" << std::endl;
  const auto result = server::wait_for(items, options, std::cout);
  if (result.ok) return exit_ok;
  std::string doctor = "trainenv doctor " + (config.job.empty() ? "pod/POD" : config.job);
  if (!config.namespace_name.empty()) doctor += " -n " + config.namespace_name;
  const auto message = server::timeout_message(result, doctor);
  std::ofstream log(config.termination_log, std::ios::binary | std::ios::trunc);
  if (!(log << message) || !log.flush())
    std::cerr << "trainenv wait: cannot write " << config.termination_log << "\n";
  std::cerr << message;
  return exit_wait_timed_out;
}

}  // namespace

namespace {

int run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << inputs::main_help();
    return exit_usage;
  }
  const std::string command = args.front();
  args.erase(args.begin());
  if (command == "serve") return run_serve(args);
  if (command == "preview") return run_preview(args);
  if (command == "check-policies") return run_check(args);
  if (command == "wait") return run_wait(args);
  if (command == "doctor") return run_doctor(args);
  if (command == "version" || command == "--version") {
    std::cout << "trainenv " TRAINENV_VERSION "\n";
    return exit_ok;
  }
  if (command == "help" || command == "--help" || command == "-h") {
    std::cout << inputs::main_help();
    return exit_ok;
  }
  std::cerr << "trainenv: unknown command \"" << command << "\"\n\n" << inputs::main_help();
  return exit_usage;
}

}  // namespace

// Start-up problems exit non-zero with one line; nothing escapes as an uncaught exception.
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "trainenv: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "trainenv: unexpected error\n";
  }
  return exit_violation;
}
