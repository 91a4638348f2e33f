// Reading members of JSON objects whose shape is not trusted: absent, null and wrongly typed
// members read as "not there" instead of throwing. A bottom header: includes nothing of the core.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainenv::core {

// The member `key` of `object` as a string, or nullptr.
[[nodiscard]] const std::string* string_member(const nlohmann::json& object, std::string_view key);
// The member `key` of `object` when present and not null, or nullptr.
[[nodiscard]] const nlohmann::json* member(const nlohmann::json& object, std::string_view key);
// The member `key` of `object` as a string, or an empty one: no copy, no key string built
// (json's operator[] with a C string builds one per call).
[[nodiscard]] const std::string& string_or_empty(const nlohmann::json& object,
                                                 std::string_view key);

// The member `key` of `object` (which may be null) when it is an array, else an empty array.
[[nodiscard]] const nlohmann::json& array_member(const nlohmann::json* object,
                                                 std::string_view key);
// Whether the member `key` of `object` (which may be null) is the boolean true.
[[nodiscard]] bool true_member(const nlohmann::json* object, std::string_view key);

// A label or an annotation of an object that has metadata (a Job, an owner, a pod template:
// {metadata: {labels, annotations}}) as a string, or nullptr. A null object has none. (A Pod's
// own are read through pod_view, which reads them once.)
[[nodiscard]] const std::string* object_label(const nlohmann::json* object, std::string_view key);
[[nodiscard]] const std::string* object_annotation(const nlohmann::json* object,
                                                   std::string_view key);
// The label `key`, else the annotation `key`.
[[nodiscard]] const std::string* object_label_or_annotation(const nlohmann::json* object,
                                                            std::string_view key);

// A dotted path to a member, split once when it is loaded (an OwnerKind's
// "spec.replicatedJobs"), and the member it leads to, or nullptr.
using member_path = std::vector<std::string>;
[[nodiscard]] const nlohmann::json* find_path(const nlohmann::json& object,
                                              const member_path& path);
[[nodiscard]] std::string path_text(const member_path& path);  // "spec.replicatedJobs"

}  // namespace trainenv::core
