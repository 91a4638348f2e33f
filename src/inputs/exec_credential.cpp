#include "trainenv/inputs/exec_credential.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <csignal>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include <nlohmann/json.hpp>

#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/json_text.hpp"

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX declares it nowhere

namespace trainenv::inputs {
namespace {

using nlohmann::json;
using steady = std::chrono::steady_clock;

// An ExecCredential is a few KiB (a token, or a certificate and its key).
constexpr std::size_t max_output_bytes = std::size_t{1024} * 1024;

// Whether the plugin may talk to the user (client-go's isInteractive: only standard input is
// looked at). An error when it must and cannot.
core::result<bool> interactive(const exec_plugin& plugin) {
  const bool terminal = ::isatty(STDIN_FILENO) == 1;
  if (plugin.interactive_mode == "Never") return false;
  if (plugin.interactive_mode == "Always" && !terminal) {
    return core::error{
        "exec plugin cannot support interactive mode: standard input is not a terminal"};
  }
  return terminal;
}

// The environment: ours, the kubeconfig's env over it, then KUBERNETES_EXEC_INFO (later names
// win, as Go's exec dedupes them).
std::vector<std::string> environment(const exec_plugin& plugin, const std::string& exec_info) {
  std::vector<std::pair<std::string, std::string>> added = plugin.env;
  added.emplace_back("KUBERNETES_EXEC_INFO", exec_info);
  const auto overridden = [&](std::string_view entry) {
    const auto name = entry.substr(0, entry.find('='));
    return std::any_of(added.begin(), added.end(), [&](const auto& e) { return e.first == name; });
  };
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (!overridden(*e)) env.emplace_back(*e);
  }
  for (std::size_t i = 0; i < added.size(); ++i) {
    const bool later = std::any_of(added.begin() + static_cast<std::ptrdiff_t>(i) + 1, added.end(),
                                   [&](const auto& e) { return e.first == added[i].first; });
    if (!later) env.push_back(added[i].first + "=" + added[i].second);
  }
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

std::string not_found(const exec_plugin& plugin) {
  return "exec: executable " + plugin.command +
         " not found (a client-go credential plugin that is not installed" +
         (plugin.install_hint.empty() ? std::string(")") : "; " + plugin.install_hint + ")");
}

// Reads the child's standard output until it closes or `deadline`; false on time-out or when
// the output passes its bound.
bool read_output(int fd, steady::time_point deadline, std::string& out, std::string& why) {
  std::array<char, 4096> buffer{};
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
    if (left.count() <= 0) {
      why = "did not finish in time";
      return false;
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // the deadline check above decides
    const auto n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;
    out.append(buffer.data(), static_cast<std::size_t>(n));
    if (out.size() > max_output_bytes) {
      why = "printed more than " + std::to_string(max_output_bytes) + " bytes";
      return false;
    }
  }
}

}  // namespace

std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM)
  std::tm tm{};
  int offset_sign = 0;
  int offset_hours = 0;
  int offset_minutes = 0;
  const std::string s(text);
  char separator = 0;
  int consumed = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2d%c%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &separator, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 7 ||
      (separator != 'T' && separator != 't') || consumed != 19) {
    return std::nullopt;
  }
  std::size_t at = 19;
  if (at < s.size() && s[at] == '.') {
    ++at;
    while (at < s.size() && s[at] >= '0' && s[at] <= '9') ++at;
  }
  if (at < s.size() && (s[at] == 'Z' || s[at] == 'z') && at + 1 == s.size()) {
    offset_sign = 0;
  } else if (at + 6 == s.size() && (s[at] == '+' || s[at] == '-') && s[at + 3] == ':' &&
             std::sscanf(s.c_str() + at + 1, "%2d:%2d", &offset_hours, &offset_minutes) == 2) {
    offset_sign = s[at] == '+' ? 1 : -1;
  } else {
    return std::nullopt;
  }
  if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
      tm.tm_min > 59 || tm.tm_sec > 60)
    return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  const auto seconds = ::timegm(&tm);
  if (seconds == static_cast<std::time_t>(-1)) return std::nullopt;
  const auto offset = std::chrono::minutes(offset_sign * (offset_hours * 60 + offset_minutes));
  return std::chrono::system_clock::from_time_t(seconds) - offset;
}

