#include "trainenv/core/text/keys.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/names.hpp"

namespace trainenv::core {
namespace {

// The known key nearest `key`, when it is near enough to be the one meant: a third of its length
// in edits at most (num-node, nnodes, nproc_per_node, master_port).
std::string_view nearest_known(std::string_view key) {
  std::string_view best;
  std::size_t best_distance = key.size() / 3 + 1;
  for (const auto known : keys::known) {
    const auto d = edit_distance(key, known);
    if (d < best_distance) {
      best = known;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace

std::vector<std::string> unknown_key_warnings(std::span<const std::string_view> keys,
                                              std::string_view what, std::string_view on) {
  constexpr std::size_t most = 4;
  std::vector<std::string> out;
  for (const auto key : keys) {
    if (key.substr(0, keys::prefix.size()) != keys::prefix) continue;
    if (std::find(std::begin(keys::known), std::end(keys::known), key) != std::end(keys::known))
      continue;
    if (out.size() == most) {
      out.push_back("trainenv: more unknown trainenv.io/ " + std::string(what) + "s" +
                    std::string(on));
      break;
    }
    // Keys come from the request: cut, so that a warning stays one short line and the distances
    // cost a bounded time.
    const auto cut = key.substr(0, 80);
    std::string text =
        "trainenv: unknown " + std::string(what) + " " + std::string(cut) + std::string(on);
    const auto near = nearest_known(cut);
    text += near.empty() ? std::string(": trainenv reads no such key")
                         : " (did you mean " + std::string(near) + "?)";
    out.push_back(std::move(text));
  }
  return out;
}

std::vector<std::string> object_unknown_key_warnings(const nlohmann::json& object,
                                                     std::string_view on) {
  std::vector<std::string> out;
  const auto* metadata = member(object, "metadata");
  if (metadata == nullptr) return out;
  for (const char* field : {"annotations", "labels"}) {
    const auto* map = member(*metadata, field);
    if (map == nullptr || !map->is_object()) continue;
    std::vector<std::string_view> ours;
    for (const auto& [key, value] : map->items()) {
      if (key.substr(0, keys::prefix.size()) == keys::prefix) ours.emplace_back(key);
    }
    for (auto& w : unknown_key_warnings(ours, field[0] == 'a' ? "annotation" : "label", on))
      out.push_back(std::move(w));
  }
  return out;
}

}  // namespace trainenv::core
