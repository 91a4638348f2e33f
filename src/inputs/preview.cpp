#include "trainenv/inputs/preview.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "trainenv/core/model/pod_view.hpp"
#include "trainenv/core/text/json_access.hpp"
#include "trainenv/inputs/yaml.hpp"

namespace trainenv::inputs {

using nlohmann::json;

namespace {
// Rows of cells, each column as wide as its widest cell (the last left ragged).
std::string columns(const std::vector<std::vector<std::string>>& rows);
}  // namespace

core::result<preview_input> read_preview(std::string_view text) {
  auto document = parse_document(text);
  if (!document) return std::move(document).take_error();
  if (!document->is_object()) return core::error{"expected a Pod or an AdmissionReview object"};

  const auto* kind = core::string_member(*document, "kind");
  preview_input input;
  if (kind != nullptr && *kind == "AdmissionReview") {
    auto request = core::decode_review_json(*document);
    if (!request) return std::move(request).take_error();
    input.view = std::move(request->object);
    // The pod as shown, as the apiserver has it at admission: with the request's namespace when
    // its metadata names none (the view reads it so too).
    auto& object = (*document)["request"]["object"];
    if (auto metadata = object.is_object() ? object.find("metadata") : object.end();
        metadata != object.end() && metadata->is_object() && !metadata->contains("namespace") &&
        !request->namespace_name.empty())
      (*metadata)["namespace"] = request->namespace_name;
    input.pod = std::move(object);
    input.request = std::move(*request);
    return input;
  }
  if (kind != nullptr && *kind != "Pod") {
    return core::error{"expected a Pod or an AdmissionReview, got kind \"" + kind->substr(0, 64) +
                       "\""};
  }
  input.pod = std::move(*document);
  input.view = core::pod_view(input.pod);
  return input;
}

core::result<std::vector<json>> read_preview_documents(std::string_view text,
                                                       const std::string& file) {
  auto documents = parse_documents(text);
  if (!documents) return std::move(documents).take_error();
  std::vector<json> pods;
  std::vector<std::string> skipped;
  for (auto& document : *documents) {
    const auto* kind = document.is_object() ? core::string_member(document, "kind") : nullptr;
    if (kind == nullptr || *kind == "Pod" || *kind == "AdmissionReview") {
      pods.push_back(std::move(document));
      continue;
    }
    if (*kind == "TrainJob" || *kind == "JobSet" || *kind == "Job") {
      return core::error{"holds a " + kind->substr(0, 64) +
                         ": preview every pod of it, checked as a whole, with: trainenv preview "
                         "--job -f " +
                         file};
    }
    skipped.push_back("\"" + kind->substr(0, 64) + "\"");
  }
  if (pods.empty()) {
    std::string kinds;
    for (const auto& k : skipped) kinds += (kinds.empty() ? "" : ", ") + k;
    return core::error{
        "expected a Pod or an AdmissionReview" +
        (kinds.empty() ? std::string(", found no document") : ", got kind " + kinds)};
  }
  return pods;
}

preview_answer answer_preview(preview_input input, core::decision d) {
  json object = nullptr;
  if (d.allowed) object = d.mutated() ? input.pod.patch(d.patch()) : std::move(input.pod);
  return preview_answer{std::move(d), std::move(object)};
}

core::result<preview_answer> preview(std::string_view text, const core::policy_set& policies,
                                     const core::mutate_options& options) {
  return preview(text, policies, options, [](const core::owner_ref& ref, core::owner_values& o) {
    o.add_failure(ref, core::lookup_failure::no_access, "no API access (give --owners FILE)");
  });
}

namespace {

// A pod's readiness wait (docs/contract.md §3.1): what it checks, or null and why it has none.
json wait_json(const core::decision& d) {
  if (!d.wait) {
    if (d.policy.empty() || !d.allowed) return nullptr;
    return {{"none", core::no_wait_name(d.no_wait_reason)}, {"why", d.no_wait_why}};
  }
  const auto& plan = *d.wait;
  json targets = json::array();
  for (const auto& t : plan.targets) {
    targets.push_back({{"host", t.host}, {"check", t.port == 0 ? "dns" : "connect"}});
    if (t.port != 0) targets.back()["port"] = t.port;
  }
  json out = {{"targets", std::move(targets)},
              {"timeoutSeconds", plan.timeout_seconds},
              {"decidedBy", plan.decided_by},
              {"present", plan.present}};
  if (!plan.hostfile.empty()) {
    out["hostfile"] = {{"path", plan.hostfile},
                       {"check", plan.hostfile_port == 0 ? "dns" : "connect"},
                       {"skip", plan.skip}};
    if (plan.hostfile_port != 0) out["hostfile"]["port"] = plan.hostfile_port;
  }
  return out;
}

// The wait in a table's cell: "a.b" (resolves), "a.b:29500" (accepts), "hostfile:2222 (3)".
std::string wait_cell(const core::previewed_pod& p) {
  if (!p.d.wait) return "-";
  std::string out;
  for (const auto& t : p.d.wait->targets)
    out += (out.empty() ? "" : " ") + t.host + (t.port == 0 ? "" : ":" + std::to_string(t.port));
  if (!p.d.wait->hostfile.empty()) {
    const auto hosts = p.hostfile.size() - (p.d.wait->skip.empty() ? 0 : 1);
    out += (out.empty() ? "" : " ") + std::string("hostfile") +
           (p.d.wait->hostfile_port == 0 ? "" : ":" + std::to_string(p.d.wait->hostfile_port)) +
           " (" + std::to_string(std::min(hosts, p.hostfile.size())) + " hosts)";
  }
  return out;
}

}  // namespace

json to_json(const preview_answer& answer) {
  const auto& d = answer.decision;
  const auto& injected = d.injected;
  json sources = json::array();
  for (const auto& s : d.sources)
    sources.push_back({{"name", s.name}, {"value", s.value}, {"source", s.source}});
  return json{{"allowed", d.allowed},
              {"policy", d.policy},
              {"patch", d.patch()},
              {"object", answer.object},
              {"warnings", d.warnings},
              {"message", d.message},
              {"sources", std::move(sources)},
              {"injected",
               {{"env", injected.env},
                {"ports", injected.ports},
                {"mounts", injected.mounts},
                {"args", injected.args},
                {"volumes", injected.volumes},
                {"annotations", injected.annotations},
                {"initContainers", injected.init_containers},
                {"dnsSearches", injected.dns_searches},
                {"removedEnv", injected.removed_env},
                {"dnsPolicy", injected.dns_policy}}},
              {"wait", wait_json(d)}};
}

namespace {

// Each injected variable with the value the patched pod carries (the first container that has
// it), as table rows under a header.
std::vector<std::vector<std::string>> injected_env_rows(const core::decision& d, const json& pod) {
  std::vector<std::vector<std::string>> rows = {{"  ENV", "VALUE", "CONTAINER"}};
  const auto* spec = pod.is_object() ? core::member(pod, "spec") : nullptr;
  const auto* containers = spec != nullptr ? core::member(*spec, "containers") : nullptr;
  if (containers == nullptr || !containers->is_array()) return rows;
  for (const auto& name : d.injected.env) {
    std::string value = "?";
    std::string where = "-";
    for (const auto& c : *containers) {
      const auto* env = core::member(c, "env");
      if (env == nullptr || !env->is_array()) continue;
      for (const auto& e : *env) {
        if (core::string_or_empty(e, "name") != name) continue;
        value = e.contains("value") ? core::string_or_empty(e, "value") : "(from a field)";
        where = core::string_or_empty(c, "name");
      }
      if (where != "-") break;
    }
    rows.push_back({"  " + name, value, where});
  }
  return rows;
}

}  // namespace

std::string to_table(const preview_answer& answer) {
  const auto& d = answer.decision;
  const auto& pod = d.allowed ? answer.object : json();
  std::string out;
  if (const auto* metadata = pod.is_object() ? core::member(pod, "metadata") : nullptr) {
    const auto ns = core::string_or_empty(*metadata, "namespace");
    auto name = core::string_or_empty(*metadata, "name");
    if (name.empty()) name = core::string_or_empty(*metadata, "generateName");
    out = "Pod " + (ns.empty() ? "" : ns + "/") + name + ": ";
  }
  if (!d.allowed) {
    out += "DENIED: " + d.message + "\n";
  } else if (d.policy.empty()) {
    out +=
        "passed unchanged: " + (d.message.empty() ? std::string("not a training pod") : d.message) +
        "\n";
  } else {
    out += "policy " + d.policy + ", " + std::to_string(d.patch_ops) + " patch operation" +
           (d.patch_ops == 1 ? "" : "s") + "\n";
  }
  const auto rows = injected_env_rows(d, pod);
  if (rows.size() > 1) out += columns(rows);
  const auto list = [&](const char* what, const std::vector<std::string>& items) {
    if (items.empty()) return;
    out += std::string("  ") + what + ":";
    for (const auto& i : items) out += " " + i;
    out += "\n";
  };
  list("mounts", d.injected.mounts);
  list("volumes", d.injected.volumes);
  list("init containers", d.injected.init_containers);
  list("args", d.injected.args);
  list("annotations", d.injected.annotations);
  list("removed env", d.injected.removed_env);
  if (!d.sources.empty()) {
    out += "counts from:\n";
    for (const auto& s : d.sources) out += "  " + s.name + "=" + s.value + ": " + s.source + "\n";
  }
  if (d.wait) {
    std::string targets;
    for (const auto& t : d.wait->targets)
      targets += " " + t.host + (t.port == 0 ? "" : ":" + std::to_string(t.port));
    if (!d.wait->hostfile.empty()) targets += " (every host of " + d.wait->hostfile + ")";
    out += "waits for:" + targets + "\n";
  }
  for (const auto& w : d.warnings) out += "warning: " + w + "\n";
  return out;
}

core::result<json> read_job(std::string_view text) {
  auto document = parse_document(text);
  if (!document) return std::move(document).take_error();
  if (!document->is_object())
    return core::error{"expected one object: a TrainJob, a JobSet, a Job or a Volcano Job"};
  return std::move(*document);
}

namespace {

std::string job_title(const core::job_preview& preview) {
  const auto& job = preview.job;
  return job.kind + " " + job.namespace_name + "/" + job.name + ": " +
         std::to_string(preview.pods.size()) + (preview.pods.size() == 1 ? " pod" : " pods");
}

// What one role's pods are told: the values all of them share, the names of those that differ
// from pod to pod (the table's VALUES column), and, for a role told nothing, why.
struct role_told {
  std::string role;
  std::string policy;
  std::size_t pods = 0;
  std::vector<std::pair<std::string, std::string>> shared;
  std::set<std::string> varying;
  std::string nothing_because;  // set when no pod of the role gets a policy's values
};

std::vector<role_told> told_by_role(const core::job_preview& preview) {
  std::vector<role_told> out;
  std::map<std::string, std::map<std::string, std::set<std::string>>> seen;
  std::map<std::string, std::vector<std::string>> order;
  for (const auto& p : preview.pods) {
    auto at = std::find_if(out.begin(), out.end(),
                           [&](const role_told& r) { return r.role == p.created.role; });
    if (at == out.end()) {
      role_told r;
      r.role = p.created.role;
      at = out.insert(out.end(), std::move(r));
    }
    ++at->pods;
    if (!p.d.policy.empty()) {
      at->policy = p.d.policy;
    } else if (at->nothing_because.empty()) {
      at->nothing_because =
          !p.d.allowed  ? "denied"
          : p.host_only ? "a host of the launcher's hostfile: it runs sshd and needs nothing"
                        : (p.d.message.empty() ? "not a training pod" : p.d.message);
    }
    for (const auto& [name, value] : p.values) {
      auto& values = seen[p.created.role][name];
      if (values.empty()) order[p.created.role].push_back(name);
      values.insert(value);
    }
  }
  for (auto& r : out) {
    if (!r.policy.empty()) r.nothing_because.clear();
    for (const auto& name : order[r.role]) {
      const auto& values = seen[r.role][name];
      if (values.size() == 1) {
        r.shared.emplace_back(name, *values.begin());
      } else {
        r.varying.insert(name);
      }
    }
  }
  return out;
}

// One line per role: "  worker  4 pods  torch  PET_NNODES=5 ..." ("the same as master" when it
// is told what a role above it is).
std::string told_text(const std::vector<role_told>& roles) {
  // A job whose roles all have zero replicas creates no pod: nothing is told.
  if (roles.empty()) return "told, by role: nothing (the job creates no pod)\n";
  std::vector<std::vector<std::string>> rows;
  for (std::size_t i = 0; i < roles.size(); ++i) {
    const auto& r = roles[i];
    std::string told;
    if (!r.nothing_because.empty()) {
      told = "nothing: " + r.nothing_because;
    } else {
      for (const auto& [name, value] : r.shared)
        told += (told.empty() ? "" : " ") + name + "=" + value;
      for (std::size_t j = 0; j < i; ++j) {
        if (roles[j].policy == r.policy && roles[j].shared == r.shared && !told.empty()) {
          told = "the same as " + roles[j].role;
          break;
        }
      }
      if (told.empty())
        told = r.varying.empty() ? "nothing: its policy gives this role no values"
                                 : "only the values in the table";
    }
    rows.push_back({"  " + r.role, std::to_string(r.pods) + (r.pods == 1 ? " pod" : " pods"),
                    r.policy.empty() ? "-" : r.policy, told});
  }
  return "told, by role:\n" + columns(rows);
}

std::string optional_number(const std::optional<std::int64_t>& n) {
  return n ? std::to_string(*n) : std::string("-");
}

}  // namespace

json to_json(const core::job_preview& preview) {
  json pods = json::array();
  for (const auto& p : preview.pods) {
    json values = json::object();
    for (const auto& [name, value] : p.values) values[name] = value;
    pods.push_back({{"name", p.created.name},
                    {"role", p.created.role},
                    {"policy", p.d.policy},
                    {"allowed", p.d.allowed},
                    {"nodeRank", p.node_rank ? json(*p.node_rank) : json()},
                    {"rank", p.rank ? json(*p.rank) : json()},
                    {"dnsName", p.dns_name},
                    {"values", std::move(values)},
                    {"warnings", p.d.warnings},
                    {"message", p.d.message},
                    {"wait", wait_json(p.d)},
                    // The admission answer whole, so that other tools can run or inspect the
                    // pods as they would be created: the patch and the patched object.
                    {"patch", p.d.allowed ? p.d.patch() : json()},
                    {"object", p.admitted},
                    // As its controller creates it, before admission: what a tool sends to a
                    // webhook of its own, or to trainenv again after another webhook's edits.
                    {"created", p.created.pod}});
  }
  json problems = json::array();
  for (const auto& problem : preview.problems)
    problems.push_back({{"message", problem.message}, {"pods", problem.pods}});
  return {{"kind", preview.job.kind},
          {"name", preview.job.name},
          {"namespace", preview.job.namespace_name},
          {"ok", preview.ok()},
          {"pods", std::move(pods)},
          {"problems", std::move(problems)},
          {"checks", preview.checks},
          {"notes", preview.job.notes},
          {"elastic", preview.elastic ? json{{"bounds", preview.elastic->bounds},
                                             {"size", preview.elastic->size},
                                             {"rendezvous", preview.elastic->rendezvous}}
                                      : json()},
          // What the controllers made besides the pods (JobSets, Jobs, ConfigMaps, Services).
          {"objects", preview.job.objects}};
}

namespace {

// What the row of a pod says besides its numbers: a denial, why it was not a training pod, its
// warnings (a pass's warning is its message, cut to the 120 characters kubectl shows).
std::string pod_notes(const core::previewed_pod& p) {
  std::string notes;
  if (!p.d.allowed) notes = "DENIED: " + p.d.message;
  for (const auto& w : p.d.warnings) {
    const auto cut =
        w.size() > 3 && w.compare(w.size() - 3, 3, "...") == 0 ? w.size() - 3 : w.size();
    if (notes.compare(0, cut, w, 0, cut) != 0) notes += (notes.empty() ? "" : "; ") + w;
  }
  return notes.empty() ? "-" : notes;
}

// Rows of cells, each column as wide as its widest cell (the last left ragged).
std::string columns(const std::vector<std::vector<std::string>>& rows) {
  if (rows.empty()) return {};
  std::vector<std::size_t> width(rows.front().size(), 0);
  for (const auto& r : rows) {
    for (std::size_t i = 0; i + 1 < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  std::string out;
  for (const auto& r : rows) {
    for (std::size_t i = 0; i < r.size(); ++i) {
      out += r[i];
      if (i + 1 < r.size()) out += std::string(width[i] - r[i].size() + 2, ' ');
    }
    out += "\n";
  }
  return out;
}

std::string checks_text(const core::job_preview& preview) {
  if (preview.ok()) {
    // What was checked: only the checks that had something to check (no ranks, no hostfile...).
    std::string ran;
    for (const auto& check : preview.checks) ran += (ran.empty() ? "" : ", ") + check;
    return "checks: ok (" + ran + ")\n";
  }
  std::string out = "checks: " + std::to_string(preview.problems.size()) +
                    (preview.problems.size() == 1 ? " problem\n" : " problems\n");
  constexpr std::size_t named = 8;
  for (const auto& problem : preview.problems) {
    out += "  - " + problem.message;
    if (!problem.pods.empty()) {
      out += " [";
      for (std::size_t i = 0; i < problem.pods.size() && i < named; ++i)
        out += (i == 0 ? "" : ", ") + problem.pods[i];
      if (problem.pods.size() > named)
        out += ", ... " + std::to_string(problem.pods.size() - named) + " more";
      out += "]";
    }
    out += "\n";
  }
  return out;
}

}  // namespace

std::string to_table(const core::job_preview& preview) {
  const auto roles = told_by_role(preview);
  std::string out = job_title(preview) + "\n" + told_text(roles);
  std::vector<std::vector<std::string>> rows = {{"POD", "ROLE", "POLICY", "NODE RANK", "RANK",
                                                 "DNS NAME", "VALUES", "WAITS FOR", "WARNINGS"}};
  for (const auto& p : preview.pods) {
    std::string varying;
    const auto& role = *std::find_if(roles.begin(), roles.end(),
                                     [&](const role_told& r) { return r.role == p.created.role; });
    for (const auto& [name, value] : p.values) {
      if (role.varying.count(name) != 0)
        varying += (varying.empty() ? "" : " ") + name + "=" + value;
    }
    rows.push_back({p.created.name, p.created.role, p.d.policy.empty() ? "-" : p.d.policy,
                    optional_number(p.node_rank), optional_number(p.rank),
                    p.dns_name.empty() ? "-" : p.dns_name, varying.empty() ? "-" : varying,
                    wait_cell(p), pod_notes(p)});
  }
  if (preview.elastic) {
    out += "elastic: " + std::to_string(preview.elastic->size) + " pods now, within " +
           preview.elastic->bounds + " (torchrun's --nnodes); c10d rendezvous at " +
           preview.elastic->rendezvous + "\n";
  }
  out += "\n" + columns(rows) + "\n";
  for (const auto& note : preview.job.notes) out += "note: " + note + "\n";
  return out + checks_text(preview);
}

}  // namespace trainenv::inputs
