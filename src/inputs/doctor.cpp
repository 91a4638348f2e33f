#include "trainenv/inputs/doctor.hpp"

#include <algorithm>
#include <map>
#include <optional>

#include "trainenv/core/model/owner_ref.hpp"
#include "trainenv/core/text/json_access.hpp"
#include "trainenv/inputs/preview.hpp"

namespace trainenv::inputs {
namespace {

using nlohmann::json;

const std::string& metadata_text(const json& object, std::string_view key) {
  static const std::string none;
  const auto* metadata = core::member(object, "metadata");
  return metadata != nullptr ? core::string_or_empty(*metadata, key) : none;
}

bool is(const json& object, std::string_view kind, std::string_view group) {
  return core::string_or_empty(object, "kind") == kind &&
         core::api_group(core::string_or_empty(object, "apiVersion")) == group;
}

// The dump's objects of one namespace (and the cluster's own), indexed for the walk up.
class dump_index {
 public:
  dump_index(const std::vector<json>& dump, std::string_view namespace_name) {
    for (const auto& object : dump) {
      const auto& ns = metadata_text(object, "namespace");
      if (!namespace_name.empty() && !ns.empty() && ns != namespace_name) continue;
      objects_.push_back(&object);
    }
  }

  [[nodiscard]] const std::vector<const json*>& objects() const { return objects_; }

  // The object a controller link names: same kind, group, name and uid.
  [[nodiscard]] const json* follow(const core::owner_ref& link) const {
    for (const auto* object : objects_) {
      if (is(*object, link.kind, link.group()) && metadata_text(*object, "name") == link.name &&
          (link.uid.empty() || metadata_text(*object, "uid") == link.uid))
        return object;
    }
    return nullptr;
  }

  // The top of `object`'s controller chain within the dump.
  [[nodiscard]] const json* top_of(const json* object) const {
    for (int depth = 0; depth < 8; ++depth) {
      const auto link = core::controller_of(*object, metadata_text(*object, "namespace"));
      const auto* up = link ? follow(*link) : nullptr;
      if (up == nullptr) return object;
      object = up;
    }
    return object;
  }

  // Whether `object`'s controller chain passes through `top` (or is it).
  [[nodiscard]] bool under(const json* object, const json* top) const {
    for (int depth = 0; depth < 8 && object != nullptr; ++depth) {
      if (object == top) return true;
      const auto link = core::controller_of(*object, metadata_text(*object, "namespace"));
      if (!link) return false;
      if (!link->uid.empty() && link->uid == metadata_text(*top, "uid")) return true;
      object = follow(*link);
    }
    return false;
  }

