#include "trainenv/core/text/json_patch.hpp"

#include "trainenv/core/text/json_text.hpp"

namespace trainenv::core {

using namespace std::string_view_literals;

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

void patch_builder::begin(std::string_view op, std::string_view path) {
  if (ops_ == 0) {
    // Room for a typical patch at once, instead of doubling up to it (~1 KiB).
    text_.reserve(initial_capacity);
    text_ += '[';
  } else {
    text_ += ',';
  }
  ++ops_;
  text_.append(R"({"op":")"sv).append(op).append(R"(","path":)"sv);
  append_json_string(text_, path);
}

void patch_builder::begin_add(std::string_view path) {
  begin("add", path);
  text_.append(R"(,"value":)"sv);
}

void patch_builder::replace(std::string_view path, std::string_view value_json) {
  begin("replace", path);
  text_.append(R"(,"value":)"sv).append(value_json);
  text_ += '}';
}

void patch_builder::remove(std::string_view path) {
  begin("remove", path);
  text_ += '}';
}

void patch_builder::add(std::string_view path, const nlohmann::json& value) {
  begin_add(path);
  append_json(text_, value);
  text_ += '}';
}

void patch_builder::append(bool exists, std::string_view parent_path, std::string_view key,
                           const std::vector<const nlohmann::json*>& items) {
  append(exists, parent_path, key, items,
         [](std::string& out, const nlohmann::json& item) { append_json(out, item); });
}

void patch_builder::add_members(std::string_view path, bool exists, const nlohmann::json& members) {
  if (members.empty()) return;
  if (!exists) {
    add(path, members);
    return;
  }
  for (const auto& [name, value] : members.items())
    add(std::string(path) + "/" + escape_pointer_token(name), value);
}

std::string patch_builder::take() {
  if (ops_ != 0) text_ += ']';
  return std::move(text_);
}

}  // namespace trainenv::core
