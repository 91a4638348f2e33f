#include "job_preview_detail.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "trainenv/core/model/pod_view.hpp"
#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/keys.hpp"

// The mistakes a job's author makes that every pod's own decision accepts (docs/contract.md §5):
// a role that launches training like the training roles but carries no ancestor label (it trains
// alone, and the others count without it), and a job with no training pod at all. Each pod alone
// is fine; only the whole job shows them.
namespace trainenv::core {
namespace {

using nlohmann::json;

std::string_view base_name(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// The words of a command line, a shell's `-c` script split on blanks.
std::vector<std::string> words_of(const json& container) {
  std::vector<std::string> words;
  for (const char* field : {"command", "args"}) {
    const auto* list = member(container, field);
    if (list == nullptr || !list->is_array()) continue;
    for (const auto& item : *list) {
      if (item.is_string()) words.push_back(item.get<std::string>());
    }
  }
  const auto shell = [](std::string_view w) {
    const auto name = base_name(w);
    return name == "sh" || name == "bash" || name == "dash" || name == "zsh";
  };
  if (words.size() >= 3 && shell(words[0]) && words[1].find('c') != std::string::npos &&
      words[1].front() == '-') {
    std::vector<std::string> split;
    std::string word;
    for (const char c : words[2]) {
      if (c == ' ' || c == '\t' || c == '\n' || c == ';' || c == '&' || c == '|') {
        if (!word.empty()) split.push_back(std::move(word));
        word.clear();
      } else {
        word += c;
      }
    }
    if (!word.empty()) split.push_back(std::move(word));
    return split;
  }
  return words;
}

// " --standalone" when torchrun's flags from `from` on make it a run of its own on one node
// (`--standalone`, `--nnodes=1`, `--nnodes 1`): an evaluator or a smoke test launched so is not a
// training role that lost its label.
std::string one_node_run(const std::vector<std::string>& words, std::size_t from) {
  const auto one = [](std::string_view n) { return n == "1" || n == "1:1"; };
  for (auto i = from; i < words.size(); ++i) {
    const auto& w = words[i];
    // The script ends torchrun's flags (its own may look alike); a word after a flag without
    // `=` is that flag's value (--nproc-per-node 4).
    const bool flag_value =
        i > from && words[i - 1].rfind("--", 0) == 0 && words[i - 1].find('=') == std::string::npos;
    if (!w.empty() && w[0] != '-' && !flag_value) break;
    if (w == "--standalone" || (w.rfind("--nnodes=", 0) == 0 && one(w.substr(9))) ||
        (w == "--nnodes" && i + 1 < words.size() && one(words[i + 1])))
      return " --standalone";
  }
  return {};
}

// What a container runs, as the training roles and the others can be compared by it: the program
// ("torchrun", "mpirun", "deepspeed"), past `exec`, `env` and VAR=value words; for Python, the
// module it runs (`-m torch.distributed.run` is torchrun) or its script. Empty when the image's
// own entrypoint runs (nothing to compare).
std::string program_of(const json& container) {
  const auto words = words_of(container);
  std::size_t at = 0;
  while (at < words.size() && (words[at] == "exec" || words[at] == "env" ||
                               (words[at].find('=') != std::string::npos && words[at][0] != '-')))
    ++at;
  if (at == words.size()) return {};
  auto program = std::string(base_name(words[at]));
  if (program == "torchrun") return program + one_node_run(words, at + 1);
  if (program.rfind("python", 0) != 0) return program;
  for (auto i = at + 1; i < words.size(); ++i) {
    if (words[i] == "-m" && i + 1 < words.size()) {
      const auto& module = words[i + 1];
      return module == "torch.distributed.run" ? "torchrun" + one_node_run(words, i + 2)
                                               : program + " -m " + module;
    }
    if (words[i].empty() || words[i][0] != '-')
      return program + " " + std::string(base_name(words[i]));
  }
  return program;
}

// The container a pod trains in: kubectl's default container, else the first that is no sidecar
// a policy lists (a mesh's proxy runs in every pod alike).
const json* main_container(const json& pod, const std::vector<std::string>& sidecars) {
  const auto* spec = member(pod, "spec");
  const auto* containers = spec != nullptr ? member(*spec, "containers") : nullptr;
  if (containers == nullptr || !containers->is_array()) return nullptr;
  const pod_view view(pod);
  const auto* chosen = view.annotation(keys::default_container);
  for (const auto& c : *containers) {
    const auto name = string_or_empty(c, "name");
    if (chosen != nullptr ? name == *chosen
                          : std::find(sidecars.begin(), sidecars.end(), name) == sidecars.end())
      return &c;
  }
  return nullptr;
}

std::string program_of_pod(const previewed_pod& p, const std::vector<std::string>& sidecars) {
  const auto* c = main_container(p.created.pod, sidecars);
  return c != nullptr ? program_of(*c) : std::string();
}

// "workers (pods a, b), tensorboard (pod c)"
std::string roles_text(const std::map<std::string, std::vector<std::string>>& by_role) {
  std::string out;
  for (const auto& [role, pods] : by_role) out += (out.empty() ? "" : ", ") + role;
  return out;
}

}  // namespace

void check_roles(const created_job& /*job*/, std::vector<previewed_pod>& pods,
                 const policy_set& policies, std::vector<job_problem>& problems) {
  // An MPI job's workers that are hosts of a launcher's hostfile need nothing (they run sshd):
  // passing them is the job working, not a warning.
  std::set<std::string> hosts;
  for (const auto& p : pods) hosts.insert(p.hostfile.begin(), p.hostfile.end());
  for (auto& p : pods) {
    p.host_only =
        p.d.allowed && p.d.policy.empty() && !p.dns_name.empty() && hosts.count(p.dns_name) != 0;
  }
  const auto& sidecars = policies.sidecars();
  std::map<std::string, std::string> training;  // program -> a training role that runs it
  bool a_training_pod = false;
  for (const auto& p : pods) {
    // Every pod but one recognised as no training pod is one trainenv takes as training: wired,
    // denied, opted out, or left to its framework's own plugins.
    if (p.d.passed == pass_reason::not_training) continue;
    a_training_pod = true;
    if (p.created.role == launcher_role) continue;  // an MPI launcher's program is its own
    if (auto program = program_of_pod(p, sidecars); !program.empty())
      training.emplace(std::move(program), p.created.role);
  }
  std::map<std::string, std::vector<std::string>> alone;     // role -> its pods
  std::map<std::string, std::string> alone_program;          // role -> what it runs
  std::map<std::string, std::vector<std::string>> launches;  // with no training pod at all
  for (const auto& p : pods) {
    if (p.d.passed != pass_reason::not_training || p.host_only || p.created.prerequisite) continue;
    const auto program = program_of_pod(p, sidecars);
    if (program.empty()) continue;
    if (training.count(program) != 0) {
      alone[p.created.role].push_back(p.created.name);
      alone_program[p.created.role] = program;
    } else {
      launches[p.created.role + " runs " + program].push_back(p.created.name);
    }
  }
  const std::string label = std::string(keys::ancestor_step) + ": trainer";
  for (const auto& [role, names] : alone) {
    const auto& program = alone_program[role];
    problems.push_back(
        {"role " + role + " runs " + program + " as training role " + training[program] +
             " does, but is not a training pod: it is told nothing, trains alone, and the "
             "world counts only the labelled roles; fix: label its template " +
             label + " (or run it as another program)",
         names});
  }
  if (a_training_pod) return;
  if (pods.empty()) {
    problems.push_back(
        {"the job creates no pod: every role has 0 replicas (or gives none), so "
         "nothing trains; fix: set the roles' replicas",
         {}});
    return;
  }
  std::vector<std::string> names;
  names.reserve(pods.size());
  for (const auto& p : pods) names.push_back(p.created.name);
  problems.push_back({"no pod of the job is a training pod: none carries label " + label +
                          ", itself or on its Job, so trainenv tells no pod anything" +
                          (launches.empty() ? std::string() : " (" + roles_text(launches) + ")") +
                          "; fix: label the templates of the roles that train",
                      std::move(names)});
}

void note_unknown_keys(created_job& job) {
  if (job.objects.empty()) return;
  for (auto& w : object_unknown_key_warnings(
           job.objects.front(), " on " + job.kind + " " + job.namespace_name + "/" + job.name))
    job.notes.push_back(std::move(w));
}

}  // namespace trainenv::core
