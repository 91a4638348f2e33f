// inputs/policy_dir.hpp: loading the policy directory, including a ConfigMap volume's layout.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "../test_support.hpp"
#include "temp_dir.hpp"
#include "trainenv/inputs/policy_dir.hpp"

using Catch::Matchers::Contains;
using trainenv::inputs::load_policy_dir;
using trainenv::inputs::policy_load;

namespace fs = std::filesystem;

namespace {

using trainenv::test::temp_dir;

std::string policy_yaml(const std::string& name, const std::string& frameworks,
                        bool is_default = false) {
  return "apiVersion: trainenv.io/v1alpha1\n"
         "kind: TrainingPolicy\n"
         "metadata:\n"
         "  name: " +
         name +
         "\n"
         "spec:\n"
         "  frameworks: [" +
         frameworks + "]\n" + (is_default ? "  default: true\n" : "") +
         "  env:\n"
         "    - name: MASTER_PORT\n"
         "      value: \"${masterPort}\"\n";
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

policy_load load_ok(const std::string& dir) {
  auto load = load_policy_dir(dir);
  INFO("errors:\n" << joined(load.errors));
  REQUIRE(load.errors.empty());
  REQUIRE(load.policies != nullptr);
  return load;
}

std::string load_error(const std::string& dir) {
  auto load = load_policy_dir(dir);
  CHECK(load.policies == nullptr);
  REQUIRE_FALSE(load.errors.empty());
  return joined(load.errors);
}

}  // namespace

TEST_CASE("the shipped policies load with torch as the default", "[policy_store]") {
  const auto load = load_ok(TRAINENV_POLICIES_DIR);
  const auto& set = *load.policies;
  REQUIRE(set.by_name("torch") != nullptr);
  REQUIRE(set.by_name("platform") != nullptr);
  REQUIRE(set.default_policy() != nullptr);
  CHECK(set.default_policy()->name == "torch");
  REQUIRE(set.by_framework("pytorch") != nullptr);
  CHECK(set.by_framework("pytorch")->name == "torch");
  REQUIRE(set.by_framework("platform") != nullptr);
  CHECK(set.by_framework("platform")->name == "platform");
  // Every file but owners.yaml, sidecars.yaml, accelerators.yaml and startup-failures.yaml is
  // one policy; those hold the owner kinds, the known sidecar containers, the accelerators and
  // the launchers' known start-up failures (doctor --logs).
  CHECK(set.all().size() + 4 == load.files.size());
  CHECK(set.startup_failures().size() >= 10);
  CHECK(set.accelerators().size() >= 4);
  CHECK(std::find(set.sidecars().begin(), set.sidecars().end(), "istio-proxy") !=
        set.sidecars().end());
  CHECK(set.owner_kinds().all().size() == 12);  // six read, six wired by their operators
  CHECK(set.owner_kinds().find("jobset.x-k8s.io/v1alpha2", "JobSet") != nullptr);
  CHECK(set.owner_kinds().find("batch.volcano.sh/v1alpha1", "Job") != nullptr);
  CHECK(set.owner_kinds().find("kubeflow.org/v1", "MPIJob") != nullptr);
}

TEST_CASE("each shipped policy records the file it came from", "[policy_store]") {
  const auto load = load_ok(TRAINENV_POLICIES_DIR);
  CHECK_THAT(load.policies->by_name("torch")->source, Contains("torch.yaml"));
  CHECK_THAT(load.policies->by_name("platform")->source, Contains("platform.yaml"));
}

TEST_CASE("yaml, yml and json files are all read", "[policy_store]") {
  temp_dir dir("policy-store");
  dir.write("a.yaml", policy_yaml("torch", "torch", true));
  dir.write("b.yml", policy_yaml("mpi", "mpi"));
  dir.write("c.json", R"({"apiVersion": "trainenv.io/v1alpha1", "kind": "TrainingPolicy",
                         "metadata": {"name": "jax"}, "spec": {"frameworks": ["jax"]}})");
  const auto load = load_ok(dir.str());
  CHECK(load.files.size() == 3);
  CHECK(load.policies->all().size() == 3);
  CHECK(load.policies->by_name("mpi") != nullptr);
  CHECK(load.policies->by_framework("jax") != nullptr);
}

