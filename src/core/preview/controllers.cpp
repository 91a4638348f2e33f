#include "trainenv/core/preview/controllers.hpp"

#include "controllers_detail.hpp"

#include <algorithm>
#include <set>

#include "trainenv/core/job/resources.hpp"
#include "trainenv/core/text/command_flags.hpp"
#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/keys.hpp"
#include "trainenv/core/text/names.hpp"

namespace trainenv::core {

using namespace controllers_detail;

namespace {

using nlohmann::json;

// Volcano's pytorch plugin (pkg/controllers/job/plugins/distributed-framework/pytorch): on every
// pod of a job with a master task it appends MASTER_ADDR, MASTER_PORT and WORLD_SIZE, and RANK on
// master (0) and worker (index + 1) pods, to every container, beside the port. Its --master,
// --worker and --port name the roles and the port. WORLD_SIZE counts the master and worker tasks
// since PR #4281 (v1.12); before, every task (`counts_every_task`).
// The flags both of Volcano's framework plugins below take, read as their Go flag sets read them.
struct volcano_plugin_flags {
  std::string master = "master";
  std::string worker = "worker";
  std::int64_t port;

  volcano_plugin_flags(const json& args, std::int64_t default_port) : port(default_port) {
    if (auto v = flag_value(args, "--master")) master = std::move(*v);
    if (auto v = flag_value(args, "--worker")) worker = std::move(*v);
    if (auto v = flag_value(args, "--port")) port = std::strtoll(v->c_str(), nullptr, 10);
  }
};

struct volcano_pytorch_plugin : volcano_plugin_flags {
  std::string master_addr;
  std::int64_t world = 0;

  explicit volcano_pytorch_plugin(const json& args) : volcano_plugin_flags(args, 23456) {}

  static std::optional<volcano_pytorch_plugin> of(const json& vj, const json& args,
                                                  bool counts_every_task) {
    volcano_pytorch_plugin p(args);
    const auto* tasks = find_path(vj, {"spec", "tasks"});
    bool has_master = false;
    const std::string job = text_at(vj, {"metadata", "name"});
    p.master_addr = job + "-" + p.master + "-0." + job;
    for (const auto& t : *tasks) {
      const auto name = text_at(t, {"name"});
      const auto replicas = int_at(t, {"replicas"}).value_or(0);
      if (name == p.master) {
        has_master = true;
        const auto subdomain = text_at(t, {"template", "spec", "subdomain"});
        if (!subdomain.empty()) p.master_addr = job + "-" + p.master + "-0." + subdomain;
      }
      if (counts_every_task || name == p.master || name == p.worker) p.world += replicas;
    }
    if (!has_master) return std::nullopt;  // the plugin leaves a job without a master alone
    return p;
  }

  void write(json& spec, const std::string& task, std::int64_t index) const {
    auto& containers = spec["containers"];
    if (!containers.is_array()) return;
    for (auto& c : containers) {
      auto& env = c["env"];
      if (!env.is_array()) env = json::array();
      env.push_back({{"name", "MASTER_ADDR"}, {"value", master_addr}});
      env.push_back({{"name", "MASTER_PORT"}, {"value", std::to_string(port)}});
      env.push_back({{"name", "WORLD_SIZE"}, {"value", std::to_string(world)}});
      if (task == master) env.push_back({{"name", "RANK"}, {"value", "0"}});
      if (task == worker) env.push_back({{"name", "RANK"}, {"value", std::to_string(index + 1)}});
      auto& ports = c["ports"];
      if (!ports.is_array()) ports = json::array();
      const bool has_port = std::any_of(ports.begin(), ports.end(), [](const json& port) {
        return port.value("name", "") == "pytorchjob-port";
      });
      if (!has_port) ports.push_back({{"name", "pytorchjob-port"}, {"containerPort", port}});
    }
  }
};

// Volcano's mpi plugin (pkg/controllers/job/plugins/distributed-framework/mpi/mpi.go): every
// container of every pod gets a port named mpijob-port (--port, 22), unless one of its ports is
// that number already; the --master task's containers get MPI_HOST, the --worker task's pods'
// names joined by commas (one, when the task's template sets its own hostname).
struct volcano_mpi_plugin : volcano_plugin_flags {
  std::string hosts;

  explicit volcano_mpi_plugin(const json& args) : volcano_plugin_flags(args, 22) {}

