#include "trainenv/inputs/config.hpp"

#include <algorithm>
#include <charconv>
#include <functional>
#include <map>
#include <optional>

#include <arpa/inet.h>

#include "trainenv/core/text/names.hpp"

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

// How a flag's value is read and shown: `apply` stores it (returning an error, or ""), `show`
// gives the value held now as the help states a default ("": no value to state).
struct value_kind {
  std::function<std::string(const std::string&)> apply;
  std::function<std::string()> show;
};

// One flag, declared once: the parser and the help text are both made from the list of them.
// Declared over a config object, whose values `show` reads: over a default-constructed one, the
// help states the defaults of the struct itself, so the two cannot drift apart.
struct flag {
  std::vector<std::string> names;  // "-o", "--output"
  std::string metavar;             // what the value is, "HOST:PORT"; empty: a switch
  std::string help;                // what it does
  value_kind value;
  std::string unset = {};  // the default stated when show() is empty ("none"); empty: none stated
  std::string note = {};   // said after the default, "port 0 picks a free one"
};

// The help's list of flags: names and value in a column, then what each does and its default,
// wrapped at word boundaries to lines of at most 99 characters.
std::string render_flags(const std::vector<flag>& flags) {
  constexpr std::size_t column = 26;
  constexpr std::size_t width = 99;
  const std::string indent(2 + column + 1, ' ');
  std::string out;
  for (const auto& f : flags) {
    std::string left;
    for (const auto& name : f.names) left += (left.empty() ? "" : ", ") + name;
    if (!f.metavar.empty()) left += " " + f.metavar;
    left.resize(std::max(left.size(), column), ' ');
    std::string text = f.help;
    const std::string shown = f.value.show ? f.value.show() : "";
    std::string stated = !shown.empty()     ? "default " + shown
                         : !f.unset.empty() ? "default: " + f.unset
                                            : "";
    if (!f.note.empty()) stated += (stated.empty() ? "" : "; ") + f.note;
    if (!stated.empty()) text += " (" + stated + ")";
    std::string line = "  " + left;
    std::size_t from = 0;
    while (from < text.size()) {
      auto to = text.find(' ', from);
      if (to == std::string::npos) to = text.size();
      const auto word = text.substr(from, to - from);
      if (line.size() + 1 + word.size() > width && line.size() > indent.size()) {
        out += line + "\n";
        line = indent.substr(1);
      }
      line += " " + word;
      from = to + 1;
    }
    out += line + "\n";
  }
  return out;
}

// Applies `args` to `flags`; returns the failure (or the help request), if any.
std::optional<parse_failure> parse_flags(
    const std::vector<std::string>& args, const std::vector<flag>& flags, const std::string& help,
    const std::function<std::string(const std::string&)>& positional) {
  std::map<std::string, const flag*, std::less<>> by_name;
  for (const auto& f : flags) {
    for (const auto& name : f.names) by_name.emplace(name, &f);
  }
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
    auto it = by_name.find(name);
    if (it == by_name.end()) return parse_failure{false, "unknown flag " + name + " (see --help)"};
    if (!it->second->metavar.empty() && !has_inline_value) {
      if (i + 1 >= args.size())
        return parse_failure{false, "flag " + name + " needs a value (see --help)"};
      value = args[++i];
    }
    if (auto problem = it->second->value.apply(value); !problem.empty()) {
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

value_kind string_value(std::string& target) {
  return {[&target](const std::string& v) {
            if (v.empty()) return std::string("must not be empty");
            target = v;
            return std::string();
          },
          [&target] { return target; }};
}

value_kind domain_value(std::string& target) {
  return {[&target](const std::string& v) {
            if (!core::is_dns_subdomain(v))
              return std::string("expected a DNS domain of lower-case labels, e.g. cluster.local");
            target = v;
            return std::string();
          },
          [&target] { return target; }};
}

// `zero`: "0" is accepted too (and shown), for a flag where none is a choice.
value_kind seconds_value(std::chrono::milliseconds& target, bool zero = false) {
  return {[&target, zero](const std::string& v) {
            if (zero && v == "0") {
              target = std::chrono::milliseconds(0);
              return std::string();
            }
            double seconds = 0;
            auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), seconds);
            // !(x >= 0.001) also refuses NaN, which from_chars accepts.
            if (ec != std::errc() || end != v.data() + v.size() || !(seconds >= 0.001) ||
                seconds > 86400) {
              return std::string("expected seconds from ") + (zero ? "0" : "0.001") +
                     " to 86400, e.g. 10 or 0.5";
            }
            target = std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
            return std::string();
          },
          [&target] { return seconds_text(target); }};
}

