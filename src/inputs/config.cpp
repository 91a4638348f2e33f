#include "trainenv/inputs/config.hpp"

#include <charconv>
#include <functional>
#include <map>
#include <optional>

#include <arpa/inet.h>

#include "trainenv/core/names.hpp"

namespace trainenv::inputs {
namespace {

// What Asio's make_address accepts: dotted IPv4, or IPv6 with an optional %scope (the scope
// is not checked here, as Asio does not check it either); inputs links no Boost.
bool is_ip_address(const std::string& host) {
  unsigned char buf[16];
  if (::inet_pton(AF_INET, host.c_str(), buf) == 1) return true;
  const std::string v6 = host.substr(0, host.find('%'));
  return ::inet_pton(AF_INET6, v6.c_str(), buf) == 1;
}

// One flag: its name, whether it takes a value, and how to store it.
struct flag {
  bool takes_value = true;
  std::function<std::string(const std::string&)> apply;  // returns an error, or ""
};

// Applies `args` to `flags`; returns the failure (or the help request), if any.
std::optional<parse_failure> parse_flags(
    const std::vector<std::string>& args, const std::map<std::string, flag>& flags,
    const std::string& help, const std::function<std::string(const std::string&)>& positional) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i];
    if (name == "--help" || name == "-h") return parse_failure{true, help};
    if (name.rfind('-', 0) != 0 || name == "-") {
      if (!positional)
        return parse_failure{false, "unexpected argument \"" + name + "\" (see --help)"};
      if (auto problem = positional(name); !problem.empty()) return parse_failure{false, problem};
      continue;
    }
    std::string value;
    bool has_inline_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_inline_value = true;
    }
    auto it = flags.find(name);
    if (it == flags.end()) return parse_failure{false, "unknown flag " + name + " (see --help)"};
    if (it->second.takes_value && !has_inline_value) {
      if (i + 1 >= args.size())
        return parse_failure{false, "flag " + name + " needs a value (see --help)"};
      value = args[++i];
    }
    if (auto problem = it->second.apply(value); !problem.empty()) {
      return parse_failure{false, name + ": " + problem};
    }
  }
  return std::nullopt;
}

template <class T>
parsed<T> finish(T config, std::optional<parse_failure> failure) {
  parsed<T> out;
  out.config = std::move(config);
  if (failure) {
    out.ok = false;
    out.failure = std::move(*failure);
  }
  return out;
}

flag string_flag(std::string& target) {
  return {true, [&target](const std::string& v) {
            if (v.empty()) return std::string("must not be empty");
            target = v;
            return std::string();
          }};
}

flag domain_flag(std::string& target) {
  return {true, [&target](const std::string& v) {
            if (!core::is_dns_subdomain(v))
              return std::string("expected a DNS domain of lower-case labels, e.g. cluster.local");
            target = v;
            return std::string();
          }};
}

flag seconds_flag(std::chrono::milliseconds& target) {
  return {true, [&target](const std::string& v) {
            double seconds = 0;
            auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), seconds);
            // !(x >= 0.001) also refuses NaN, which from_chars accepts.
            if (ec != std::errc() || end != v.data() + v.size() || !(seconds >= 0.001) ||
                seconds > 86400) {
              return std::string("expected seconds from 0.001 to 86400, e.g. 10 or 0.5");
            }
            target = std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
            return std::string();
          }};
}

flag size_flag(std::size_t& target, std::size_t min, std::size_t max) {
  return {true, [&target, min, max](const std::string& v) {
            auto n = core::parse_decimal(v, static_cast<std::int64_t>(max));
            if (!n || static_cast<std::size_t>(*n) < min) {
              return "expected a whole number from " + std::to_string(min) + " to " +
                     std::to_string(max);
            }
            target = static_cast<std::size_t>(*n);
            return std::string();
          }};
}

flag endpoint_flag(endpoint_spec& target) {
  return {true, [&target](const std::string& v) {
            auto parsed = parse_endpoint(v);
            if (!parsed) return parsed.message();
            target = *parsed;
            return std::string();
          }};
}

flag choice_flag(std::string& target, const std::vector<std::string>& choices) {
  return {true, [&target, choices](const std::string& v) {
            for (const auto& c : choices) {
              if (c == v) {
                target = v;
                return std::string();
              }
            }
            std::string list;
            for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
            return "expected one of " + list;
          }};
}

