#include "trainenv/core/diagnose/pod_status.hpp"

#include <algorithm>

#include "trainenv/core/text/json_access.hpp"

// The fields read here are the kubelet's and the scheduler's (k8s.io/api core/v1 PodStatus,
// ContainerStatus, and the events they write: reasons FailedScheduling, FailedMount, BackOff).
namespace trainenv::core {
namespace {

using nlohmann::json;

// The waiting reasons that mean the image does not come.
bool image_trouble(std::string_view reason) {
  return reason == "ErrImagePull" || reason == "ImagePullBackOff" || reason == "InvalidImageName" ||
         reason == "ErrImageNeverPull";
}

}  // namespace

std::string quoted_message(std::string_view message, std::size_t max) {
  std::string out;
  for (const char c : message) {
    if (out.size() >= max) {
      out += "...";
      break;
    }
    if (c == '\n') {
      if (!out.empty() && out.back() != ' ') out += " / ";
    } else if (static_cast<unsigned char>(c) >= 0x20) {
      out += c;
    }
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == '/')) out.pop_back();
  return out;
}

pod_status::pod_status(const json& pod) : pod_(pod) {}

const json* pod_status::condition(std::string_view type) const {
  for (const auto& c : array_member(member(pod_, "status"), "conditions")) {
    if (string_or_empty(c, "type") == type) return &c;
  }
  return nullptr;
}

std::string pod_status::phase() const {
  const auto* status = member(pod_, "status");
  const auto* phase = status != nullptr ? string_member(*status, "phase") : nullptr;
  return phase != nullptr && !phase->empty() ? *phase : "Pending";
}

bool pod_status::ready() const {
  const auto* ready = condition("Ready");
  return ready != nullptr && string_or_empty(*ready, "status") == "True";
}

bool pod_status::finished() const {
  const auto p = phase();
  return p == "Succeeded" || p == "Failed";
}

bool pod_status::has_address() const {
  const auto* status = member(pod_, "status");
  return status != nullptr && !string_or_empty(*status, "podIP").empty();
}

bool pod_status::has_init_container(std::string_view name) const {
  const auto& list = array_member(member(pod_, "spec"), "initContainers");
  return std::any_of(list.begin(), list.end(),
                     [&](const json& c) { return string_or_empty(c, "name") == name; });
}

const json* pod_status::container_status(std::string_view name) const {
  const auto* status = member(pod_, "status");
  for (const auto* list : {&array_member(status, "initContainerStatuses"),
                           &array_member(status, "containerStatuses")}) {
    for (const auto& c : *list) {
      if (string_or_empty(c, "name") == name) return &c;
    }
  }
  return nullptr;
}

std::optional<std::string> pod_status::wait_gave_up(std::string_view name) const {
  const auto* c = container_status(name);
  if (c == nullptr) return std::nullopt;
  for (const auto* key : {"state", "lastState"}) {
    const auto* state = member(*c, key);
    const auto* terminated = state != nullptr ? member(*state, "terminated") : nullptr;
    const auto* code = terminated != nullptr ? member(*terminated, "exitCode") : nullptr;
    if (code != nullptr && code->is_number_integer() && code->get<int>() == 75) {
      const auto& message = string_or_empty(*terminated, "message");
      return message.empty()
                 ? std::string("exit 75 (" + string_or_empty(*terminated, "reason") + ")")
                 : quoted_message(message);
    }
  }
  return std::nullopt;
}

std::optional<std::string> pod_status::waiting_in(std::string_view name) const {
  const auto* c = container_status(name);
  const auto* state = c != nullptr ? member(*c, "state") : nullptr;
  const auto* running = state != nullptr ? member(*state, "running") : nullptr;
  if (running == nullptr) return std::nullopt;
  const auto& since = string_or_empty(*running, "startedAt");
  return since.empty() ? std::string("at an unknown time") : since;
}

std::string pod_status::wait_state(std::string_view name) const {
  if (!has_init_container(name)) return "-";
  if (wait_gave_up(name)) return "gave up";
  if (waiting_in(name)) return "waiting";
  const auto* c = container_status(name);
  const auto* state = c != nullptr ? member(*c, "state") : nullptr;
  const auto* terminated = state != nullptr ? member(*state, "terminated") : nullptr;
  const auto* code = terminated != nullptr ? member(*terminated, "exitCode") : nullptr;
  if (code != nullptr && code->is_number_integer() && code->get<int>() == 0) return "done";
  return "not started";
}

std::vector<std::string> pod_status::wait_targets(std::string_view name) const {
  std::vector<std::string> targets;
  std::string hostfile;
  std::string port;
  for (const auto& c : array_member(member(pod_, "spec"), "initContainers")) {
    if (string_or_empty(c, "name") != name) continue;
    for (const auto& arg : array_member(&c, "args")) {
      if (!arg.is_string()) continue;
      const auto& text = arg.get_ref<const std::string&>();
      for (const std::string_view flag : {"--resolve=", "--connect="}) {
        if (text.rfind(flag, 0) == 0) targets.push_back(text.substr(flag.size()));
      }
      if (text.rfind("--hostfile=", 0) == 0) hostfile = text.substr(11);
      if (text.rfind("--hostfile-port=", 0) == 0) port = text.substr(16);
    }
  }
  if (!hostfile.empty())
    targets.push_back("every host of " + hostfile + (port.empty() ? "" : " on port " + port));
  return targets;
}