  static volcano_mpi_plugin of(const json& vj, const json& args) {
    volcano_mpi_plugin p(args);
    const std::string job = text_at(vj, {"metadata", "name"});
    for (const auto& t : *find_path(vj, {"spec", "tasks"})) {
      if (text_at(t, {"name"}) != p.worker) continue;
      const auto hostname = text_at(t, {"template", "spec", "hostname"});
      auto subdomain = text_at(t, {"template", "spec", "subdomain"});
      if (subdomain.empty()) subdomain = job;
      const auto replicas = int_at(t, {"replicas"}).value_or(0);
      for (std::int64_t i = 0; i < replicas && (hostname.empty() || i == 0); ++i) {
        p.hosts += (p.hosts.empty() ? "" : ",") +
                   (hostname.empty() ? job + "-" + p.worker + "-" + std::to_string(i) : hostname) +
                   "." + subdomain;
      }
    }
    return p;
  }

  void write(json& spec, const std::string& task) const {
    for (const auto* list : {"initContainers", "containers"}) {
      auto* containers = spec.contains(list) ? &spec[list] : nullptr;
      if (containers == nullptr || !containers->is_array()) continue;
      for (auto& c : *containers) {
        if (!c.is_object()) continue;
        auto& ports = c["ports"];
        if (!ports.is_array()) ports = json::array();
        const bool open = std::any_of(ports.begin(), ports.end(), [&](const json& p) {
          const auto* number = member(p, "containerPort");
          return number != nullptr && number->is_number_integer() &&
                 number->get<std::int64_t>() == port;
        });
        if (!open) ports.push_back({{"name", "mpijob-port"}, {"containerPort", port}});
        if (task != master) continue;
        auto& env = c["env"];
        if (!env.is_array()) env = json::array();
        env.push_back({{"name", "MPI_HOST"}, {"value", hosts}});
      }
    }
  }
};

// Volcano's ssh plugin (pkg/controllers/job/plugins/ssh/ssh.go), which its admission adds to a
// job with the mpi plugin: every container mounts Secret <job>-ssh (its keys, authorized_keys and
// an ssh config) at --ssh-key-file-path, /root/.ssh by default, mode 0600.
void volcano_ssh_keys(json& spec, const std::string& job, const json& args) {
  std::string path = "/root/.ssh";
  for (const auto& arg : args) {
    if (!arg.is_string()) continue;
    const auto& text = arg.get_ref<const std::string&>();
    constexpr std::string_view flag = "--ssh-key-file-path=";
    if (text.rfind(flag, 0) == 0) path = text.substr(flag.size());
  }
  const std::string name = job + "-ssh";
  const auto item = [](const char* key, const char* file) {
    return json{{"key", key}, {"path", std::string(".ssh/") + file}};
  };
  auto& volumes = spec["volumes"];
  if (!volumes.is_array()) volumes = json::array();
  volumes.push_back({{"name", name},
                     {"secret",
                      {{"secretName", name},
                       {"items",
                        {item("id_rsa", "id_rsa"), item("id_rsa.pub", "id_rsa.pub"),
                         item("id_rsa.pub", "authorized_keys"), item("config", "config")}},
                       {"defaultMode", 0600}}}});
  auto& containers = spec["containers"];
  if (!containers.is_array()) return;
  for (auto& c : containers) {
    if (!c.is_object()) continue;
    auto& mounts = c["volumeMounts"];
    if (!mounts.is_array()) mounts = json::array();
    mounts.push_back({{"name", name}, {"mountPath", path}, {"subPath", ".ssh"}});
  }
}

// JobSet's CoordinatorEndpoint, written on every Job and pod template when the JobSet names one:
// <jobset>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>; empty when it names none.
std::string coordinator_endpoint(const json& js, const std::string& name,
                                 const std::string& subdomain) {
  const auto* c = find_path(js, {"spec", "coordinator"});
  if (c == nullptr || !c->is_object()) return {};
  return name + "-" + text_at(*c, {"replicatedJob"}) + "-" +
         std::to_string(int_at(*c, {"jobIndex"}).value_or(0)) + "-" +
         std::to_string(int_at(*c, {"podIndex"}).value_or(0)) + "." + subdomain;
}

// dependsOn: the replicatedJobs another waits for until they are Complete, which run first, to
// the end.
std::set<std::string> run_to_completion_first(const json& replicated_jobs) {
  std::set<std::string> prerequisites;
  for (const auto& rj : replicated_jobs) {
    const auto* depends_on = member(rj, "dependsOn");
    if (depends_on == nullptr || !depends_on->is_array()) continue;
    for (const auto& d : *depends_on) {
      if (text_at(d, {"status"}) == "Complete") prerequisites.insert(text_at(d, {"name"}));
    }
  }
  return prerequisites;
}

// The bytes of a template's text, as the bounds count them.
std::size_t text_bytes(const json* value) {
  return value != nullptr ? value->dump(-1, ' ', false, json::error_handler_t::replace).size() : 0;
}

struct job_builder {
  created_job& out;
  uid_source& uids;
  std::string ns;
  preview_bounds bounds;
  controller_model model;
  std::size_t bytes = 0;  // the text of the templates laid out so far