 private:
  std::vector<const json*> objects_;
};

std::string pad(std::string text, std::size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

std::string rank_text(const std::optional<std::int64_t>& want,
                      const std::optional<std::int64_t>& has) {
  const auto text = [](const std::optional<std::int64_t>& v) {
    return v ? std::to_string(*v) : std::string("-");
  };
  return text(want) + "/" + text(has);
}

}  // namespace

core::result<doctor_target> parse_doctor_target(std::string_view text) {
  const auto slash = text.find('/');
  const std::string kind(text.substr(0, slash));
  const std::string name =
      slash == std::string_view::npos ? "" : std::string(text.substr(slash + 1));
  struct kind_read {
    std::string kind;
    std::string group;
    std::string api_version;  // the version doctor reads (the one the controllers serve today)
  };
  static const std::map<std::string, kind_read, std::less<>> kinds = {
      {"trainjob", {"TrainJob", "trainer.kubeflow.org", "trainer.kubeflow.org/v1alpha1"}},
      {"trainjobs", {"TrainJob", "trainer.kubeflow.org", "trainer.kubeflow.org/v1alpha1"}},
      {"jobset", {"JobSet", "jobset.x-k8s.io", "jobset.x-k8s.io/v1alpha2"}},
      {"jobsets", {"JobSet", "jobset.x-k8s.io", "jobset.x-k8s.io/v1alpha2"}},
      {"job", {"Job", "batch", "batch/v1"}},
      {"jobs", {"Job", "batch", "batch/v1"}},
      {"vcjob", {"Job", "batch.volcano.sh", "batch.volcano.sh/v1alpha1"}},
      {"vcjobs", {"Job", "batch.volcano.sh", "batch.volcano.sh/v1alpha1"}},
      {"pod", {"Pod", "", "v1"}},
      {"pods", {"Pod", "", "v1"}},
  };
  const auto found = kinds.find(kind);
  if (found == kinds.end() || name.empty() || name.find('/') != std::string::npos) {
    return core::error{"\"" + std::string(text) +
                       "\" is not KIND/NAME with KIND one of trainjob, jobset, job, vcjob, pod "
                       "(e.g. jobset/bert)"};
  }
  return doctor_target{found->second.kind, found->second.group, found->second.api_version, name};
}

core::result<core::live_job> live_job_from(const std::vector<json>& objects,
                                           const doctor_target& target,
                                           std::string_view namespace_name,
                                           std::string_view source) {
  const dump_index index(objects, namespace_name);
  const json* named = nullptr;
  for (const auto* object : index.objects()) {
    if (is(*object, target.kind, target.group) && metadata_text(*object, "name") == target.name)
      named = object;
  }
  const auto where =
      namespace_name.empty() ? std::string() : " in namespace " + std::string(namespace_name);
  if (named == nullptr) {
    return core::error{"no " + target.kind + (target.group.empty() ? "" : "." + target.group) +
                       " " + target.name + where + " in " + std::string(source)};
  }
  const json* top = target.kind == "Pod" ? index.top_of(named) : named;
  if (top == named && target.kind == "Pod") {
    return core::error{"pod " + target.name + " has no owner in " + std::string(source) +
                       ": doctor explains jobs (a pod of a Job, JobSet, TrainJob or Volcano Job)"};
  }
  core::live_job job;
  job.target = *top;
  const auto& ns = metadata_text(*top, "namespace");
  for (const auto* object : index.objects()) {
    if (object == top) continue;
    const auto& object_ns = metadata_text(*object, "namespace");
    if (!object_ns.empty() && object_ns != ns) continue;
    if (is(*object, "Pod", "")) {
      if (index.under(object, top)) job.pods.push_back(*object);
    } else if (is(*object, "Service", "")) {
      job.services.push_back(*object);
    } else if (is(*object, "EndpointSlice", "discovery.k8s.io")) {
      job.endpoint_slices.push_back(*object);
    } else if (is(*object, "Event", "") || is(*object, "Event", "events.k8s.io")) {
      job.events.push_back(*object);
    } else if (is(*object, "Workload", "kueue.x-k8s.io") ||
               is(*object, "PodGroup", "scheduling.volcano.sh")) {
      if (index.under(object, top)) job.workloads.push_back(*object);
    } else {
      job.objects.push_back(*object);
    }
  }
  return job;
}

json to_json(const core::diagnosis& d) {
  auto out = to_json(d.expected);
  json rows = json::array();
  for (const auto& r : d.rows) {
    json row = {{"name", r.name},   {"role", r.role},        {"admitted", r.admitted},
                {"phase", r.phase}, {"ready", r.ready},      {"published", r.published},
                {"wait", r.wait},   {"findings", r.findings}};
    row["expectedNodeRank"] = r.expected_rank ? json(*r.expected_rank) : json(nullptr);
    row["nodeRank"] = r.actual_rank ? json(*r.actual_rank) : json(nullptr);
    rows.push_back(std::move(row));
  }
  json findings = json::array();
  for (const auto& f : d.findings) {
    findings.push_back({{"kind", f.kind},
                        {"level", std::string(core::severity_name(f.level))},
                        {"what", f.what},
                        {"fix", f.fix},
                        {"pods", f.pods}});
  }
  out["doctor"] = {{"healthy", d.healthy()},
                   {"layoutPods", d.layout_pods},
                   {"livePods", d.live_pods},
                   {"world", d.world ? json(*d.world) : json(nullptr)},
                   {"master", d.master ? json(*d.master) : json(nullptr)},
                   {"service", d.service},
                   {"policy", d.policy},
                   {"rows", std::move(rows)},
                   {"findings", std::move(findings)},
                   {"notChecked", d.not_checked}};
  return out;
}

std::string to_table(const core::diagnosis& d) {
  std::string out = d.kind + " " + d.namespace_name + "/" + d.name;
  out += "   policy " + (d.policy.empty() ? std::string("none") : d.policy);
  out += "   pods " + std::to_string(d.live_pods) + " of " + std::to_string(d.layout_pods);
  if (d.world) out += "   world " + *d.world;
  if (d.master) out += "   master " + *d.master;
  out += "   Service " + (d.service.empty() ? std::string("-") : d.service) + "\n\n";

  const std::vector<std::string> headers = {"POD",   "ROLE",  "RANK", "ADMITTED", "PHASE",
                                            "READY", "NAMED", "WAIT", "FINDINGS"};
  std::vector<std::vector<std::string>> cells;
  for (const auto& r : d.rows) {
    std::string kinds;
    for (const auto& k : r.findings) kinds += (kinds.empty() ? "" : ",") + k;
    cells.push_back({r.name, r.role, rank_text(r.expected_rank, r.actual_rank), r.admitted, r.phase,
                     r.ready, r.published, r.wait, kinds.empty() ? "-" : kinds});
  }
  std::vector<std::size_t> widths(headers.size());
  for (std::size_t c = 0; c < headers.size(); ++c) {
    widths[c] = headers[c].size();
    for (const auto& row : cells) widths[c] = std::max(widths[c], row[c].size());
  }
  const auto line = [&](const std::vector<std::string>& row) {
    std::string text;
    for (std::size_t c = 0; c < row.size(); ++c)
      text += c + 1 == row.size() ? row[c] : pad(row[c], widths[c] + 2);
    return text + "\n";
  };
  out += line(headers);
  for (const auto& row : cells) out += line(row);
  out +=
      "RANK: the node rank the layout gives / the one the pod's env says. NAMED: its DNS name "
      "is published.\n";

  std::size_t errors = 0;
  std::size_t warnings = 0;
  if (!d.findings.empty()) out += "\n";
  for (const auto& f : d.findings) {
    errors += f.level == core::severity::error ? 1 : 0;
    warnings += f.level == core::severity::warning ? 1 : 0;
    out += std::string(core::severity_name(f.level)) + " " + f.kind + ": " + f.what + "\n";
    out += "  fix: " + f.fix + "\n";
  }
  for (const auto& skipped : d.not_checked) out += "not checked: " + skipped + "\n";
  out += "\n";
  if (d.findings.empty()) {
    out += "healthy: every pod is where its layout puts it, told what it gives\n";
  } else {
    out += std::to_string(errors) + " error(s), " + std::to_string(warnings) + " warning(s), " +
           std::to_string(d.findings.size() - errors - warnings) + " note(s)\n";
  }
  return out;
}

}  // namespace trainenv::inputs