TEST_CASE("dot-files and files of other types are ignored", "[policy_store]") {
  temp_dir dir("policy-store");
  dir.write("torch.yaml", policy_yaml("torch", "torch", true));
  dir.write(".hidden.yaml", "this: [is not valid");
  dir.write("README.md", "not: [a policy");
  dir.write("torch.yaml.bak", "not: [a policy");
  dir.write("notes.txt", "garbage");
  fs::create_directories(dir.path / "sub.yaml");  // a directory, even with a policy suffix
  dir.write("sub.yaml/inner.yaml", "not: [read");
  const auto load = load_ok(dir.str());
  REQUIRE(load.files.size() == 1);
  CHECK_THAT(load.files[0], Contains("torch.yaml"));
  CHECK(load.policies->all().size() == 1);
}

TEST_CASE("a file with several documents loads each policy", "[policy_store]") {
  temp_dir dir("policy-store");
  dir.write("all.yaml", policy_yaml("torch", "torch", true) + "---\n" + policy_yaml("mpi", "mpi") +
                            "---\n" + policy_yaml("jax", "jax"));
  const auto load = load_ok(dir.str());
  CHECK(load.files.size() == 1);
  CHECK(load.policies->all().size() == 3);
  CHECK(load.policies->by_name("jax") != nullptr);
}

TEST_CASE("an error in a multi-document file names the file and the document", "[policy_store]") {
  temp_dir dir("policy-store");
  dir.write("all.yaml", policy_yaml("torch", "torch") + "---\n" +
                            "apiVersion: trainenv.io/v1alpha1\nkind: TrainingPolicy\n"
                            "metadata: {name: mpi}\nspec: {framework: [mpi]}\n");
  const auto message = load_error(dir.str());
  CHECK_THAT(message, Contains((dir.path / "all.yaml").string() +
                               " (document 2): spec: unknown field \"framework\""));
}

TEST_CASE("a ConfigMap volume layout loads each policy once", "[policy_store]") {
  temp_dir dir("policy-store");
  dir.write("..2026_01_01/torch.yaml", policy_yaml("torch", "torch,pytorch", true));
  dir.write("..2026_01_01/platform.yaml", policy_yaml("platform", "platform"));
  fs::create_directory_symlink("..2026_01_01", dir.path / "..data");
  fs::create_symlink("..data/torch.yaml", dir.path / "torch.yaml");
  fs::create_symlink("..data/platform.yaml", dir.path / "platform.yaml");

  const auto load = load_ok(dir.str());
  CHECK(load.files.size() == 2);
  CHECK(load.policies->all().size() == 2);
  REQUIRE(load.policies->default_policy() != nullptr);
  CHECK(load.policies->default_policy()->name == "torch");
  CHECK(load.policies->by_framework("platform") != nullptr);
}

TEST_CASE("a policy file that is not valid YAML is an error naming the file and line",
          "[policy_store]") {
  temp_dir dir("policy-store");
  dir.write("good.yaml", policy_yaml("torch", "torch", true));
  dir.write("bad.yaml", "apiVersion: trainenv.io/v1alpha1\nspec: [unclosed\n");
  const auto message = load_error(dir.str());
  CHECK_THAT(message, Contains((dir.path / "bad.yaml").string() + ": not valid YAML"));
  CHECK_THAT(message, Contains("line "));
  CHECK_THAT(message, !Contains("good.yaml"));
}

TEST_CASE("an invalid policy is an error naming the file and the field", "[policy_store]") {
  temp_dir dir("policy-store");
  dir.write("torch.yaml", policy_yaml("torch", "torch", true));
  dir.write("bad.yaml",
            "apiVersion: trainenv.io/v1alpha1\nkind: TrainingPolicy\nmetadata: {name: bad}\n"
            "spec:\n  defaults: {masterPort: 70000}\n");
  const auto message = load_error(dir.str());
  CHECK_THAT(message, Contains((dir.path / "bad.yaml").string() + ": spec.defaults.masterPort"));
}

// Regression (fixed): see test_yaml.cpp; std::out_of_range from std::stod escapes load_policy_dir,
// so the caller gets an exception instead of an error naming the file (check-policies aborts).
// Input: a policy file with `defaults: {masterPort: 1e999}`.
TEST_CASE("a number out of the double range is an error naming the file", "[policy_store]") {
  temp_dir dir("policy-store");
  dir.write("huge.yaml",
            "apiVersion: trainenv.io/v1alpha1\nkind: TrainingPolicy\nmetadata: {name: huge}\n"
            "spec:\n  defaults: {masterPort: 1e999}\n");
  policy_load load;
  REQUIRE_NOTHROW(load = load_policy_dir(dir.str()));
  REQUIRE_FALSE(load.errors.empty());
  CHECK_THAT(joined(load.errors), Contains("huge.yaml"));
}

