#include "trainenv/app/policy_store.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "trainenv/app/yaml.hpp"

namespace trainenv::app {

namespace fs = std::filesystem;

policy_load load_policy_dir(const std::string& dir) {
  policy_load out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    out.errors.push_back(dir + ": not a directory (set --policies to the policy directory)");
    return out;
  }
  std::vector<fs::path> files;
  fs::directory_iterator it(dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const auto& path = it->path();
    const auto name = path.filename().string();
    const auto ext = path.extension().string();
    if (name.empty() || name[0] == '.') continue;
    if (ext != ".yaml" && ext != ".yml" && ext != ".json") continue;
    // Follows symlinks (a ConfigMap mount's keys are links into ..data); a dangling one, which the
    // kubelet leaves for a moment while it swaps keys, is skipped rather than failing the load.
    std::error_code file_ec;
    if (!fs::is_regular_file(path, file_ec)) continue;
    files.push_back(path);
  }
  if (ec) {
    out.errors.push_back(dir + ": cannot list the directory: " + ec.message());
    return out;
  }
  std::sort(files.begin(), files.end());

  std::vector<core::policy> policies;
  for (const auto& path : files) {
    const auto source = path.string();
    out.files.push_back(source);
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) {
      out.errors.push_back(source + ": cannot read the file");
      continue;
    }
    auto docs = parse_documents(text.str());
    if (!docs) {
      out.errors.push_back(source + ": " + docs.message());
      continue;
    }
    for (std::size_t i = 0; i < docs->size(); ++i) {
      const auto where =
          docs->size() > 1 ? source + " (document " + std::to_string(i + 1) + ")" : source;
      auto p = core::parse_policy((*docs)[i], where);
      if (!p) {
        out.errors.push_back(p.message());
        continue;
      }
      policies.push_back(std::move(*p));
    }
  }
  if (!out.errors.empty()) return out;
  if (policies.empty()) {
    out.errors.push_back(dir + ": no policy files (*.yaml, *.yml, *.json) found");
    return out;
  }
  auto set = core::policy_set::build(std::move(policies));
  if (!set) {
    out.errors.push_back(set.message());
    return out;
  }
  out.policies = std::make_shared<const core::policy_set>(std::move(*set));
  return out;
}

}  // namespace trainenv::app
