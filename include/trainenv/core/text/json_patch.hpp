// RFC 6902 JSON Patch builder: JSON-Pointer escaping, create-if-missing and append.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainenv::core {

// RFC 6901 token escaping: "~" -> "~0", "/" -> "~1".
[[nodiscard]] std::string escape_pointer_token(std::string_view token);

// Writes the operations as JSON text as they are added: the patch is sent as bytes, and
// building it as json values first (then writing and freeing them) cost more than the diff.
class patch_builder {
 public:
  // Adds `items` to the array `key` of the object at pointer `parent_path`: the array is
  // created as a whole unless `exists` (the caller read it: missing or null is not), else each
  // item is appended with "/-".
  void append(bool exists, std::string_view parent_path, std::string_view key,
              const std::vector<const nlohmann::json*>& items);
  // The same for items of any type: `write(out, item)` appends an item's JSON text to `out`.
  template <class Item, class Write>
  void append(bool exists, std::string_view parent_path, std::string_view key,
              const std::vector<const Item*>& items, Write write) {
    if (items.empty()) return;
    std::string path = std::string(parent_path) + "/" + escape_pointer_token(key);
    if (!exists) {
      begin_add(path);
      text_ += '[';
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i > 0) text_ += ',';
        write(text_, *items[i]);
      }
      text_ += "]}";
      return;
    }
    path += "/-";
    for (const auto* item : items) {
      begin_add(path);
      write(text_, *item);
      text_ += '}';
    }
  }
  // Adds members to the object at pointer `path`: created as a whole unless `exists` (the
  // caller knows: a pod's annotations are read apart from its tree), else each member is added
  // under its escaped key.
  void add_members(std::string_view path, bool exists, const nlohmann::json& members);
  void add(std::string_view path, const nlohmann::json& value);
  // Replaces the value at `path` with `value_json`, a JSON text (a controller's env entry the
  // live layout contradicts, docs/contract.md §4).
  void replace(std::string_view path, std::string_view value_json);
  void remove(std::string_view path);

  [[nodiscard]] bool empty() const { return ops_ == 0; }
  [[nodiscard]] std::size_t size() const { return ops_; }
  // The operations as a JSON array's text; empty when there are none.
  [[nodiscard]] std::string take();

 private:
  // Starts an operation `op` at `path`; the caller writes the rest and closes it with '}'.
  void begin(std::string_view op, std::string_view path);
  // Starts an "add" operation at `path`; the caller writes its value and closes it with '}'.
  void begin_add(std::string_view path);

  static constexpr std::size_t initial_capacity = 2048;
  std::string text_;
  std::size_t ops_ = 0;
};

}  // namespace trainenv::core
