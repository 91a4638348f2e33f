// Reads a policy directory into a validated policy set, and fingerprints it without parsing.
#include "trainenv/inputs/policy_dir.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "trainenv/core/text/json_access.hpp"
#include "trainenv/inputs/yaml.hpp"

namespace trainenv::inputs {
namespace {

namespace fs = std::filesystem;

struct policy_file {
  std::string path;
  std::string text;
};

struct policy_files {
  std::vector<policy_file> files;
  std::vector<std::string> errors;
  std::size_t fingerprint = 0;
};

// Reads every candidate file; what is read, and only that, makes the fingerprint.
policy_files read_policy_files(const std::string& dir) {
  policy_files out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    out.errors.push_back(dir + ": not a directory (set --policies to the policy directory)");
    return out;
  }
  std::vector<fs::path> paths;
  fs::directory_iterator it(dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const auto& path = it->path();
    const auto name = path.filename().string();
    const auto ext = path.extension().string();
    if (name.empty() || name[0] == '.') continue;
    if (ext != ".yaml" && ext != ".yml" && ext != ".json") continue;
    // kustomize's own file, which lets the directory generate its ConfigMap (manifests/).
    if (name == "kustomization.yaml" || name == "kustomization.yml") continue;
    // Follows symlinks (a ConfigMap mount's keys are links into ..data); a dangling one, which the
    // kubelet leaves for a moment while it swaps keys, is skipped rather than failing the load.
    std::error_code file_ec;
    if (!fs::is_regular_file(path, file_ec)) continue;
    paths.push_back(path);
  }
  if (ec) {
    out.errors.push_back(dir + ": cannot list the directory: " + ec.message());
    return out;
  }
  std::sort(paths.begin(), paths.end());
  std::hash<std::string> hash;
  for (const auto& path : paths) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) {
      out.errors.push_back(path.string() + ": cannot read the file");
      continue;
    }
    out.fingerprint = out.fingerprint * 31 + hash(path.string()) * 7 + hash(text.str());
    out.files.push_back({path.string(), text.str()});
  }
  return out;
}

}  // namespace

std::size_t policy_dir_fingerprint(const std::string& dir) {
  return read_policy_files(dir).fingerprint;
}

namespace {

// What a policy directory's documents hold, before the set is built from them.
struct policy_documents {
  std::vector<core::policy> policies;
  std::vector<core::owner_kind> owner_kinds;
  std::vector<std::string> sidecars;
  std::vector<core::accelerator> accelerators;
  std::vector<core::startup_failure> startup_failures;

  // One document, by its kind (docs/policies.md): a policy, an owner kind (where a pod's counts
  // sit), the known sidecar containers, or the accelerators processes per node counts. A
  // problem is said in `errors`, naming `where`.
  void take(const nlohmann::json& document, const std::string& where,
            std::vector<std::string>& errors) {
    const auto* kind = core::string_member(document, "kind");
    const auto given = kind != nullptr ? std::string_view(*kind) : std::string_view();
    if (given == core::accelerator_list_kind) {
      auto listed = core::parse_accelerator_list(document, where);
      if (!listed) {
        errors.push_back(listed.message());
        return;
      }
      for (auto& a : *listed) accelerators.push_back(std::move(a));
    } else if (given == core::startup_failure_list_kind) {
      auto listed = core::parse_startup_failure_list(document, where);
      if (!listed) {
        errors.push_back(listed.message());
        return;
      }
      for (auto& f : *listed) startup_failures.push_back(std::move(f));
    } else if (given == core::sidecar_list_kind) {
      auto names = core::parse_sidecar_list(document, where);
      if (!names) {
        errors.push_back(names.message());
        return;
      }
      for (auto& name : *names) {
        if (std::find(sidecars.begin(), sidecars.end(), name) == sidecars.end())
          sidecars.push_back(std::move(name));
      }
    } else if (given == core::owner_kind_kind) {
      auto k = core::parse_owner_kind(document, where);
      if (!k) {
        errors.push_back(k.message());
        return;
      }
      owner_kinds.push_back(std::move(*k));
    } else {
      auto p = core::parse_policy(document, where);
      if (!p) {
        errors.push_back(p.message());
        return;
      }
      policies.push_back(std::move(*p));
    }
  }
};

}  // namespace

namespace {

// The files of a set, read, into the validated set; `where` names the set when it has no policy.
policy_load load_files(policy_files read, const std::string& where) {
  policy_load out;
  out.errors = std::move(read.errors);
  out.fingerprint = read.fingerprint;
  policy_documents found;
  for (const auto& file : read.files) {
    out.files.push_back(file.path);
    auto docs = parse_documents(file.text);
    if (!docs) {
      out.errors.push_back(file.path + ": " + docs.message());
      continue;
    }
    for (std::size_t i = 0; i < docs->size(); ++i) {
      found.take(
          (*docs)[i],
          docs->size() > 1 ? file.path + " (document " + std::to_string(i + 1) + ")" : file.path,
          out.errors);
    }
  }
  if (!out.errors.empty()) return out;
  if (found.policies.empty()) {
    out.errors.push_back(where + ": no policy files (*.yaml, *.yml, *.json) found");
    return out;
  }
  auto kinds = core::owner_kind_set::build(std::move(found.owner_kinds));
  if (!kinds) {
    out.errors.push_back(kinds.message());
    return out;
  }
  auto set = core::policy_set::build(std::move(found.policies), std::move(*kinds),
                                     std::move(found.sidecars), std::move(found.accelerators),
                                     std::move(found.startup_failures));
  if (!set) {
    out.errors.push_back(set.message());
    return out;
  }
  out.policies = std::make_shared<const core::policy_set>(std::move(*set));
  return out;
}

}  // namespace

policy_load load_policy_dir(const std::string& dir) {
  return load_files(read_policy_files(dir), dir);
}

policy_load load_policies(const std::string& dir) {
  if (!dir.empty()) return load_policy_dir(dir);
  policy_files built_in;
  for (const auto& file : shipped_policy_files())
    built_in.files.push_back({"built-in/" + std::string(file.name), std::string(file.text)});
  return load_files(std::move(built_in), std::string(built_in_policies));
}

}  // namespace trainenv::inputs