  // Whether `more` pods fit the preview's bounds: it lays out every pod, each decided.
  result<bool> room_for(std::int64_t more) const {
    if (more >= 0 && out.pods.size() + static_cast<std::size_t>(more) <= bounds.pods) return true;
    return error{"trainenv: the job runs more than " + std::to_string(bounds.pods) +
                 " pods; this preview lays out at most that many"};
  }
  // Whether `count` more objects (pods, Jobs) made from a template of `text` bytes fit; counted.
  result<bool> make(std::int64_t count, std::size_t text) {
    const auto n = static_cast<std::size_t>(std::max<std::int64_t>(count, 0));
    const auto made = out.pods.size() + out.objects.size();
    if (made + n > bounds.objects) {
      return error{"trainenv: the job makes more than " + std::to_string(bounds.objects) +
                   " objects (pods and Jobs); this preview lays out at most that many"};
    }
    if (text != 0 && n > (bounds.bytes - std::min(bounds.bytes, bytes)) / text) {
      return error{
          "trainenv: the job's pods and Jobs, made from their templates, come to more "
          "than " +
          std::to_string(bounds.bytes) + " bytes; this preview lays out at most that much"};
    }
    bytes += n * text;
    return true;
  }

  // The Job controller (pkg/controller/job): min(parallelism, completions) pods run at once; an
  // Indexed Job's pod carries its completion index (annotation and label) and the hostname
  // <job>-<index>; every pod carries the Job's labels and a controller reference.
  result<bool> job_pods(const json& job, const std::string& role, bool prerequisite = false) {
    const auto* step = object_label(&job, keys::ancestor_step);
    // Read only through member(): a const json's operator[] on a missing key is undefined.
    static const json none = json::object();
    const auto* found_spec = member(job, "spec");
    const auto& spec = found_spec != nullptr && found_spec->is_object() ? *found_spec : none;
    const auto parallelism = int_at(spec, {"parallelism"}).value_or(1);
    const auto completions = int_at(spec, {"completions"}).value_or(parallelism);
    const auto pods = std::min(parallelism, completions);
    if (auto ok = room_for(pods); !ok) return ok;
    const auto* pod_template = member(spec, "template");
    if (auto ok = make(pods, text_bytes(pod_template)); !ok) return ok;
    const bool indexed = text_at(spec, {"completionMode"}) == "Indexed";
    const std::string name = text_at(job, {"metadata", "name"});
    const std::string uid = text_at(job, {"metadata", "uid"});
    for (std::int64_t i = 0; i < pods; ++i) {
      json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
      const json tmpl = spec.value("template", json::object());
      json metadata = tmpl.value("metadata", json::object());
      if (!metadata.is_object()) metadata = json::object();
      auto& labels = object_member(metadata, "labels");
      auto& annotations = object_member(metadata, "annotations");
      labels[std::string(keys::job_name)] = name;
      labels["job-name"] = name;
      labels["batch.kubernetes.io/controller-uid"] = uid;
      labels["controller-uid"] = uid;
      std::string generate = name + "-";
      json pod_spec = tmpl.value("spec", json::object());
      if (indexed) {
        annotations[std::string(keys::completion_index)] = std::to_string(i);
        labels[std::string(keys::completion_index)] = std::to_string(i);
        pod_spec["hostname"] = name + "-" + std::to_string(i);
        generate = name + "-" + std::to_string(i) + "-";
      }
      metadata["generateName"] = generate;
      metadata["namespace"] = ns;
      metadata["ownerReferences"] = json::array({controller_ref(job)});
      pod["metadata"] = std::move(metadata);
      pod["spec"] = std::move(pod_spec);
      out.pods.push_back({generate.substr(0, generate.size() - 1), role,
                          step != nullptr ? *step : std::string(), prerequisite, false,
                          std::move(pod)});
    }
    return true;
  }

