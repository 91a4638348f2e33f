#include "trainenv/inputs/owner_file.hpp"

#include <string>

#include "trainenv/core/model/pod_view.hpp"
#include "trainenv/core/text/json_access.hpp"
#include "trainenv/inputs/yaml.hpp"

namespace trainenv::inputs {
namespace {

using nlohmann::json;

bool is_list(const json& document) {
  const auto* kind = core::string_member(document, "kind");
  return kind != nullptr && kind->size() >= 4 && kind->compare(kind->size() - 4, 4, "List") == 0 &&
         core::member(document, "items") != nullptr;
}

}  // namespace

core::result<owner_file> owner_file::parse(std::string_view text, std::string_view source) {
  auto documents = parse_documents(text);
  if (!documents) return core::error{std::string(source) + ": " + documents.message()};
  owner_file out;
  const auto add = [&](json object, const std::string& where) -> core::result<bool> {
    const auto* metadata = core::member(object, "metadata");
    if (!object.is_object() || core::string_member(object, "apiVersion") == nullptr ||
        core::string_member(object, "kind") == nullptr || metadata == nullptr ||
        core::string_member(*metadata, "name") == nullptr) {
      return core::error{std::string(source) + ": " + where +
                         " is not a Kubernetes object (apiVersion, kind and metadata.name)"};
    }
    out.objects_.push_back(std::move(object));
    return true;
  };
  for (std::size_t d = 0; d < documents->size(); ++d) {
    auto& document = (*documents)[d];
    const std::string where = "document " + std::to_string(d + 1);
    if (document.is_null()) continue;  // an empty document between two "---"
    if (!is_list(document)) {
      if (auto ok = add(std::move(document), where); !ok) return std::move(ok).take_error();
      continue;
    }
    auto& items = document["items"];
    if (!items.is_array()) {
      return core::error{std::string(source) + ": " + where + ": items must be a list"};
    }
    for (std::size_t i = 0; i < items.size(); ++i) {
      auto ok = add(std::move(items[i]), where + " item " + std::to_string(i + 1));
      if (!ok) return std::move(ok).take_error();
    }
  }
  return out;
}

const json* owner_file::find(const core::owner_ref& ref) const {
  return core::find_object(objects_, ref);
}

void owner_file::answer(const core::owner_ref& ref, core::owner_values& owners) const {
  if (const auto* object = find(ref)) {
    owners.add(ref, *object);
  } else {
    owners.add_failure(ref, core::lookup_failure::not_found, "not in the --owners file");
  }
}

}  // namespace trainenv::inputs
