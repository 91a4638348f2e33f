// An Indexed Job and its pods, as the Job controller creates them, for the server tests and
// benchmarks that need owners to read: a Job in team-a whose template carries the ancestor
// label (so its pods are training pods and read it), and a pod of it.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace trainenv::test {

// An Indexed Job `name` of `pods` pods in team-a whose template carries the ancestor label, and
// pod `index` of it as the Job controller creates it.
inline nlohmann::json indexed_job(const std::string& name, int pods) {
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata",
           {{"name", name},
            {"namespace", "team-a"},
            {"uid", "uid-" + name},
            {"labels", {{"trainer.kubeflow.org/trainjob-ancestor-step", "trainer"}}}}},
          {"spec",
           {{"parallelism", pods},
            {"completions", pods},
            {"completionMode", "Indexed"},
            {"template", {{"spec", {{"subdomain", name}}}}}}}};
}

inline nlohmann::json job_pod(const std::string& job, int index) {
  const auto i = std::to_string(index);
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"generateName", job + "-" + i + "-"},
            {"namespace", "team-a"},
            {"labels",
             {{"trainer.kubeflow.org/trainjob-ancestor-step", "trainer"},
              {"batch.kubernetes.io/job-name", job},
              {"batch.kubernetes.io/job-completion-index", i}}},
            {"annotations", {{"batch.kubernetes.io/job-completion-index", i}}},
            {"ownerReferences",
             {{{"apiVersion", "batch/v1"},
               {"kind", "Job"},
               {"name", job},
               {"uid", "uid-" + job},
               {"controller", true}}}}}},
          {"spec",
           {{"hostname", job + "-" + i},
            {"subdomain", job},
            {"containers", {{{"name", "node"}, {"image", "pytorch"}}}}}}};
}

}  // namespace trainenv::test
