// RFC 6902 JSON Patch builder: JSON-Pointer escaping, create-if-missing and append.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainenv::core {

// RFC 6901 token escaping: "~" -> "~0", "/" -> "~1".
[[nodiscard]] std::string escape_pointer_token(std::string_view token);

class patch_builder {
 public:
  // Adds `items` to the array `key` of `parent`, which sits at pointer `parent_path`: the array
  // is created as a whole when missing (or null), else each item is appended with "/-".
  void append(const nlohmann::json& parent, std::string_view parent_path, std::string_view key,
              std::vector<nlohmann::json> items);
  // Adds members to the object `key` of `parent`: the object is created as a whole when
  // missing (or null), else each member is added under its escaped key.
  void add_members(const nlohmann::json& parent, std::string_view parent_path, std::string_view key,
                   nlohmann::json members);
  void add(std::string path, nlohmann::json value);

  [[nodiscard]] bool empty() const { return ops_.empty(); }
  [[nodiscard]] std::size_t size() const { return ops_.size(); }
  [[nodiscard]] nlohmann::json take() { return std::move(ops_); }

 private:
  nlohmann::json ops_ = nlohmann::json::array();
};

}  // namespace trainenv::core