core::result<exec_result> read_exec_credential(std::string_view text,
                                               std::string_view api_version) {
  auto parsed = core::parse_json(text);
  if (!parsed) return core::error{"decoding stdout: " + parsed.message()};
  const auto& doc = *parsed;
  const auto* version = core::string_member(doc, "apiVersion");
  const auto* kind = core::string_member(doc, "kind");
  if (version == nullptr || kind == nullptr || *kind != "ExecCredential") {
    return core::error{"decoding stdout: not an ExecCredential (apiVersion " +
                       core::quote(version != nullptr ? *version : "") + ", kind " +
                       core::quote(kind != nullptr ? *kind : "") + ")"};
  }
  if (*version != api_version) {
    return core::error{"exec plugin is configured to use API version " + std::string(api_version) +
                       ", plugin returned version " + *version};
  }
  const auto* status = core::member(doc, "status");
  if (status == nullptr || !status->is_object())
    return core::error{"exec plugin didn't return a status field"};
  exec_result out;
  out.token = core::string_or_empty(*status, "token");
  out.client_cert_pem = core::string_or_empty(*status, "clientCertificateData");
  out.client_key_pem = core::string_or_empty(*status, "clientKeyData");
  if (out.client_cert_pem.empty() != out.client_key_pem.empty())
    return core::error{"exec plugin returned only certificate or key, not both"};
  if (out.token.empty() && out.client_cert_pem.empty())
    return core::error{"exec plugin didn't return a token or cert/key pair"};
  if (const auto* expiry = core::string_member(*status, "expirationTimestamp");
      expiry != nullptr && !expiry->empty()) {
    const auto when = parse_rfc3339(*expiry);
    if (!when) {
      return core::error{"decoding stdout: expirationTimestamp " + core::quote(*expiry) +
                         " is not an RFC 3339 time"};
    }
    out.expires = *when;
  }
  return out;
}

core::result<exec_result> run_exec_plugin(const exec_plugin& plugin, std::chrono::seconds bound) {
  auto talk = interactive(plugin);
  if (!talk) return std::move(talk).take_error();
  json info = {{"apiVersion", plugin.api_version},
               {"kind", "ExecCredential"},
               {"spec", {{"interactive", *talk}}}};
  if (!plugin.cluster_info.empty()) {
    if (auto cluster = core::parse_json(plugin.cluster_info)) info["spec"]["cluster"] = *cluster;
  }
  auto env = environment(plugin, info.dump());
  std::vector<std::string> argv_strings{plugin.command};
  argv_strings.insert(argv_strings.end(), plugin.args.begin(), plugin.args.end());
  auto argv = pointers(argv_strings);
  auto envp = pointers(env);

  std::array<int, 2> out{-1, -1};
  if (::pipe2(out.data(), O_CLOEXEC) != 0)
    return core::error{std::string("exec: cannot make a pipe: ") + std::strerror(errno)};
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  if (!*talk) ::posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  // A plugin that does not talk to the terminal runs in a process group of its own, so that one
  // past its time is killed with what it started (a shell's `sleep` would otherwise hold the
  // pipes of whoever runs trainenv); one that talks stays in the terminal's foreground group.
  posix_spawnattr_t attributes;
  ::posix_spawnattr_init(&attributes);
  if (!*talk) {
    ::posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    ::posix_spawnattr_setpgroup(&attributes, 0);
  }
  pid_t pid = 0;
  const bool path_given = plugin.command.find('/') != std::string::npos;
  const int spawned = path_given ? ::posix_spawn(&pid, plugin.command.c_str(), &actions,
                                                 &attributes, argv.data(), envp.data())
                                 : ::posix_spawnp(&pid, plugin.command.c_str(), &actions,
                                                  &attributes, argv.data(), envp.data());
  ::posix_spawn_file_actions_destroy(&actions);
  ::posix_spawnattr_destroy(&attributes);
  ::close(out[1]);
  if (spawned != 0) {
    ::close(out[0]);
    if (spawned == ENOENT) return core::error{not_found(plugin)};
    return core::error{"exec: " + plugin.command + ": " + std::strerror(spawned)};
  }
  std::string output;
  std::string why;
  const bool finished = read_output(out[0], steady::now() + bound, output, why);
  ::close(out[0]);
  if (!finished) ::kill(*talk ? pid : -pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!finished) return core::error{"exec: executable " + plugin.command + " " + why};
  if (WIFSIGNALED(status)) {
    return core::error{"exec: executable " + plugin.command + " was killed by signal " +
                       std::to_string(WTERMSIG(status))};
  }
  if (WEXITSTATUS(status) != 0) {
    return core::error{"exec: executable " + plugin.command + " failed with exit code " +
                       std::to_string(WEXITSTATUS(status))};
  }
  return read_exec_credential(output, plugin.api_version);
}

core::result<bool> obtain_exec_credentials(kube_credentials& credentials) {
  if (!credentials.exec) return true;
  auto got = run_exec_plugin(*credentials.exec);
  if (!got) {
    return core::error{"kubeconfig " + credentials.source +
                       ": getting credentials: " + got.message()};
  }
  credentials.token = std::move(got->token);
  credentials.client_cert_pem = std::move(got->client_cert_pem);
  credentials.client_key_pem = std::move(got->client_key_pem);
  credentials.expires = got->expires;
  return true;
}

}  // namespace trainenv::inputs
