// The policy parser on arbitrary text: YAML or JSON (as the policy directory is read) ->
// parse_policy -> policy_set::build -> mutate of the JobSet fixture pod with it. A policy that
// is accepted must render and diff without crashing; what it renders must apply as a patch.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.hpp"
#include "trainenv/core/decide/engine.hpp"
#include "trainenv/inputs/yaml.hpp"

using nlohmann::json;
using namespace trainenv;

namespace {

const json& fixture_pod() {
  static const json pod = [] {
    auto review = inputs::parse_document(R"({"metadata": {"name": "llama-ft-node-0-3",
      "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer",
                 "trainer.kubeflow.org/framework": "fuzz",
                 "jobset.sigs.k8s.io/jobset-name": "llama-ft",
                 "jobset.sigs.k8s.io/replicatedjob-name": "node"},
      "annotations": {"batch.kubernetes.io/job-completion-index": "3",
                      "trainenv.io/num-nodes": "4"}},
      "spec": {"containers": [{"name": "node", "image": "x", "command": ["torchrun"],
        "args": ["train.py"], "env": [{"name": "A", "value": "1"}],
        "resources": {"limits": {"cpu": "8", "nvidia.com/gpu": "4"}}}]}})");
    return std::move(*review);
  }();
  return pod;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto documents = inputs::parse_documents(text);
  if (!documents) return 0;
  std::vector<core::policy> parsed;
  for (const auto& document : *documents) {
    auto p = core::parse_policy(document, "fuzz.yaml");
    if (p) parsed.push_back(std::move(*p));
  }
  if (parsed.empty()) return 0;
  auto set = core::policy_set::build(std::move(parsed));
  if (!set) return 0;
  for (const auto& p : set->all()) {
    core::mutate_options options;
    options.forced_policy = p.name;
    const auto d = core::mutate_pod(fixture_pod(), *set, options);
    if (!d.mutated()) continue;
    try {
      (void)fixture_pod().patch(d.patch());
    } catch (const json::exception& e) {
      fuzz::require(false, "an accepted policy's patch applies",
                    std::string(e.what()) + "\n" + d.patch().dump());
    }
  }
  return 0;
}
