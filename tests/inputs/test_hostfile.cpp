// The MPI hostfile at any size (docs/contract.md §3): in the pod's own annotation while small;
// past 64 KiB as a rule of one line per node role that an init container expands with /bin/sh
// as the pod starts — here expanded by this machine's real /bin/sh, from the patched pod, and
// compared line by line with every worker's name; nothing at all when the pod already mounts a
// hostfile (Trainer's ConfigMap). The pod's annotations stay far below the API server's 256 KiB.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "owner_files.hpp"
#include "shipped_policies.hpp"
#include "temp_dir.hpp"
#include "trainenv/core/decide/render.hpp"
#include "trainenv/core/text/names.hpp"

using nlohmann::json;
using namespace trainenv;

namespace {

// A JobSet whose launcher drives `jobs` Jobs of `pods` workers each (4 GPUs), named `name`.
json mpi_jobset(const std::string& name, int jobs, int pods) {
  const json worker = {{"spec",
                        {{"containers",
                          {{{"name", "node"},
                            {"image", "example.com/mpi:1"},
                            {"resources", {{"limits", {{"nvidia.com/gpu", "4"}}}}}}}}}}};
  return {
      {"apiVersion", "jobset.x-k8s.io/v1alpha2"},
      {"kind", "JobSet"},
      {"metadata", {{"name", name}, {"namespace", "team-a"}, {"uid", "js-uid"}}},
      {"spec",
       {{"replicatedJobs",
         {{{"name", "launcher"},
           {"template", {{"spec", {{"parallelism", 1}, {"template", json::object()}}}}}},
          {{"name", "node"},
           {"replicas", jobs},
           {"template",
            {{"spec", {{"parallelism", pods}, {"completions", pods}, {"template", worker}}}}}}}}}}};
}

// Its launcher pod as the Job controller creates it, with the JobSet's labels.
json launcher_pod(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"generateName", name + "-launcher-0-0-"},
            {"namespace", "team-a"},
            {"labels",
             {{"trainer.kubeflow.org/trainjob-ancestor-step", "trainer"},
              {"trainer.kubeflow.org/framework", "deepspeed"},
              {"jobset.sigs.k8s.io/jobset-name", name},
              {"jobset.sigs.k8s.io/jobset-uid", "js-uid"},
              {"jobset.sigs.k8s.io/replicatedjob-name", "launcher"},
              {"jobset.sigs.k8s.io/job-index", "0"},
              {"batch.kubernetes.io/job-completion-index", "0"}}},
            {"ownerReferences",
             {{{"apiVersion", "batch/v1"},
               {"kind", "Job"},
               {"name", name + "-launcher-0"},
               {"uid", "job-uid"},
               {"controller", true}}}}}},
          {"spec",
           {{"hostname", name + "-launcher-0-0"},
            {"subdomain", name},
            {"containers",
             {{{"name", "node"}, {"image", "example.com/mpi:1"}, {"command", {"mpirun"}}}}}}}};
}

core::decision decide(const json& pod, const json& jobset) {
  return core::decide(pod, test::shipped_policies(), {},
                      [&](const core::owner_ref& ref, core::owner_values& owners) {
                        if (ref.kind == "JobSet") {
                          owners.add(ref, jobset);
                        } else {
                          owners.add_failure(ref, core::lookup_failure::not_found);
                        }
                      });
}

std::size_t annotation_bytes(const json& pod) {
  std::size_t bytes = 0;
  for (const auto& [key, value] : pod["metadata"]["annotations"].items())
    bytes += key.size() + value.get<std::string>().size();
  return bytes;
}

// Every worker's hostfile line, in node order.
std::string expected_hostfile(const std::string& name, int jobs, int pods) {
  std::string out;
  for (int j = 0; j < jobs; ++j) {
    for (int i = 0; i < pods; ++i)
      out +=
          name + "-node-" + std::to_string(j) + "-" + std::to_string(i) + "." + name + " slots=4\n";
  }
  return out;
}

