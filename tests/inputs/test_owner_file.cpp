// `preview --owners`: owner objects from YAML documents or a kubectl List, found by reference.
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "trainenv/inputs/owner_file.hpp"

namespace {

using trainenv::core::owner_ref;
using trainenv::inputs::owner_file;

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("the example owners file gives each object by its reference", "[owners]") {
  const auto file = owner_file::parse(
      read(TRAINENV_SOURCE_DIR "/examples/owners/trainer-torch-owners.yaml"), "owners.yaml");
  REQUIRE(file);
  CHECK(file->size() == 4);
  const auto* job = file->find({"batch/v1", "Job", "team-a", "bert-node-0", "44a4"});
  REQUIRE(job != nullptr);
  CHECK((*job)["spec"]["parallelism"] == 3);
  // The API serves an object in every version of its group: the version is not compared.
  CHECK(file->find({"jobset.x-k8s.io/v1", "JobSet", "team-a", "bert", ""}) != nullptr);
  // Cluster-scoped: no namespace on either side.
  CHECK(file->find({"trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", "",
                    "torch-distributed", ""}) != nullptr);
  CHECK(file->find({"batch/v1", "Job", "team-b", "bert-node-0", ""}) == nullptr);
  CHECK(file->find({"batch.volcano.sh/v1alpha1", "Job", "team-a", "bert-node-0", ""}) == nullptr);
  CHECK(file->find({"batch/v1", "Job", "team-a", "bert-node-1", ""}) == nullptr);
}

TEST_CASE("a kubectl List is flattened, alongside plain documents", "[owners]") {
  const auto file = owner_file::parse(R"({"apiVersion": "v1", "kind": "List", "items": [
      {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "a", "namespace": "n"}},
      {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "b", "namespace": "n"}}]})",
                                      "list.json");
  REQUIRE(file);
  CHECK(file->size() == 2);
  CHECK(file->find({"batch/v1", "Job", "n", "b", ""}) != nullptr);
  const auto mixed = owner_file::parse(
      "apiVersion: batch/v1\nkind: JobList\nitems:\n- apiVersion: batch/v1\n  kind: Job\n"
      "  metadata: {name: a, namespace: n}\n---\n---\napiVersion: jobset.x-k8s.io/v1alpha2\n"
      "kind: JobSet\nmetadata: {name: s, namespace: n}\n",
      "mixed.yaml");
  REQUIRE(mixed);
  CHECK(mixed->size() == 2);
}

TEST_CASE("an owners file with something that is not an object is refused, naming it", "[owners]") {
  CHECK(owner_file::parse("apiVersion: v1\nkind: Job\n", "o.yaml").message() ==
        "o.yaml: document 1 is not a Kubernetes object (apiVersion, kind and metadata.name)");
  CHECK(owner_file::parse("kind: List\nitems: [1]\n", "o.yaml").message() ==
        "o.yaml: document 1 item 1 is not a Kubernetes object (apiVersion, kind and "
        "metadata.name)");
  CHECK(owner_file::parse("kind: List\nitems: 3\n", "o.yaml").message() ==
        "o.yaml: document 1: items must be a list");
  CHECK_FALSE(owner_file::parse("{not yaml: [", "o.yaml"));
}