// Seconds ("600") or a Go duration ("10m", "1h30m"), from 1 s to a day.
value_kind duration_value(std::chrono::seconds& target) {
  return {[&target](const std::string& v) {
            const auto seconds = core::parse_duration_seconds(v, 86400);
            if (!seconds)
              return std::string("expected seconds or a duration from 1s to 24h, e.g. 600 or 10m");
            target = std::chrono::seconds(*seconds);
            return std::string();
          },
          [&target] { return std::to_string(target.count()) + "s"; }};
}

// A whole number from `min` to `max`; the value 0, where `min` is higher, shows as none (the
// flag's `unset`).
template <class T>
value_kind count_value(T& target, std::size_t min, std::size_t max) {
  return {
      [&target, min, max](const std::string& v) {
        auto n = core::parse_decimal(v, static_cast<std::int64_t>(max));
        if (!n || static_cast<std::size_t>(*n) < min) {
          return "expected a whole number from " + std::to_string(min) + " to " +
                 std::to_string(max);
        }
        target = static_cast<T>(*n);
        return std::string();
      },
      [&target, min] { return target == 0 && min > 0 ? std::string() : std::to_string(target); }};
}

value_kind endpoint_value(endpoint_spec& target) {
  return {[&target](const std::string& v) {
            auto parsed = parse_endpoint(v);
            if (!parsed) return parsed.message();
            target = *parsed;
            return std::string();
          },
          [&target] { return endpoint_text(target); }};
}

// An address that may be left unset (its host empty): the help shows the flag's `unset`.
value_kind optional_endpoint_value(endpoint_spec& target) {
  return {[&target](const std::string& v) {
            auto parsed = parse_endpoint(v);
            if (!parsed) return parsed.message();
            target = *parsed;
            return std::string();
          },
          [&target] { return target.host.empty() ? std::string() : endpoint_text(target); }};
}

// Comma-separated names, each a DNS subdomain or a certificate's CN (printable, no comma).
value_kind names_value(std::vector<std::string>& target) {
  return {
      [&target](const std::string& v) {
        std::vector<std::string> names;
        std::size_t start = 0;
        while (start <= v.size()) {
          const auto comma = std::min(v.find(',', start), v.size());
          const auto name = core::trim(std::string_view(v).substr(start, comma - start));
          if (name.empty() || name.size() > 253 ||
              !std::all_of(name.begin(), name.end(), [](char c) { return c > ' ' && c < 0x7f; }))
            return std::string("expected names separated by commas, e.g. kube-apiserver");
          names.emplace_back(name);
          start = comma + 1;
        }
        target = std::move(names);
        return std::string();
      },
      [&target] {
        std::string out;
        for (const auto& n : target) out += (out.empty() ? "" : ",") + n;
        return out;
      }};
}

value_kind choice_value(std::string& target, const std::vector<std::string>& choices) {
  return {[&target, choices](const std::string& v) {
            for (const auto& c : choices) {
              if (c == v) {
                target = v;
                return std::string();
              }
            }
            std::string list;
            for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
            return "expected one of " + list;
          },
          [&target] { return target; }};
}

value_kind switch_value(bool& target) {
  return {[&target](const std::string&) {
            target = true;
            return std::string();
          },
          nullptr};
}

