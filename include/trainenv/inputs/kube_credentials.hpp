// Where the Kubernetes API is and how to prove who we are to it: the pod's service account
// (in a cluster) or a kubeconfig file (elsewhere), read as client-go reads them. Only values
// and files here; the connection is the server library's kube_client.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainenv/core/text/result.hpp"

namespace trainenv::inputs {

// A kubeconfig user's credential plugin (`user.exec`: client.authentication.k8s.io ExecCredential
// v1 or v1beta1), checked as client-go's loader checks it. Only the command line runs one
// (exec_credential.hpp); the webhook never does (docs/security.md).
struct exec_plugin {
  std::string api_version;  // client.authentication.k8s.io/v1 or /v1beta1
  std::string command;      // against the kubeconfig's directory when it holds a '/'
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  std::string interactive_mode;  // Never, IfAvailable (v1beta1's default) or Always
  std::string install_hint;
  // KUBERNETES_EXEC_INFO's spec.cluster (server, tls-server-name, certificate-authority-data),
  // as JSON text, when the kubeconfig sets provideClusterInfo.
  std::string cluster_info;
};

struct kube_credentials {
  std::string host;  // DNS name or IP address, IPv6 without brackets
  std::uint16_t port = 443;
  std::string base_path;        // a path prefix of the server URL ("" or "/k8s/clusters/c-1")
  std::string server_name;      // the name the certificate must carry (kubeconfig
                                // tls-server-name); empty: `host`
  std::string ca_pem;           // trusted CAs; empty: the system's trust store
  std::string client_cert_pem;  // with client_key_pem, presented when not empty
  std::string client_key_pem;
  std::string token;       // a literal bearer token (also the last value read from token_file)
  std::string token_file;  // re-read when it changes (service account tokens rotate)
  std::string source;      // "in-cluster" or the kubeconfig's path, for messages
  // The namespace a command works in when not told (kubectl's rule): the current context's
  // `namespace`, the service account's own in a cluster; empty: "default".
  std::string namespace_name;
  // The user's credential plugin, when the kubeconfig gives one and no token or certificate:
  // run_exec_plugin fills token or the certificate, and `expires` (zero: never).
  std::optional<exec_plugin> exec;
  std::chrono::system_clock::time_point expires{};

  // host:port as an HTTP Host header and a URL carry it (IPv6 in brackets).
  [[nodiscard]] std::string authority() const;
  // https://authority/base_path
  [[nodiscard]] std::string server_url() const;
  // What the server's certificate is checked against.
  [[nodiscard]] const std::string& verify_name() const {
    return server_name.empty() ? host : server_name;
  }
};

inline constexpr std::string_view service_account_dir =
    "/var/run/secrets/kubernetes.io/serviceaccount";

// In-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT from the environment, the
// token and ca.crt from `secrets_dir` (the service account mount; tests point it elsewhere).
[[nodiscard]] core::result<kube_credentials> load_in_cluster(
    std::string_view secrets_dir = service_account_dir);

// The same with the two values given (what the environment holds; empty when unset).
[[nodiscard]] core::result<kube_credentials> load_in_cluster(std::string_view service_host,
                                                             std::string_view service_port,
                                                             std::string_view secrets_dir);

// `--kubeconfig FILE`: its current-context's cluster and user. Relative file paths are
// resolved against the kubeconfig's directory; every file named is read now, so a wrong path
// fails at start-up with a line naming the field. A user with an exec plugin (and no token or
// certificate) comes back with `exec` set and no credential yet: see exec_credential.hpp.
[[nodiscard]] core::result<kube_credentials> load_kubeconfig(const std::string& path);

// Reads a token file: its content without surrounding white space; an error when it cannot be
// read or is empty.
[[nodiscard]] core::result<std::string> read_token_file(const std::string& path);

}  // namespace trainenv::inputs