// HOST:PORT as --listen takes it: an IPv6 host in brackets.
std::string endpoint_text(const endpoint_spec& e) {
  const bool v6 = e.host.find(':') != std::string::npos;
  return (v6 ? "[" + e.host + "]" : e.host) + ":" + std::to_string(e.port);
}

// Seconds as the SECONDS flags take them: "10", "0.5", "1.25".
std::string seconds_text(std::chrono::milliseconds ms) {
  std::string out = std::to_string(ms.count() / 1000);
  if (const auto rest = ms.count() % 1000; rest != 0) {
    std::string fraction = std::to_string(1000 + rest).substr(1);
    fraction.erase(fraction.find_last_not_of('0') + 1);
    out += "." + fraction;
  }
  return out;
}

}  // namespace

core::result<endpoint_spec> parse_endpoint(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos)
    return core::error{"expected HOST:PORT, e.g. 0.0.0.0:8443 or [::1]:8443"};
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    if (host.find(':') == std::string::npos) {
      return core::error{"brackets are for IPv6 addresses only, e.g. [::1]:8443"};
    }
  } else if (host.find(':') != std::string::npos) {
    return core::error{"write an IPv6 address in brackets, e.g. [::1]:8443"};
  }
  if (host.empty()) host = "0.0.0.0";
  if (host == "localhost") host = "127.0.0.1";
  if (!is_ip_address(host))
    return core::error{"\"" + host +
                       "\" is not an IP address (use 0.0.0.0, ::, 127.0.0.1 or localhost)"};
  const auto port = core::parse_decimal(std::string_view(text).substr(colon + 1), 65535);
  if (!port) return core::error{"port must be a number from 0 to 65535"};
  return endpoint_spec{host, static_cast<std::uint16_t>(*port)};
}

std::string main_help() {
  return "trainenv " TRAINENV_VERSION
         " - Kubernetes admission webhook that wires training pods into their job\n"
         "\n"
         "Usage: trainenv <command> [flags]\n"
         "\n"
         "Commands:\n"
         "  serve            run the HTTPS admission webhook\n"
         "  preview          print the patch trainenv would apply to a Pod, offline\n"
         "  check-policies   validate a directory of policy files\n"
         "  version          print the version\n"
         "\n"
         "Run 'trainenv <command> --help' for a command's flags.\n";
}

std::string serve_help() {
  // The defaults stated here are the struct's own, so the two cannot drift apart.
  const serve_config d;
  const auto seconds = [](std::chrono::milliseconds ms) { return seconds_text(ms); };
  return "Usage: trainenv serve [flags]\n"
         "\n"
         "Runs the admission webhook: POST /mutate and /preview, GET /healthz and /readyz over "
         "HTTPS,\n"
         "and /metrics, /healthz, /readyz over plain HTTP on --metrics-listen.\n"
         "\n"
         "Flags:\n"
         "  --listen HOST:PORT         HTTPS address (default " +
         endpoint_text(d.listen) +
         "; port 0 picks a free one)\n"
         "  --tls-cert FILE            serving certificate, PEM (default " +
         d.tls_cert +
         ")\n"
         "  --tls-key FILE             its private key, PEM (default " +
         d.tls_key +
         ")\n"
         "  --client-ca FILE           require client certificates signed by this CA (default" +
         (d.client_ca.empty() ? ": none" : " " + d.client_ca) +
         ")\n"
         "  --policies DIR             policy directory (default " +
         d.policies +
         ")\n"
         "  --metrics-listen HOST:PORT plain-HTTP health address (default " +
         endpoint_text(d.metrics_listen) +
         ")\n"
         "  --log-format text|json     log line format (default " +
         d.log_format +
         ")\n"
         "  --log-level LEVEL          trace, debug, info, warn, error or off (default " +
         d.log_level +
         ")\n"
         "  --threads N                I/O threads (default" +
         (d.threads == 0 ? std::string(": one per core") : " " + std::to_string(d.threads)) +
         ")\n"
         "  --max-body-bytes N         largest request body; larger ones get 413 (default " +
         std::to_string(d.max_body_bytes) +
         ")\n"
         "  --max-header-bytes N       largest request header block; larger ones get 431 "
         "(default " +
         std::to_string(d.max_header_bytes) +
         ")\n"
         "  --read-timeout SECONDS     time to receive one request once it has started (default " +
         seconds(d.read_timeout) +
         ")\n"
         "  --idle-timeout SECONDS     keep-alive connection idle time before closing (default " +
         seconds(d.idle_timeout) +
         ")\n"
         "  --handshake-timeout SECONDS TLS handshake time limit (default " +
         seconds(d.handshake_timeout) +
         ")\n"
         "  --max-connections N        open connections, both listeners; more are closed at once "
         "(default " +
         std::to_string(d.max_connections) +
         ")\n"
         "  --drain-delay SECONDS      on SIGTERM/SIGINT, keep serving this long with /readyz at "
         "503 (default " +
         seconds(d.drain_delay) +
         ")\n"
         "  --shutdown-deadline SECONDS exit by then after the signal, in-flight requests done "
         "(default " +
         seconds(d.shutdown_deadline) +
         ")\n"
         "  --kubeconfig FILE          read pods' owners with this kubeconfig's current context "
         "(default" +
         (d.kubeconfig.empty()
              ? std::string(": the service account when KUBERNETES_SERVICE_HOST is set, else no "
                            "API access")
              : " " + d.kubeconfig) +
         ")\n"
         "  --lookup-timeout SECONDS   time budget for reading one pod's owners (default " +
         seconds(d.lookup_timeout) +
         ")\n"
         "  --owner-cache-ttl SECONDS  how long an owner object read is reused (default " +
         seconds(d.owner_cache_ttl) +
         ")\n"
         "  --owners FILE              read pods' owners from this file (YAML documents or a\n"
         "                             kubectl List), not the API: a local server, no cluster\n"
         "  --cluster-domain DOMAIN    the cluster's DNS domain, which pods' full names end in\n"
         "                             (default " +
         d.cluster_domain + ")\n";
}

