#include "trainenv/inputs/preview.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "trainenv/core/model/pod_view.hpp"
#include "trainenv/core/text/json_access.hpp"
#include "trainenv/inputs/yaml.hpp"

namespace trainenv::inputs {

using nlohmann::json;

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

// The values every decided pod that has them shares, and the name of each that differs.
struct shared_values {
  std::vector<std::pair<std::string, std::string>> shared;
  std::set<std::string> varying;
};

shared_values split_values(const core::job_preview& preview) {
  std::map<std::string, std::set<std::string>> seen;
  std::vector<std::string> order;
  for (const auto& p : preview.pods) {
    for (const auto& [name, value] : p.values) {
      if (seen.count(name) == 0) order.push_back(name);
      seen[name].insert(value);
    }
  }
  shared_values out;
  for (const auto& name : order) {
    if (seen[name].size() == 1) {
      out.shared.emplace_back(name, *seen[name].begin());
    } else {
      out.varying.insert(name);
    }
  }
  return out;
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
  if (!p.d.allowed) {
    notes = "DENIED: " + p.d.message;
  } else if (p.d.policy.empty()) {
    notes = p.d.message.empty() ? "not a training pod" : p.d.message;
  }
  for (const auto& w : p.d.warnings) {
    const auto cut =
        w.size() > 3 && w.compare(w.size() - 3, 3, "...") == 0 ? w.size() - 3 : w.size();
    if (notes.compare(0, cut, w, 0, cut) != 0) notes += (notes.empty() ? "" : "; ") + w;
  }
  return notes.empty() ? "-" : notes;
}

// Rows of cells, each column as wide as its widest cell (the last left ragged).
std::string columns(const std::vector<std::vector<std::string>>& rows) {
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
    // What was checked: an elastic job has no ranks or master, but one rendezvous.
    return std::string("checks: ok (") +
           (preview.elastic ? "the same bounds and one rendezvous at a pod of the job"
                            : "distinct ranks 0..N-1, one master at rank 0's DNS name, one world "
                              "size, hostfile = the workers") +
           ", every pod named as its layout calls it, the world only training pods, every wait "
           "on a pod of the job and none a deadlock, no pod denied)\n";
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
  const auto values = split_values(preview);
  std::string out = job_title(preview) + "\n";
  if (!values.shared.empty()) {
    out += "every pod told:";
    for (const auto& [name, value] : values.shared) out += " " + name + "=" + value;
    out += "\n";
  }
  std::vector<std::vector<std::string>> rows = {{"POD", "ROLE", "POLICY", "NODE RANK", "RANK",
                                                 "DNS NAME", "VALUES", "WAITS FOR", "WARNINGS"}};
  for (const auto& p : preview.pods) {
    std::string varying;
    for (const auto& [name, value] : p.values) {
      if (values.varying.count(name) != 0)
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