// Runs the patched pod's init container as the kubelet would, with this machine's /bin/sh: its
// rule mounted from the annotation (the downward API's file), its output read back.
std::string run_expand_script(const std::string& script, const std::string& rule_text) {
  const test::temp_dir scratch("hostfile");
  const auto& dir = scratch.path;
  const auto rule = dir / "rule";
  const auto out = dir / "hostfile";
  std::ofstream(rule, std::ios::binary) << rule_text;
  // The script as the pod would run it; its two paths pointed at this test's files.
  std::ofstream(dir / "expand.sh") << script;
  const std::string command =
      "/bin/sh " + (dir / "expand.sh").string() + " " + rule.string() + " " + out.string();
  REQUIRE(std::system(command.c_str()) == 0);
  return test::read_file(out.string());
}

std::string run_init_container(const json& pod) {
  const auto& init = pod["spec"]["initContainers"][0];
  REQUIRE(init["command"][0] == "/bin/sh");
  return run_expand_script(init["command"][2].get<std::string>(),
                           pod["metadata"]["annotations"]["trainenv.io/hostfile-rule"]);
}

}  // namespace

TEST_CASE("a small hostfile goes in the launcher's annotation, every worker once, in order",
          "[hostfile]") {
  const auto jobset = mpi_jobset("ds", 2, 3);
  const auto pod = launcher_pod("ds");
  const auto d = decide(pod, jobset);
  INFO(d.message);
  REQUIRE(d.allowed);
  const auto patched = pod.patch(d.patch());
  CHECK(patched["metadata"]["annotations"]["trainenv.io/hostfile"] ==
        expected_hostfile("ds", 2, 3));
  // No expander: the readiness wait is its only init container.
  REQUIRE(patched["spec"]["initContainers"].size() == 1);
  CHECK(patched["spec"]["initContainers"][0]["name"] == "trainenv-wait");
  CHECK(decide(patched, jobset).patch().empty());
}

