// Expands a policy against a pod's topology into what the pod should contain ("wants"),
// before any comparison with what it already has.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainenv/core/job/controller_env.hpp"
#include "trainenv/core/job/topology.hpp"
#include "trainenv/core/model/pod_view.hpp"
#include "trainenv/core/policy/policy.hpp"
#include "trainenv/core/text/result.hpp"

namespace trainenv::core {

// Where a policy's `args.after` flags go in a container's command line (its command followed by
// its args): right after the prefix, in `command` when the line continues there (Kubeflow
// Trainer's torchtune runtimes write `tune run ... <recipe> ...` all in `command`), else in
// `args`. The launcher's own flags run from the prefix to the program (the first word that is
// not a flag or a flag's value); only they count as "already given", never the program's args.
struct args_site {
  std::string list = "args";    // or "command"
  std::size_t at = 0;           // insert here in `list`
  std::size_t flags_begin = 0;  // the launcher's flags: [flags_begin, flags_end) of the line
  std::size_t flags_end = 0;
};

// One v1.EnvVar to add: a literal value, or a valueFrom. Not a json object: a request renders
// about ten, and as nlohmann values each was a map, two nodes and their strings to build, write
// out and free.
struct env_want {
  std::string name;
  std::string value;                         // when there is no value_from
  std::optional<nlohmann::json> value_from;  // a v1.EnvVarSource

  // As the pod holds it, appended as JSON text: {"name", "value"} or {"name", "valueFrom"}.
  void append_json(std::string& out) const;
};

// An init container of trainenv's own to add (the hostfile's expander, the readiness wait), as
// the JSON text the patch carries: added whole when the pod has none of that name.
struct init_container_want {
  std::string name;
  std::string text;                  // the v1.Container
  std::vector<std::string> volumes;  // the volumes it mounts, which the patch must then add

  [[nodiscard]] static init_container_want of(const nlohmann::json& container);
};

struct container_wants {
  std::string list = "containers";  // or "initContainers"
  std::size_t index = 0;
  std::vector<env_want> env;

  std::vector<nlohmann::json> ports;   // v1.ContainerPort
  std::vector<nlohmann::json> mounts;  // v1.VolumeMount
  std::vector<std::string> args;
  std::optional<args_site> args_at;  // none: append to args, and every arg counts as given
  // The entries of its env its controller wrote (docs/contract.md §4): replaced where they
  // disagree with what is wanted, removed where the policy wants none (or they duplicate the
  // template's).
  std::vector<written_entry> written;
};

struct wants {
  bool applies = true;  // false when the policy's `when` is false for this pod
  std::vector<container_wants> containers;
  std::vector<init_container_want> init_containers;
  std::vector<nlohmann::json> volumes;  // v1.Volume
  nlohmann::json annotations = nlohmann::json::object();
  std::vector<std::string> dns_searches;  // spec.dnsConfig.searches the pod should have
  std::string dns_policy;                 // spec.dnsPolicy it should have; empty: as it is
  // When its controller wrote env (written entries in `containers`): who, the names it leaves
  // where the policy wants none, the env names the policy writes at all (only those are the
  // policy's to remove), and the owner whose layout decides.
  const controller_writes* writer = nullptr;
  std::vector<std::string> owned_env;
  std::string decided_by;
  std::string removed_because;  // why the policy wants none of a name here, for the warning
  std::vector<std::string>
      warnings;  // things the policy could not do, e.g. a missing command prefix
};

// `sidecars`: the known sidecars (the policy set's list), which a policy that writes every
// container leaves alone unless one is the target. `written`: the env the pod's controller
// wrote, if any (controller_env).
[[nodiscard]] result<wants> render(const policy& p, const topology& t, const pod_view& pod,
                                   const std::vector<std::string>& sidecars,
                                   const written_env* written = nullptr);

// The site right after `prefix`, when the container's command line starts with `prefix` (token by
// token); nullopt otherwise.
[[nodiscard]] std::optional<args_site> args_site_after(const json_ref& container,
                                                       const std::vector<std::string>& prefix);

// The hostfile's delivery (docs/contract.md §3): a text of at most this many bytes goes into the
// pod's trainenv.io/hostfile annotation; a longer one as a compact rule of at most as many bytes
// (trainenv.io/hostfile-rule) that an init container expands. The API server refuses a pod whose
// annotations add up to more than annotations_limit.
inline constexpr std::size_t hostfile_inline_limit = std::size_t{64} * 1024;
inline constexpr std::size_t annotations_limit = std::size_t{256} * 1024;
inline constexpr std::string_view hostfile_annotation = "trainenv.io/hostfile";
inline constexpr std::string_view hostfile_rule_annotation = "trainenv.io/hostfile-rule";
// The POSIX shell script the init container runs: $1 is the rule file, $2 the hostfile. Each
// rule line "jobs|pods|head|middle|tail" stands for the lines head<j>middle<i>tail, j from 0 to
// jobs-1 (written as nothing when jobs is "-"), i from 0 to pods-1, job-major.
[[nodiscard]] std::string_view hostfile_expand_script();
// The hostfile that script writes for `rule`, line for line (tests/inputs/test_hostfile.cpp runs
// both), for doctor and preview --job to read what a pod finds. At most max_count lines or 64
// MiB: doctor reads the rule from a live pod, which anyone who may create pods can write.
[[nodiscard]] std::string expand_hostfile_rule(std::string_view rule);

// The container's command line: its command's tokens followed by its args' (non-strings as "").
[[nodiscard]] std::vector<std::string_view> command_line(const json_ref& container);

}  // namespace trainenv::core