std::string preview_help() {
  return "Usage: trainenv preview [-f FILE|-] [--policy NAME] [--policies DIR] [--owners FILE |\n"
         "                        --kubeconfig FILE]\n"
         "       trainenv preview --job -f FILE [-o table|json] [--policies DIR] [--owners FILE |\n"
         "                        --kubeconfig FILE]\n"
         "\n"
         "Reads a Pod or an AdmissionReview (JSON or YAML) and prints, as JSON, what the webhook "
         "would\n"
         "answer: {allowed, policy, patch, object, warnings, message, sources, injected}. Exits 0 "
         "when allowed, 1 on "
         "a\n"
         "violation (the message goes to standard error too), 2 on unreadable input.\n"
         "\n"
         "Flags:\n"
         "  -f, --file FILE   input file, or - for standard input (default -)\n"
         "  --policy NAME     use this policy instead of the pod's annotation or framework label\n"
         "  --policies DIR    policy directory (default policies/)\n"
         "  --owners FILE     the pod's owner objects (YAML documents or a kubectl List), read\n"
         "                    instead of the Kubernetes API\n"
         "  --kubeconfig FILE read the pod's owners from this kubeconfig's cluster\n"
         "  --lookup-timeout SECONDS  budget for those reads (default 2)\n"
         "  --cluster-domain DOMAIN   the cluster's DNS domain (default cluster.local)\n"
         "Without --owners or --kubeconfig, a pod that needs its owners' counts is denied.\n"
         "\n"
         "With --job, FILE is what you would kubectl apply: a TrainJob (its runtime from --owners\n"
         "or the cluster), a JobSet, an Indexed batch/v1 Job or a Volcano Job. Every pod its\n"
         "controllers would create is decided as /mutate would, one row each, then the job is\n"
         "checked as a whole (distinct ranks 0..N-1, one master that is rank 0's DNS name, one\n"
         "world size, a hostfile of exactly the workers, every pod named as its layout calls it,\n"
         "the world only training pods, an elastic job's one rendezvous, no pod denied). Exits 1\n"
         "naming the pods that disagree, 2 on unreadable input. -o json adds each pod's patch,\n"
         "the pod as created and as admitted, and the job's objects.\n"
         "  --job             FILE is a whole job\n"
         "  -o, --output table|json  how to print it (default table)\n";
}

std::string check_help() {
  return "Usage: trainenv check-policies [DIR]\n"
         "\n"
         "Validates every policy file (*.yaml, *.yml, *.json) in DIR (default policies/) the way\n"
         "'trainenv serve' does at start-up. Prints one line per policy; exits 1 on any error.\n";
}