// serve's flags over `c`, in the order its help lists them: a table, one entry per flag, as long
// as the flags are many.
std::vector<flag> serve_flags(serve_config& c) {
  return {
      {{"--listen"},
       "HOST:PORT",
       "HTTPS address",
       endpoint_value(c.listen),
       "",
       "port 0 picks a free one"},
      {{"--tls-cert"}, "FILE", "serving certificate, PEM", string_value(c.tls_cert)},
      {{"--tls-key"}, "FILE", "its private key, PEM", string_value(c.tls_key)},
      {{"--client-ca"},
       "FILE",
       "require client certificates signed by this CA on --listen (a CA of their own: any "
       "certificate it signed gets in, unless --client-names says which)",
       string_value(c.client_ca),
       "none"},
      {{"--client-names"},
       "NAMES",
       "with --client-ca, only certificates that name one of these, comma-separated (their DNS "
       "names, else their common name), e.g. kube-apiserver",
       names_value(c.client_names),
       "any"},
      {{"--preview-listen"},
       "HOST:PORT",
       "HTTPS address of /preview and /preview/job for a server that reads from the API: each "
       "request needs the caller's bearer token (checked by TokenReview) and reads the cluster "
       "with it, never with the webhook's rights",
       optional_endpoint_value(c.preview_listen),
       "off; without API access the previews are served on --listen"},
      {{"--policies"}, "DIR", "policy directory", string_value(c.policies)},
      {{"--metrics-listen"},
       "HOST:PORT",
       "plain-HTTP health address",
       endpoint_value(c.metrics_listen)},
      {{"--log-format"},
       "text|json",
       "log line format",
       choice_value(c.log_format, {"text", "json"})},
      {{"--log-level"},
       "LEVEL",
       "trace, debug, info, warn, error or off",
       choice_value(c.log_level, {"trace", "debug", "info", "warn", "error", "off"})},
      {{"--threads"}, "N", "I/O threads", count_value(c.threads, 1, 256), "one per core"},
      {{"--max-body-bytes"},
       "N",
       "largest /mutate body; larger ones get 413",
       count_value(c.max_body_bytes, 1024, std::size_t{1} << 30)},
      {{"--max-preview-body-bytes"},
       "N",
       "largest /preview and /preview/job body; larger ones get 413",
       count_value(c.max_preview_body_bytes, 1024, std::size_t{64} * 1024 * 1024)},
      {{"--max-request-memory"},
       "N",
       "bytes the requests in flight may hold at once (bodies, what is parsed of them, the API's "
       "answers); a request waits for its share within its read timeout, then gets 503",
       count_value(c.max_request_memory, std::size_t{16} * 1024 * 1024, std::size_t{1} << 40)},
      {{"--max-header-bytes"},
       "N",
       "largest request header block; larger ones get 431",
       count_value(c.max_header_bytes, 1024, std::size_t{1024} * 1024)},
      {{"--read-timeout"},
       "SECONDS",
       "time to receive one request once it has started",
       seconds_value(c.read_timeout)},
      {{"--idle-timeout"},
       "SECONDS",
       "keep-alive connection idle time before closing",
       seconds_value(c.idle_timeout)},
      {{"--handshake-timeout"},
       "SECONDS",
       "TLS handshake time limit",
       seconds_value(c.handshake_timeout)},
      {{"--max-connections"},
       "N",
       "open connections on --listen; more are closed at once",
       count_value(c.max_connections, 1, 1'000'000)},
      {{"--max-preview-connections"},
       "N",
       "open connections on --preview-listen; more are closed at once",
       count_value(c.max_preview_connections, 1, 1'000'000)},
      {{"--max-metrics-connections"},
       "N",
       "open connections on --metrics-listen; more are closed at once",
       count_value(c.max_metrics_connections, 1, 1'000'000)},
      {{"--drain-delay"},
       "SECONDS",
       "on SIGTERM/SIGINT, keep serving this long with /readyz at 503",
       seconds_value(c.drain_delay, true)},
      {{"--shutdown-deadline"},
       "SECONDS",
       "exit by then after the signal, in-flight requests done",
       seconds_value(c.shutdown_deadline)},
      {{"--kubeconfig"},
       "FILE",
       "read pods' owners with this kubeconfig's current context",
       string_value(c.kubeconfig),
       "the service account when KUBERNETES_SERVICE_HOST is set, else no API access"},
      {{"--lookup-timeout"},
       "SECONDS",
       "time budget for reading one pod's owners",
       seconds_value(c.lookup_timeout)},
      {{"--owner-cache-ttl"},
       "SECONDS",
       "how long an owner object read is reused",
       seconds_value(c.owner_cache_ttl)},
      {{"--owner-cache-bytes"},
       "N",
       "memory the cached owner objects may take; beyond it, those that expire first go",
       count_value(c.owner_cache_bytes, std::size_t{1024} * 1024, std::size_t{1} << 40)},
      {{"--owners"},
       "FILE",
       "read pods' owners from this file (YAML documents or a kubectl List), not the API: a local "
       "server, no cluster",
       string_value(c.owners)},
      {{"--cluster-domain"},
       "DOMAIN",
       "the cluster's DNS domain, which pods' full names end in",
       domain_value(c.cluster_domain)},
      {{"--wait"},
       "auto|off",
       "the readiness wait: auto adds trainenv-wait where a pod's policy says (docs/contract.md "
       "§3.1); off adds none anywhere",
       choice_value(c.wait, {"auto", "off"})},
      {{"--wait-image"},
       "IMAGE",
       "the image trainenv-wait runs (trainenv's own: the shipped manifests set the deployed one)",
       string_value(c.wait_image)},
  };
}