TEST_CASE("errors in several files are all reported", "[policy_store]") {
  temp_dir dir("policy-store");
  dir.write("a.yaml", "kind: [\n");
  dir.write("b.yaml", "apiVersion: v1\nkind: TrainingPolicy\nmetadata: {name: b}\nspec: {}\n");
  const auto load = load_policy_dir(dir.str());
  CHECK(load.policies == nullptr);
  REQUIRE(load.errors.size() == 2);
  CHECK_THAT(joined(load.errors), Contains("a.yaml") && Contains("b.yaml: apiVersion"));
}

TEST_CASE("the same policy name in two files names both files", "[policy_store]") {
  temp_dir dir("policy-store");
  dir.write("one.yaml", policy_yaml("torch", "torch"));
  dir.write("two.yaml", policy_yaml("torch", "pytorch"));
  const auto message = load_error(dir.str());
  CHECK_THAT(message, Contains("one.yaml") && Contains("two.yaml") && Contains("metadata.name"));
}

TEST_CASE("a framework value claimed in two files is an error", "[policy_store]") {
  temp_dir dir("policy-store");
  dir.write("one.yaml", policy_yaml("torch", "torch"));
  dir.write("two.yaml", policy_yaml("other", "torch"));
  CHECK_THAT(load_error(dir.str()), Contains("spec.frameworks") && Contains("\"torch\""));
}

TEST_CASE("an empty directory is an error", "[policy_store]") {
  temp_dir dir("policy-store");
  CHECK_THAT(load_error(dir.str()), Contains("no policy files"));
}

TEST_CASE("a directory with only empty policy files is an error", "[policy_store]") {
  temp_dir dir("policy-store");
  dir.write("empty.yaml", "");
  dir.write("comment.yaml", "# nothing here\n---\n");
  CHECK_THAT(load_error(dir.str()), Contains("no policy files"));
}

TEST_CASE("a missing directory is an error naming it", "[policy_store]") {
  temp_dir dir("policy-store");
  const auto missing = (dir.path / "does-not-exist").string();
  const auto message = load_error(missing);
  CHECK_THAT(message, Contains(missing) && Contains("not a directory"));
}

TEST_CASE("a regular file given as the directory is an error", "[policy_store]") {
  temp_dir dir("policy-store");
  dir.write("torch.yaml", policy_yaml("torch", "torch"));
  const auto file = (dir.path / "torch.yaml").string();
  CHECK_THAT(load_error(file), Contains("not a directory"));
}

// Regression (fixed): load_policy_dir reuses one error_code for the directory iteration and for
// each entry's is_regular_file(); a dangling *.yaml symlink sets it (ENOENT), and if that entry
// happens to be the last one listed, the whole load fails with "<dir>: cannot list the directory:
// No such file or directory". Whether it fails depends on readdir order. Kubelet leaves such a link
// for a moment when a key is removed from a ConfigMap. Input: a directory holding only "broken.yaml
// -> missing.yaml" reports "cannot list the directory" instead of "no policy files".
TEST_CASE("a dangling policy symlink is skipped, not reported as a listing failure",
          "[policy_store]") {
  temp_dir dir("policy-store");
  fs::create_symlink("missing.yaml", dir.path / "broken.yaml");
  const auto message = load_error(dir.str());
  CHECK_THAT(message, !Contains("cannot list the directory"));
  CHECK_THAT(message, Contains("no policy files"));
}

// Regression (fixed): same cause as above; with a valid policy beside dangling symlinks, the load
// fails or succeeds depending on which entry readdir lists last.
TEST_CASE("dangling symlinks beside a valid policy do not fail the load", "[policy_store]") {
  temp_dir dir("policy-store");
  dir.write("torch.yaml", policy_yaml("torch", "torch", true));
  for (int i = 0; i < 16; ++i) {
    fs::create_symlink("missing.yaml", dir.path / ("broken-" + std::to_string(i) + ".yaml"));
  }
  const auto load = load_policy_dir(dir.str());
  INFO("errors:\n" << joined(load.errors));
  CHECK(load.errors.empty());
  CHECK(load.policies != nullptr);
}

TEST_CASE("an owner kind's default policy must be a loaded policy", "[policies][owners]") {
  temp_dir dir("default-policy");
  for (const char* name : {"torch.yaml", "owners.yaml"})
    dir.write(name, trainenv::test::read_file(std::string(TRAINENV_POLICIES_DIR) + "/" + name));
  // volcano-job names volcano-pytorch, which this directory does not hold.
  const auto load = load_policy_dir(dir.str());
  REQUIRE(load.errors.size() == 1);
  CHECK_THAT(load.errors[0], Catch::Contains("owner kind \"volcano-job\": spec.defaultPolicy: no "
                                             "policy is named \"volcano-pytorch\""));
}