parsed<serve_config> parse_serve(const std::vector<std::string>& args) {
  serve_config c;
  std::map<std::string, flag> flags = {
      {"--listen", endpoint_flag(c.listen)},
      {"--metrics-listen", endpoint_flag(c.metrics_listen)},
      {"--tls-cert", string_flag(c.tls_cert)},
      {"--tls-key", string_flag(c.tls_key)},
      {"--client-ca", string_flag(c.client_ca)},
      {"--policies", string_flag(c.policies)},
      {"--log-format", choice_flag(c.log_format, {"text", "json"})},
      {"--log-level", choice_flag(c.log_level, {"trace", "debug", "info", "warn", "error", "off"})},
      {"--threads",
       {true,
        [&c](const std::string& v) {
          auto n = core::parse_decimal(v, 256);
          if (!n || *n < 1) return std::string("expected a whole number from 1 to 256");
          c.threads = static_cast<unsigned>(*n);
          return std::string();
        }}},
      {"--max-body-bytes", size_flag(c.max_body_bytes, 1024, std::size_t{1} << 30)},
      {"--max-header-bytes", size_flag(c.max_header_bytes, 1024, std::size_t{1024} * 1024)},
      {"--read-timeout", seconds_flag(c.read_timeout)},
      {"--idle-timeout", seconds_flag(c.idle_timeout)},
      {"--handshake-timeout", seconds_flag(c.handshake_timeout)},
      {"--max-connections", size_flag(c.max_connections, 1, 1'000'000)},
      {"--drain-delay",
       {true,
        [&c](const std::string& v) {
          if (v == "0") {
            c.drain_delay = std::chrono::milliseconds(0);
            return std::string();
          }
          return seconds_flag(c.drain_delay).apply(v);
        }}},
      {"--shutdown-deadline", seconds_flag(c.shutdown_deadline)},
      {"--kubeconfig", string_flag(c.kubeconfig)},
      {"--lookup-timeout", seconds_flag(c.lookup_timeout)},
      {"--owner-cache-ttl", seconds_flag(c.owner_cache_ttl)},
      {"--owners", string_flag(c.owners)},
      {"--cluster-domain", domain_flag(c.cluster_domain)},
  };
  auto failure = parse_flags(args, flags, serve_help(), nullptr);
  if (!failure && !c.owners.empty() && !c.kubeconfig.empty())
    failure = parse_failure{false, "give --owners or --kubeconfig, not both"};
  return finish(std::move(c), std::move(failure));
}

parsed<preview_config> parse_preview(const std::vector<std::string>& args) {
  preview_config c;
  std::map<std::string, flag> flags = {
      {"-f", string_flag(c.file)},
      {"--file", string_flag(c.file)},
      {"--policy", string_flag(c.policy)},
      {"--policies", string_flag(c.policies)},
      {"--owners", string_flag(c.owners)},
      {"--kubeconfig", string_flag(c.kubeconfig)},
      {"--lookup-timeout", seconds_flag(c.lookup_timeout)},
      {"--cluster-domain", domain_flag(c.cluster_domain)},
      {"--job",
       {false,
        [&c](const std::string&) {
          c.job = true;
          return std::string();
        }}},
      {"-o", choice_flag(c.output, {"table", "json"})},
      {"--output", choice_flag(c.output, {"table", "json"})},
  };
  auto failure = parse_flags(args, flags, preview_help(), nullptr);
  if (!failure && !c.owners.empty() && !c.kubeconfig.empty())
    failure = parse_failure{false, "give --owners or --kubeconfig, not both"};
  if (!failure && c.job && !c.policy.empty())
    failure = parse_failure{false, "--policy applies to one pod; a job's pods choose their own"};
  return finish(std::move(c), std::move(failure));
}

parsed<check_config> parse_check(const std::vector<std::string>& args) {
  check_config c;
  bool dir_given = false;
  auto failure = parse_flags(args, {}, check_help(), [&](const std::string& dir) {
    if (dir_given) return std::string("only one directory may be given");
    dir_given = true;
    c.policies = dir;
    return std::string();
  });
  return finish(std::move(c), std::move(failure));
}

}  // namespace trainenv::inputs