  // The JobSet controller (jobset_controller.go constructJob): replicas Jobs per replicatedJob,
  // named <jobset>-<replicatedJob>-<index>, Indexed unless the template says otherwise, with
  // JobSet's labels on the Job and its pod template and, with DNS hostnames (the default), the
  // subdomain (spec.network.subdomain, else the JobSet's name) on the pod template.
  result<bool> jobset(const json& js) {
    const std::string name = text_at(js, {"metadata", "name"});
    const std::string uid = text_at(js, {"metadata", "uid"});
    const auto* network = find_path(js, {"spec", "network"});
    const bool dns = network == nullptr || !network->contains("enableDNSHostnames") ||
                     (*network)["enableDNSHostnames"] != false;
    const auto subdomain = text_at(js, {"spec", "network", "subdomain"}, name);
    if (!dns)
      out.notes.push_back("JobSet " + name +
                          " sets enableDNSHostnames: false: its pods "
                          "have no DNS names");
    const auto* jobs = find_path(js, {"spec", "replicatedJobs"});
    if (jobs == nullptr || !jobs->is_array())
      return error{"trainenv: JobSet " + name + " has no spec.replicatedJobs"};
    // createHeadlessSvcIfNecessary: with DNS hostnames, a headless Service named the subdomain.
    // JobSet's webhook defaults publishNotReadyAddresses to true.
    const auto* publish = find_path(js, {"spec", "network", "publishNotReadyAddresses"});
    if (dns) {
      out.objects.push_back(headless_service(subdomain, {keys::jobset_name, name}, js,
                                             publish == nullptr || *publish != false));
    }
    std::int64_t global_replicas = 0;
    for (const auto& rj : *jobs) global_replicas += int_at(rj, {"replicas"}).value_or(1);
    const std::string coordinator = coordinator_endpoint(js, name, subdomain);
    const auto prerequisites = run_to_completion_first(*jobs);
    std::int64_t global_index = 0;
    for (const auto& rj : *jobs) {
      const auto rj_name = text_at(rj, {"name"});
      if (rj_name.empty())
        return error{"trainenv: JobSet " + name + " has a nameless replicatedJob"};
      const auto replicas = int_at(rj, {"replicas"}).value_or(1);
      if (replicas < 0 || replicas > 1024)
        return error{"trainenv: replicatedJob " + rj_name + " has " + std::to_string(replicas) +
                     " replicas; JobSet allows 0 to 1024"};
      const auto* job_template = member(rj, "template");
      if (auto ok = make(replicas, text_bytes(job_template)); !ok) return ok;
      for (std::int64_t j = 0; j < replicas; ++j, ++global_index) {
        const json tmpl = rj.value("template", json::object());
        json job = {{"apiVersion", "batch/v1"}, {"kind", "Job"}};
        json metadata = tmpl.value("metadata", json::object());
        const std::vector<std::pair<std::string, std::string>> marks = {
            {std::string(keys::jobset_name), name},
            {std::string(keys::jobset_uid), uid},
            {std::string(keys::replicated_job), rj_name},
            {std::string(keys::replicated_job_replicas), std::to_string(replicas)},
            {std::string(keys::job_index), std::to_string(j)},
            {"jobset.sigs.k8s.io/global-replicas", std::to_string(global_replicas)},
            {"jobset.sigs.k8s.io/job-global-index", std::to_string(global_index)},
            {"jobset.sigs.k8s.io/restart-attempt", "0"}};
        json spec = tmpl.value("spec", json::object());
        if (!spec.contains("completionMode")) spec["completionMode"] = "Indexed";
        auto& pod_template = object_member(spec, "template");
        auto& pod_metadata = object_member(pod_template, "metadata");
        for (auto* target : {&metadata, &pod_metadata}) {
          for (const auto& [k, v] : marks) {
            object_member(*target, "labels")[k] = v;
            object_member(*target, "annotations")[k] = v;
          }
          if (!coordinator.empty()) {
            object_member(*target, "labels")[std::string(keys::coordinator)] = coordinator;
            object_member(*target, "annotations")[std::string(keys::coordinator)] = coordinator;
          }
        }
        if (dns) object_member(pod_template, "spec")["subdomain"] = subdomain;
        const std::string job_name = name + "-" + rj_name + "-" + std::to_string(j);
        metadata["name"] = job_name;
        metadata["namespace"] = ns;
        metadata["uid"] = uids.next("job", job_name);
        metadata["ownerReferences"] = json::array({controller_ref(js)});
        job["metadata"] = std::move(metadata);
        job["spec"] = std::move(spec);
        out.objects.push_back(job);
        if (auto ok = job_pods(job, rj_name, prerequisites.count(rj_name) != 0); !ok) return ok;
      }
    }
    return true;
  }