const std::string& pod_status::name() const {
  static const std::string none;
  const auto* metadata = member(pod_, "metadata");
  return metadata != nullptr ? string_or_empty(*metadata, "name") : none;
}

std::vector<finding> pod_status::pending_causes(const std::vector<json>& events) const {
  std::vector<finding> out;
  if (phase() == "Pending") scheduling_causes(out);
  const auto* status = member(pod_, "status");
  for (const auto* list : {&array_member(status, "initContainerStatuses"),
                           &array_member(status, "containerStatuses")}) {
    for (const auto& c : *list) container_causes(c, out);
  }
  mount_causes(events, out);
  return out;
}

void pod_status::scheduling_causes(std::vector<finding>& out) const {
  const auto& gates = array_member(member(pod_, "spec"), "schedulingGates");
  if (!gates.empty()) {
    std::string names;
    for (const auto& g : gates) names += (names.empty() ? "" : ", ") + string_or_empty(g, "name");
    out.push_back({"scheduling-gated",
                   severity::warning,
                   "pod " + name() + " is held by scheduling gates: " + names,
                   "the controller that added them removes them (Kueue: once the workload is "
                   "admitted)",
                   {}});
  }
  if (const auto* scheduled = condition("PodScheduled");
      scheduled != nullptr && string_or_empty(*scheduled, "status") == "False" &&
      string_or_empty(*scheduled, "reason") == "Unschedulable") {
    out.push_back({"unschedulable",
                   severity::error,
                   "pod " + name() + " cannot be scheduled: " +
                       quoted_message(string_or_empty(*scheduled, "message")),
                   "free what the scheduler lacks (GPUs, memory, a node matching its "
                   "selectors and tolerations), or lower the pod's requests",
                   {}});
  }
}

void pod_status::container_causes(const json& c, std::vector<finding>& out) const {
  const auto& container = string_or_empty(c, "name");
  const auto* state = member(c, "state");
  const auto* waiting = state != nullptr ? member(*state, "waiting") : nullptr;
  if (waiting == nullptr) return;
  const auto& reason = string_or_empty(*waiting, "reason");
  const auto message = quoted_message(string_or_empty(*waiting, "message"));
  const auto whose = "pod " + name() + "'s container " + container;
  if (image_trouble(reason)) {
    out.push_back({"image-pull",
                   severity::error,
                   whose + " cannot get its image (" + reason + "): " + message,
                   "check the image name and tag and the pull secret; the node must reach "
                   "the registry",
                   {}});
  } else if (reason == "CreateContainerConfigError") {
    out.push_back({"container-config",
                   severity::error,
                   whose + " cannot be created: " + message,
                   "create the Secret or ConfigMap it names, or fix the reference",
                   {}});
  } else if (reason == "CrashLoopBackOff") {
    out.push_back({"crash-loop",
                   severity::error,
                   whose + " restarts over and over" + last_exit(c),
                   "kubectl logs " + name() + " -c " + container +
                       " --previous says why (doctor --logs reads the known lines)",
                   {}});
  }
}

std::string pod_status::last_exit(const json& c) {
  const auto* last = member(c, "lastState");
  const auto* terminated = last != nullptr ? member(*last, "terminated") : nullptr;
  if (terminated == nullptr) return {};
  const auto* code = member(*terminated, "exitCode");
  const auto& text = string_or_empty(*terminated, "message");
  return "; last exit " + (code != nullptr ? code->dump() : std::string("?")) +
         (text.empty() ? " (" + string_or_empty(*terminated, "reason") + ")"
                       : ": " + quoted_message(text));
}

// The kubelet's mount failures: a Secret that does not exist (the MPI job's SSH keys).
void pod_status::mount_causes(const std::vector<json>& events, std::vector<finding>& out) const {
  for (const auto& event : events) {
    if (string_or_empty(event, "reason") != "FailedMount") continue;
    const auto* involved = member(event, "involvedObject");
    if (involved == nullptr || string_or_empty(*involved, "kind") != "Pod" ||
        string_or_empty(*involved, "name") != name())
      continue;
    const auto& message = string_or_empty(event, "message");
    const bool secret = message.find("secret") != std::string::npos;
    out.push_back({"mount-failed",
                   severity::error,
                   "pod " + name() + " cannot mount a volume: " + quoted_message(message),
                   secret ? "create the Secret it names (an MPI job's SSH keys: its controller "
                            "makes them, or trainenv.io/ssh-secret names yours)"
                          : "create what the volume names",
                   {}});
    return;
  }
}

}  // namespace trainenv::core