// One HOST:PORT of trainenv wait's --connect: a name (or an IPv4 address) and a port.
std::string check_target(const std::string& v) {
  const auto colon = v.rfind(':');
  const auto port = colon == std::string::npos
                        ? std::nullopt
                        : core::parse_decimal(std::string_view(v).substr(colon + 1), 65535);
  if (!port || *port < 1 || colon == 0) return "expected HOST:PORT, e.g. bert-node-0-0.bert:29500";
  return {};
}

value_kind list_value(std::vector<std::string>& target, bool with_port) {
  return {[&target, with_port](const std::string& v) {
            if (v.empty() || v.size() > 253 + 6) return std::string("expected a host name");
            if (with_port) {
              if (auto problem = check_target(v); !problem.empty()) return problem;
            }
            target.push_back(v);
            return std::string();
          },
          nullptr};
}

value_kind duration_value(std::int64_t& target) {
  return {[&target](const std::string& v) {
            const auto seconds = core::parse_duration_seconds(v, core::max_wait_seconds);
            if (!seconds)
              return std::string("expected seconds or a duration up to 24h, e.g. 600 or 10m");
            target = *seconds;
            return std::string();
          },
          [&target] { return std::to_string(target); }};
}

std::vector<flag> wait_flags(wait_config& c) {
  return {
      {{"--resolve"},
       "HOST",
       "a name that must resolve (repeatable)",
       list_value(c.resolve, false)},
      {{"--connect"},
       "HOST:PORT",
       "a name that must resolve and whose port must accept a connection (repeatable)",
       list_value(c.connect, true)},
      {{"--hostfile"},
       "FILE",
       "an MPI hostfile (\"host slots=N\" or \"host:N\" lines): every host must resolve",
       string_value(c.hostfile)},
      {{"--hostfile-port"},
       "PORT",
       "and accept on this port (sshd's)",
       count_value(c.hostfile_port, 1, 65535),
       "resolving only"},
      {{"--skip"},
       "HOST",
       "a hostfile host not to check: the pod itself (repeatable)",
       list_value(c.skip, false)},
      {{"--timeout"},
       "DURATION",
       "give up after this long (seconds, or 10m)",
       duration_value(c.timeout_seconds)},
      {{"--job"},
       "KIND/NAME",
       "the job, for the trainenv doctor command a time-out names (jobset/bert)",
       string_value(c.job)},
      {{"-n", "--namespace"}, "NAMESPACE", "the job's namespace", string_value(c.namespace_name)},
      {{"--termination-log"},
       "FILE",
       "where the time-out's message goes (the kubelet's terminationMessagePath)",
       string_value(c.termination_log)},
      {{"--parallel"}, "N", "checks in flight at most", count_value(c.parallel, 1, 256)},
      {{"--progress"},
       "SECONDS",
       "time between two progress lines",
       seconds_value(c.progress_every)},
      {{"--connect-timeout"},
       "SECONDS",
       "time one connection attempt may take",
       seconds_value(c.connect_timeout)},
  };
}

