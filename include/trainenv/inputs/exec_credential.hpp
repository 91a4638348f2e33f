// A kubeconfig's exec credential plugin, run as client-go runs it (plugin/pkg/client/auth/exec):
// the environment inherited, the kubeconfig's env over it, the request in KUBERNETES_EXEC_INFO;
// standard error passed through to the user (a plugin may print a login URL there), standard
// input only when interactive; the ExecCredential it prints checked (apiVersion as configured,
// a token or a certificate and key pair, an RFC 3339 expiry). The errors are client-go's words.
//
// Only the command line runs one (`preview --kubeconfig`, `doctor`), as the user who runs it;
// `serve` refuses a kubeconfig whose user needs one (docs/security.md).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "trainenv/core/text/result.hpp"
#include "trainenv/inputs/kube_credentials.hpp"

namespace trainenv::inputs {

// What an ExecCredential's status gives.
struct exec_result {
  std::string token;
  std::string client_cert_pem;
  std::string client_key_pem;
  std::chrono::system_clock::time_point expires{};  // zero: it does not expire
};

// Runs `plugin` (waiting at most `bound` for it) and reads what it prints.
[[nodiscard]] core::result<exec_result> run_exec_plugin(
    const exec_plugin& plugin, std::chrono::seconds bound = std::chrono::seconds(120));

// The ExecCredential text a plugin printed, checked against the configured API version.
[[nodiscard]] core::result<exec_result> read_exec_credential(std::string_view text,
                                                             std::string_view api_version);

// When credentials.exec is set: runs it and puts its token or certificate, and their expiry,
// into `credentials`. Nothing to do otherwise. An error names the kubeconfig.
[[nodiscard]] core::result<bool> obtain_exec_credentials(kube_credentials& credentials);

// "2026-11-29T10:00:00Z" (RFC 3339, with an offset or fractions too) as a time point.
[[nodiscard]] std::optional<std::chrono::system_clock::time_point> parse_rfc3339(
    std::string_view text);

}  // namespace trainenv::inputs