TEST_CASE(
    "a 10,000-node launcher gets every worker through a compact rule, its annotations far under "
    "256 KiB",
    "[hostfile]") {
  // A long JobSet name: 50 characters, so each line is over 110 bytes and the plain hostfile
  // would be over 1 MiB.
  const std::string name = "a-very-long-training-job-name-for-the-large-cluster";
  for (const auto& [jobs, pods] : std::vector<std::pair<int, int>>{{1, 10'000}, {1000, 10}}) {
    INFO(jobs << " Jobs of " << pods << " workers");
    const auto jobset = mpi_jobset(name, jobs, pods);
    const auto pod = launcher_pod(name);
    const auto d = decide(pod, jobset);
    INFO(d.message);
    REQUIRE(d.allowed);
    const auto patched = pod.patch(d.patch());
    const auto& annotations = patched["metadata"]["annotations"];
    CHECK_FALSE(annotations.contains("trainenv.io/hostfile"));
    REQUIRE(annotations.contains("trainenv.io/hostfile-rule"));
    const auto bytes = annotation_bytes(patched);
    WARN(jobs << " Jobs x " << pods << " workers: the pod's annotations take " << bytes
              << " bytes; the rule "
              << annotations["trainenv.io/hostfile-rule"].get<std::string>().size());
    CHECK(bytes < 1024);  // far below the API server's 262,144
    // The init container writes the hostfile into the emptyDir the launcher mounts read-only;
    // the readiness wait, after it, reads the hostfile from there.
    const auto& init = patched["spec"]["initContainers"];
    REQUIRE(init.size() == 2);
    CHECK(init[0]["image"] == "example.com/mpi:1");
    CHECK(init[1]["name"] == "trainenv-wait");
    CHECK(init[1]["volumeMounts"][0]["name"] == init[0]["volumeMounts"][1]["name"]);
    // It reads the hosts from that file: its arguments do not grow with the job.
    CHECK(init[1]["args"].dump().size() < 1024);
    const auto hostfile = run_init_container(patched);
    CHECK(hostfile == expected_hostfile(name, jobs, pods));
    // What doctor and preview --job read of the pod: the same hostfile.
    CHECK(core::expand_hostfile_rule(annotations["trainenv.io/hostfile-rule"].get<std::string>()) ==
          hostfile);
    // Fed back in: nothing more to add.
    CHECK(decide(patched, jobset).patch().empty());
  }
}

TEST_CASE("a 2,500-node job with a long name moves past the annotation's bound to the rule",
          "[hostfile]") {
  const std::string name = "llm-pretraining-run-2026-11-24-team-a-experiment-7";
  const auto jobset = mpi_jobset(name, 1, 2500);
  const auto d = decide(launcher_pod(name), jobset);
  REQUIRE(d.allowed);
  const auto patched = launcher_pod(name).patch(d.patch());
  // Plain, it would be 2,500 lines of ~120 bytes: over 256 KiB with the pod's own annotations.
  CHECK(expected_hostfile(name, 1, 2500).size() > core::hostfile_inline_limit);
  CHECK(patched["metadata"]["annotations"].contains("trainenv.io/hostfile-rule"));
  CHECK(run_init_container(patched) == expected_hostfile(name, 1, 2500));
}

TEST_CASE("a launcher that already mounts a hostfile gets no annotation, no volume, no mount",
          "[hostfile]") {
  const auto jobset = mpi_jobset("ds", 1, 4);
  auto pod = launcher_pod("ds");
  pod["spec"]["containers"][0]["volumeMounts"] = {
      {{"name", "mpi-hostfile"}, {"mountPath", "/etc/mpi"}}};
  pod["spec"]["volumes"] = {
      {{"name", "mpi-hostfile"}, {"configMap", {{"name", "ds-mpi-hostfile"}}}}};
  const auto d = decide(pod, jobset);
  REQUIRE(d.allowed);
  CHECK(d.warnings.empty());
  const auto patched = pod.patch(d.patch());
  CHECK_FALSE(patched["metadata"]["annotations"].contains("trainenv.io/hostfile"));
  CHECK_FALSE(patched["metadata"]["annotations"].contains("trainenv.io/hostfile-rule"));
  CHECK(patched["spec"]["volumes"].size() == 2);  // its own and the SSH keys'
  CHECK(patched["spec"]["containers"][0]["volumeMounts"][0]["mountPath"] == "/etc/mpi");
}

TEST_CASE("the hostfile rule's C++ expansion is the init container's, line for line",
          "[hostfile]") {
  // Generated rules, expanded by this machine's /bin/sh running the script and by
  // expand_hostfile_rule: Job counts "-", 0 to 3, pods 0 to 4, texts with the characters a
  // pod's names and a policy's line hold, bars past the fourth (the tail takes them), backslashes
  // (read -r keeps them), a last line without its newline (read drops it).
  std::mt19937 random(20261129);
  const auto pick = [&](int n) { return static_cast<int>(random() % static_cast<unsigned>(n)); };
  const std::string alphabet = "abz019-.: %\\|";
  const auto text = [&](bool bars) {
    std::string out;
    for (int n = pick(6); n > 0; --n) {
      char c = alphabet[static_cast<std::size_t>(pick(static_cast<int>(alphabet.size())))];
      if (c == '|' && !bars) c = '_';
      out.push_back(c);
    }
    return out;
  };
  for (int round = 0; round < 40; ++round) {
    std::string rule;
    for (int line = pick(3) + 1; line > 0; --line) {
      const int jobs = pick(5) - 1;
      rule += (jobs < 0 ? std::string("-") : std::to_string(jobs)) + "|" + std::to_string(pick(5)) +
              "|" + text(false) + "|" + text(false) + "|" + text(true) + "\n";
    }
    if (pick(4) == 0) rule += "1|2|dropped|-|";  // no newline: never read
    INFO(rule);
    CHECK(core::expand_hostfile_rule(rule) ==
          run_expand_script(std::string(core::hostfile_expand_script()), rule));
  }
}

TEST_CASE("a rule read from a live pod expands to a bounded hostfile", "[hostfile]") {
  // Anyone who may create pods may write the annotation doctor reads.
  const auto hostfile = core::expand_hostfile_rule("1000000000|1000000000|h|-|.x\n");
  CHECK(std::count(hostfile.begin(), hostfile.end(), '\n') == core::max_count);
  CHECK(hostfile.rfind("h999-", 0) == std::string::npos);
  const auto wide = core::expand_hostfile_rule("-|1000000|" + std::string(1000, 'h') + "||\n");
  CHECK(wide.size() < (std::size_t{65} << 20));
}