std::vector<flag> doctor_flags(doctor_config& c) {
  return {
      {{"-n", "--namespace"}, "NAMESPACE", "the job's namespace", string_value(c.namespace_name)},
      {{"--from"},
       "FILE",
       "the job's objects as `kubectl get -o json` lists them (its owners, pods, Services, "
       "EndpointSlices, events), read instead of the cluster",
       string_value(c.from)},
      {{"--kubeconfig"},
       "FILE",
       "read the job from this kubeconfig's cluster, as its user (default: $KUBECONFIG, "
       "~/.kube/config, else the pod's service account in a cluster)",
       string_value(c.kubeconfig)},
      {{"--lookup-timeout"},
       "SECONDS",
       "budget for each read of the API",
       seconds_value(c.lookup_timeout)},
      {{"--logs"},
       "",
       "read the pods' logs and name the known start-up failures in them "
       "(policies/startup-failures.yaml; the trainenv-doctor-logs ClusterRole)",
       switch_value(c.logs)},
      {{"--until-healthy"},
       "",
       "read and diagnose again, every 5 s, until the job is healthy",
       switch_value(c.until_healthy)},
      {{"--timeout"},
       "DURATION",
       "how long --until-healthy tries (seconds or 10m, 1h)",
       duration_value(c.timeout)},
      {{"--policies"},
       "DIR",
       "policy directory, instead of the policies built in",
       string_value(c.policies),
       "built in: the shipped policies/"},
      {{"--cluster-domain"}, "DOMAIN", "the cluster's DNS domain", domain_value(c.cluster_domain)},
      {{"-o", "--output"},
       "table|json",
       "how to print the diagnosis",
       choice_value(c.output, {"table", "json"})},
  };
}

std::vector<flag> preview_flags(preview_config& c) {
  return {
      {{"-f", "--file"}, "FILE", "input file, or - for standard input", string_value(c.file)},
      {{"--policy"},
       "NAME",
       "use this policy instead of the pod's annotation or framework label",
       string_value(c.policy)},
      {{"--policies"},
       "DIR",
       "policy directory, instead of the policies built in",
       string_value(c.policies),
       "built in: the shipped policies/"},
      {{"--owners"},
       "FILE",
       "the pod's owner objects (YAML documents or a kubectl List), read instead of the "
       "Kubernetes API",
       string_value(c.owners)},
      {{"--kubeconfig"},
       "FILE",
       "read the pod's owners from this kubeconfig's cluster",
       string_value(c.kubeconfig)},
      {{"--lookup-timeout"}, "SECONDS", "budget for those reads", seconds_value(c.lookup_timeout)},
      {{"--cluster-domain"}, "DOMAIN", "the cluster's DNS domain", domain_value(c.cluster_domain)},
      {{"--job"}, "", "FILE is a whole job", switch_value(c.job)},
      {{"-o", "--output"},
       "json|table|yaml",
       "how to print the answer",
       choice_value(c.output, {"json", "table", "yaml"}),
       "json for a pod, table for --job"},
  };
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
         "  wait             wait until a pod's peers resolve and answer (trainenv-wait)\n"
         "  doctor           why a live job does not start or train\n"
         "  version          print the version\n"
         "\n"
         "Run 'trainenv <command> --help' for a command's flags.\n";
}

std::string serve_help() {
  serve_config defaults;
  return "Usage: trainenv serve [flags]\n"
         "\n"
         "Runs the admission webhook: POST /mutate, GET /healthz and /readyz over HTTPS on\n"
         "--listen, and /metrics, /healthz, /readyz over plain HTTP on --metrics-listen. The\n"
         "previews (POST /preview, /preview/job) read the cluster as their caller: a server with\n"
         "API access serves them only on --preview-listen, with the caller's bearer token; one\n"
         "without (a local server, owners from --owners or none) on --listen.\n"
         "\n"
         "Flags:\n" +
         render_flags(serve_flags(defaults));
}

std::string preview_help() {
  preview_config defaults;
  return "Usage: trainenv preview [-f FILE|-] [-o json|table|yaml] [--policy NAME] [--policies "
         "DIR]\n"
         "                        [--owners FILE | --kubeconfig FILE]\n"
         "       trainenv preview --job -f FILE [-o table|json|yaml] [--policies DIR] [--owners "
         "FILE |\n"
         "                        --kubeconfig FILE]\n"
         "\n"
         "Reads a Pod or an AdmissionReview (JSON or YAML; each of a multi-document file) and "
         "prints\n"
         "what the webhook would answer: {allowed, policy, patch, object, warnings, message,\n"
         "sources, injected} as JSON (an array for several pods), as YAML, or as a table a person\n"
         "reads. The shipped policies are built in; --policies DIR reads others. Exits 0 when\n"
         "allowed, 1 on a violation (the message goes to standard error too), 2 on unreadable\n"
         "input or a job's file (use --job). Without --owners or --kubeconfig, a pod that needs\n"
         "its owners' counts is denied.\n"
         "\n"
         "With --job, FILE is what you would kubectl apply: a TrainJob (its runtime from --owners\n"
         "or the cluster), a JobSet, an Indexed batch/v1 Job or a Volcano Job. Every pod its\n"
         "controllers would create is decided as /mutate would, one row each, then the job is\n"
         "checked as a whole (distinct ranks 0..N-1, one master that is rank 0's DNS name, one\n"
         "world size, a hostfile of exactly the workers, every pod named as its layout calls it,\n"
         "the world only training pods, an elastic job's one rendezvous, no pod denied, a "
         "training\n"
         "pod and no unlabelled role launching as the training roles do). Exits 1\n"
         "naming the pods that disagree, 2 on unreadable input. -o json adds each pod's patch,\n"
         "the pod as created and as admitted, and the job's objects.\n"
         "\n"
         "Flags:\n" +
         render_flags(preview_flags(defaults));
}

