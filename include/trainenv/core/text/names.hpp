// The names and numbers a policy, an OwnerKind or a pod annotation may write, checked as
// Kubernetes checks them: DNS labels, environment variable names, port names and numbers,
// annotation keys, unsigned decimals. The bottom of the core: it includes no core header, so
// every layer may use it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace trainenv::core {

// Levenshtein distance: the edits from one name to another, for the "did you mean" of an unknown
// field or key. Callers bound the lengths (names are short).
[[nodiscard]] std::size_t edit_distance(std::string_view a, std::string_view b);

// The apiVersion of every document trainenv reads (TrainingPolicy, OwnerKind).
inline constexpr std::string_view policy_api_version = "trainenv.io/v1alpha1";

// Kubernetes' DNS label (RFC 1123): 1-63 of [a-z0-9-], no leading or trailing '-'. Object,
// container, volume, role and framework names.
[[nodiscard]] bool is_dns_label(std::string_view s);

// An environment variable name as the apiserver accepts it: [A-Za-z_.-][A-Za-z0-9_.-]*.
[[nodiscard]] bool is_env_name(std::string_view s);
// The cluster's DNS domain unless serve --cluster-domain says (Kubernetes' own default).
inline constexpr std::string_view default_cluster_domain = "cluster.local";

// DNS labels joined by dots, at most 253 characters in all: a cluster domain ("cluster.local").
[[nodiscard]] bool is_dns_subdomain(std::string_view s);

// Kubernetes' IANA_SVC_NAME: at most 15 characters of [a-z0-9-], at least one letter, no
// leading, trailing or doubled '-'.
[[nodiscard]] bool is_port_name(std::string_view s);

// A container port's protocol: TCP, UDP or SCTP.
[[nodiscard]] bool is_port_protocol(std::string_view s);

inline constexpr std::int64_t max_port = 65535;

// Kubernetes' qualified name, as annotation keys are: an optional DNS-subdomain prefix and '/',
// then at most 63 of [A-Za-z0-9._-] that start and end with a letter or digit.
[[nodiscard]] bool is_annotation_key(std::string_view key);

// An unsigned decimal of at most 18 digits, no sign or space, up to `max`; nullopt otherwise.
[[nodiscard]] std::optional<std::int64_t> parse_decimal(std::string_view s, std::int64_t max);

// A time span in whole seconds, from 1 to `max`, written as seconds ("600") or as a Go duration of
// whole hours, minutes and seconds in that order ("10m", "1h30m", "90s"); nullopt otherwise.
[[nodiscard]] std::optional<std::int64_t> parse_duration_seconds(std::string_view s,
                                                                 std::int64_t max);

// The largest count of pods, replicas or nodes believed; above it a value is refused as
// implausible, which also keeps every product of counts below 2^63.
inline constexpr std::int64_t max_count = 1'000'000;

// `s` without the whitespace (space, tab, CR, LF, ...) it starts and ends with.
[[nodiscard]] std::string_view trim(std::string_view s);

}  // namespace trainenv::core