  // Volcano's job controller (createJobPod) and svc plugin: replicas pods per task (absent: 0),
  // named <job>-<task>-<index>, with its labels and annotations; with the svc plugin (which its
  // webhook adds for pytorch, mpi, tensorflow and ray) hostname = the pod's name and subdomain =
  // the job's, unless the task's template sets them.
  result<bool> volcano(const json& vj) {
    const std::string name = text_at(vj, {"metadata", "name"});
    const auto* plugins = find_path(vj, {"spec", "plugins"});
    bool svc = false;
    if (plugins != nullptr && plugins->is_object()) {
      for (const auto* p : {"svc", "pytorch", "mpi", "tensorflow", "ray"})
        svc = svc || plugins->contains(p);
    }
    if (!svc)
      out.notes.push_back("Volcano Job " + name +
                          " has no svc plugin: its pods have no "
                          "DNS names");
    // The svc plugin's headless Service, named the job.
    // The svc plugin's --publish-not-ready-addresses is off by default.
    if (svc) out.objects.push_back(headless_service(name, {keys::volcano_job, name}, vj, false));
    const auto* tasks = find_path(vj, {"spec", "tasks"});
    if (tasks == nullptr || !tasks->is_array() || tasks->empty())
      return error{"trainenv: Volcano Job " + name + " has no spec.tasks"};
    std::optional<volcano_pytorch_plugin> pytorch;
    if (const auto* args = plugins != nullptr ? member(*plugins, "pytorch") : nullptr)
      pytorch = volcano_pytorch_plugin::of(vj, *args, model.volcano_counts_every_task);
    std::optional<volcano_mpi_plugin> mpi;
    if (const auto* args = plugins != nullptr ? member(*plugins, "mpi") : nullptr)
      mpi = volcano_mpi_plugin::of(vj, *args);
    // The ssh plugin's arguments; its admission adds the plugin (no arguments) to an mpi job.
    const json* ssh_args = plugins != nullptr ? member(*plugins, "ssh") : nullptr;
    const json no_args = json::array();
    if (ssh_args == nullptr && mpi) ssh_args = &no_args;
    for (std::size_t t = 0; t < tasks->size(); ++t) {
      const auto& task = (*tasks)[t];
      const auto task_name = text_at(task, {"name"}, "default" + std::to_string(t));
      const auto replicas = int_at(task, {"replicas"}).value_or(0);
      if (auto ok = room_for(replicas); !ok) return ok;
      const auto* task_template = member(task, "template");
      if (auto ok = make(replicas, text_bytes(task_template)); !ok) return ok;
      for (std::int64_t i = 0; i < replicas; ++i) {
        const json tmpl = task.value("template", json::object());
        json metadata = tmpl.value("metadata", json::object());
        auto& labels = object_member(metadata, "labels");
        auto& annotations = object_member(metadata, "annotations");
        for (auto* target : {&labels, &annotations}) {
          (*target)[std::string(keys::volcano_job)] = name;
          (*target)[std::string(keys::volcano_task)] = task_name;
          (*target)[std::string(keys::volcano_index)] = std::to_string(i);
        }
        labels["volcano.sh/job-namespace"] = ns;
        const std::string pod_name = name + "-" + task_name + "-" + std::to_string(i);
        metadata["name"] = pod_name;
        metadata["namespace"] = ns;
        metadata["ownerReferences"] = json::array({controller_ref(vj)});
        json spec = tmpl.value("spec", json::object());
        if (svc) {
          if (text_at(spec, {"hostname"}).empty()) spec["hostname"] = pod_name;
          if (text_at(spec, {"subdomain"}).empty()) spec["subdomain"] = name;
        }
        if (pytorch) pytorch->write(spec, task_name, i);
        if (ssh_args != nullptr) volcano_ssh_keys(spec, name, *ssh_args);
        // The mpi plugin's master task launches; a task it does not name is no worker.
        std::string role = task_name;
        bool left_out = false;
        if (mpi) {
          mpi->write(spec, task_name);
          if (task_name == mpi->master) role = std::string(launcher_role);
          left_out = task_name != mpi->master && task_name != mpi->worker;
        }
        out.pods.push_back(
            {pod_name,
             role,
             std::string(),
             false,
             left_out,
             {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", metadata}, {"spec", spec}}});
      }
    }
    return true;
  }
};

owner_ref runtime_of(const json& tj) {
  const auto* ref = find_path(tj, {"spec", "runtimeRef"});
  const json none = json::object();
  const json& r = ref != nullptr ? *ref : none;
  const auto group = text_at(r, {"apiGroup"}, "trainer.kubeflow.org");
  const auto kind = text_at(r, {"kind"}, "ClusterTrainingRuntime");
  return {group + "/v1alpha1",
          kind,
          kind == "ClusterTrainingRuntime" ? std::string() : text_at(tj, {"metadata", "namespace"}),
          text_at(r, {"name"}),
          {},
          true};
}

}  // namespace

std::vector<owner_ref> job_needs(const json& job) {
  if (text_at(job, {"kind"}) == "TrainJob") return {runtime_of(job)};
  return {};
}

result<created_job> create_job(const json& job_object, const std::vector<json>& given,
                               const preview_bounds& bounds, const controller_model& model) {
  if (!job_object.is_object()) return error{"trainenv: the job is not an object"};
  const auto kind = text_at(job_object, {"kind"});
  const auto api_version = text_at(job_object, {"apiVersion"});
  const auto name = text_at(job_object, {"metadata", "name"});
  if (name.empty()) {
    return error{"trainenv: the " + (kind.empty() ? std::string("object") : kind) +
                 " has no metadata.name (a generateName is named only when created)"};
  }
  created_job out;
  out.name = name;
  out.namespace_name = text_at(job_object, {"metadata", "namespace"}, "default");
  // Its names become pods' names, API paths and hostfile lines: DNS names, or nothing is laid out.
  if (!is_dns_subdomain(name))
    return error{"trainenv: metadata.name " + quote(name) + " is not a DNS name"};
  if (!is_dns_label(out.namespace_name))
    return error{"trainenv: metadata.namespace " + quote(out.namespace_name) +
                 " is not a DNS label"};
  uid_source uids;
  json job = job_object;
  job["metadata"]["namespace"] = out.namespace_name;
  if (text_at(job, {"metadata", "uid"}).empty())
    job["metadata"]["uid"] = uids.next("applied", name);
  out.objects.push_back(job);
  job_builder b{out, uids, out.namespace_name, bounds, model};
  const auto group = api_version.substr(0, api_version.find('/'));
  if (kind == "JobSet" && group == "jobset.x-k8s.io") {
    out.kind = "JobSet";
    if (auto ok = b.jobset(job); !ok) return std::move(ok).take_error();
  } else if (kind == "Job" && api_version == "batch/v1") {
    out.kind = "Job";
    if (auto ok = b.job_pods(job, "node"); !ok)  // a plain Job's pods play the default role
      return std::move(ok).take_error();
  } else if (kind == "Job" && group == "batch.volcano.sh") {
    out.kind = "Volcano Job";
    if (auto ok = b.volcano(job); !ok) return std::move(ok).take_error();
  } else if (kind == "TrainJob" && group == "trainer.kubeflow.org") {
    out.kind = "TrainJob";
    const auto ref = runtime_of(job);
    const auto* runtime = find_object(given, ref);
    if (runtime == nullptr) {
      return error{"trainenv: TrainJob " + name + " names " + ref.display() +
                   ", which could not be read (preview --job: give it in --owners FILE, or "
                   "--kubeconfig FILE)"};
    }
    auto js = trainer_jobset(job, *runtime, uids, out);
    if (!js) return std::move(js).take_error();
    out.objects.push_back(*js);
    if (auto ok = b.jobset(*js); !ok) return std::move(ok).take_error();
  } else {
    return error{
        "trainenv: a job preview lays out a TrainJob, a JobSet, a batch/v1 Job or a "
        "Volcano Job; this is " +
        (kind.empty() ? std::string("no kind") : api_version + " " + kind)};
  }
  // The role a pod plays: its template's trainenv.io/role wins over its entry's name (§2.2); a
  // hand-written launcher says on its template whether it runs as a node too.
  for (auto& c : out.pods) {
    if (const auto* named = object_label_or_annotation(&c.pod, keys::role)) c.role = *named;
    const auto* as_node = object_annotation(&c.pod, keys::run_launcher_as_node);
    if (out.kind != "TrainJob" && c.role == launcher_role && as_node != nullptr &&
        *as_node == "true")
      out.launcher_is_node = true;
  }
  return out;
}

}  // namespace trainenv::core