std::vector<flag> check_flags(check_config& c) {
  return {{{"--policies"},
           "DIR",
           "policy directory (or DIR alone)",
           string_value(c.policies),
           "built in: the shipped policies/"}};
}

std::string check_help() {
  check_config defaults;
  return "Usage: trainenv check-policies [DIR | --policies DIR]\n"
         "\n"
         "Validates every policy file (*.yaml, *.yml, *.json) in DIR the way 'trainenv serve' "
         "does\n"
         "at start-up; without DIR, the policies built into this binary (the shipped policies/).\n"
         "Prints one line per policy; exits 1 on any error.\n"
         "\n"
         "Flags:\n" +
         render_flags(check_flags(defaults));
}

std::string wait_help() {
  wait_config defaults;
  return "Usage: trainenv wait [--resolve HOST]... [--connect HOST:PORT]... [--hostfile FILE\n"
         "                     [--hostfile-port PORT] [--skip HOST]...] [--timeout D] [--job K/N "
         "-n NS]\n"
         "\n"
         "The readiness wait trainenv injects as the init container trainenv-wait "
         "(docs/contract.md\n"
         "§3.1): resolves each name as the trainer will (getaddrinfo, the pod's /etc/resolv.conf)\n"
         "and connects to each port, retrying with a 1 s to 5 s backoff, until all answer; then\n"
         "checks them all once more and exits 0. A line every --progress names what is missing "
         "and\n"
         "why (no DNS record yet, DNS not answering, refused, no answer). After --timeout it "
         "exits\n"
         "75 and writes the missing targets, their causes and durations, and the trainenv doctor\n"
         "command for the job, into --termination-log (at most 4 KiB). Exits 2 on bad flags or an\n"
         "unreadable hostfile.\n"
         "\n"
         "Flags:\n" +
         render_flags(wait_flags(defaults));
}

std::string doctor_help() {
  doctor_config defaults;
  return "Usage: trainenv doctor KIND/NAME [-n NAMESPACE] [--kubeconfig FILE | --from FILE]\n"
         "                       [-o table|json] [--policies DIR] [--logs] [--until-healthy "
         "[--timeout D]]\n"
         "\n"
         "Why a live job does not start or train (docs/doctor.md). KIND is trainjob, jobset, job,\n"
         "vcjob or pod (a pod stands for its job). The job is laid out as preview --job lays it\n"
         "out and held against its live pods, their Service, EndpointSlices and events: pods not\n"
         "admitted by trainenv or admitted with values the live layout no longer gives, pods\n"
         "denied, the whole-job checks on the pods' actual env, a missing or mismatched Service, "
         "a\n"
         "name not published, a trainenv-wait that gave up or still waits, and what keeps pods\n"
         "pending. One row per pod, then each finding with its pods, evidence and fix. It reads\n"
         "the cluster as you (the trainenv-doctor ClusterRoles, docs/doctor.md); a refused\n"
         "optional read (events, EndpointSlices, Services, Workloads, PodGroups) is listed as not\n"
         "checked. --from reads instead what this lists:\n"
         "  kubectl get -n NS -o json trainjobs,jobsets,jobs,pods,services,endpointslices,events\n"
         "(add clustertrainingruntimes, trainingruntimes, workloads, podgroups and configmaps "
         "when\n"
         "the job has them). Exits 0 without an error finding, 1 with one, 2 when the job is not\n"
         "found, a required read fails or the input is unreadable; --until-healthy exits 0 once\n"
         "healthy, else as the last diagnosis when --timeout passes.\n"
         "\n"
         "Flags:\n" +
         render_flags(doctor_flags(defaults));
}

