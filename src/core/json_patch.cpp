#include "trainenv/core/json_patch.hpp"

#include "trainenv/core/json_access.hpp"

namespace trainenv::core {

std::string escape_pointer_token(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

void patch_builder::add(std::string path, nlohmann::json value) {
  // Member by member: an initializer list would build (and copy) a temporary array per pair.
  nlohmann::json op(nlohmann::json::value_t::object);
  auto& members = op.get_ref<nlohmann::json::object_t&>();
  members.emplace("op", "add");
  members.emplace("path", std::move(path));
  members.emplace("value", std::move(value));
  ops_.push_back(std::move(op));
}

void patch_builder::append(const nlohmann::json& parent, std::string_view parent_path,
                           std::string_view key, std::vector<nlohmann::json> items) {
  if (items.empty()) return;
  std::string path = std::string(parent_path) + "/" + escape_pointer_token(key);
  if (member(parent, key) == nullptr) {
    add(std::move(path), nlohmann::json(std::move(items)));
    return;
  }
  path += "/-";
  for (auto& item : items) add(path, std::move(item));
}

void patch_builder::add_members(const nlohmann::json& parent, std::string_view parent_path,
                                std::string_view key, nlohmann::json members) {
  if (members.empty()) return;
  std::string path = std::string(parent_path) + "/" + escape_pointer_token(key);
  if (member(parent, key) == nullptr) {
    add(std::move(path), std::move(members));
    return;
  }
  for (const auto& [name, value] : members.items())
    add(path + "/" + escape_pointer_token(name), value);
}

}  // namespace trainenv::core