std::string describe(const serve_config& config) {
  serve_config copy = config;  // the flags bind to a config they may write; this one is read
  std::string out;
  for (const auto& f : serve_flags(copy)) {
    std::string key = f.names.back().substr(2);
    std::replace(key.begin(), key.end(), '-', '_');
    const auto value = f.value.show();
    out += (out.empty() ? "" : " ") + key + "=" + (value.empty() ? "-" : value);
  }
  return out;
}

parsed<serve_config> parse_serve(const std::vector<std::string>& args) {
  serve_config c;
  auto failure = parse_flags(args, serve_flags(c), serve_help(), nullptr);
  if (!failure && !c.owners.empty() && !c.kubeconfig.empty())
    failure = parse_failure{false, "give --owners or --kubeconfig, not both"};
  if (!failure && !c.client_names.empty() && c.client_ca.empty())
    failure = parse_failure{false, "--client-names needs --client-ca (the CA that signs them)"};
  if (!failure && !c.preview_listen.host.empty() && !c.owners.empty())
    failure = parse_failure{false,
                            "--preview-listen is for a server that reads from the API; with "
                            "--owners the previews are served on --listen"};
  return finish(std::move(c), std::move(failure));
}

parsed<preview_config> parse_preview(const std::vector<std::string>& args) {
  preview_config c;
  auto failure = parse_flags(args, preview_flags(c), preview_help(), nullptr);
  if (!failure && !c.owners.empty() && !c.kubeconfig.empty())
    failure = parse_failure{false, "give --owners or --kubeconfig, not both"};
  if (!failure && c.job && !c.policy.empty())
    failure = parse_failure{false, "--policy applies to one pod; a job's pods choose their own"};
  return finish(std::move(c), std::move(failure));
}

parsed<wait_config> parse_wait(const std::vector<std::string>& args) {
  wait_config c;
  auto failure = parse_flags(args, wait_flags(c), wait_help(), nullptr);
  if (!failure && c.resolve.empty() && c.connect.empty() && c.hostfile.empty())
    failure = parse_failure{false, "nothing to wait for: give --resolve, --connect or --hostfile"};
  if (!failure && c.hostfile.empty() && (c.hostfile_port != 0 || !c.skip.empty()))
    failure = parse_failure{false, "--hostfile-port and --skip go with --hostfile"};
  return finish(std::move(c), std::move(failure));
}

parsed<doctor_config> parse_doctor(const std::vector<std::string>& args) {
  doctor_config c;
  auto failure = parse_flags(args, doctor_flags(c), doctor_help(), [&](const std::string& target) {
    if (!c.target.empty()) return std::string("only one job may be given");
    c.target = target;
    return std::string();
  });
  if (!failure && c.target.empty())
    failure = parse_failure{false, "which job? e.g. trainenv doctor jobset/bert -n team-a"};
  if (!failure && !c.from.empty() && !c.kubeconfig.empty())
    failure = parse_failure{false, "give --from or --kubeconfig, not both"};
  if (!failure && !c.from.empty() && c.logs)
    failure = parse_failure{
        false, "--logs reads the pods' logs from the cluster; a --from file holds none"};
  if (!failure && !c.from.empty() && c.logs)
    failure = parse_failure{
        false, "--logs reads the pods' logs from the cluster; a --from file holds none"};
  if (!failure && !c.from.empty() && c.until_healthy)
    failure = parse_failure{
        false, "--until-healthy reads the cluster again; a --from file does not change"};
  return finish(std::move(c), std::move(failure));
}

parsed<check_config> parse_check(const std::vector<std::string>& args) {
  check_config c;
  std::string dir;
  // --policies DIR as every other command takes it (the loader's errors say "set --policies"),
  // or DIR alone.
  auto failure = parse_flags(args, check_flags(c), check_help(), [&](const std::string& given) {
    if (!dir.empty()) return std::string("only one directory may be given");
    dir = given;
    return std::string();
  });
  if (!failure && !dir.empty()) {
    if (c.policies != check_config{}.policies)
      failure = parse_failure{false, "give the directory as DIR or --policies DIR, not both"};
    c.policies = dir;
  }
  return finish(std::move(c), std::move(failure));
}

}  // namespace trainenv::inputs
