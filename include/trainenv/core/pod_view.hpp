// Read-only accessors over a Pod's JSON: labels, annotations, names, containers.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "trainenv/core/json_access.hpp"
#include "trainenv/core/json_text.hpp"
#include "trainenv/core/owner_ref.hpp"

namespace trainenv::core {

// Every part of a Pod that the engine reads (pod_view, topology, render, the patch diff).
// decode_review builds only these from the text, so a new reader of another field must be
// added here; the tests and the decode fuzz target check that a pod decoded this way gets the
// same decision as the whole pod.
inline constexpr json_keep pod_metadata_read[] = {
    {"name"}, {"generateName"}, {"namespace"}, {"labels"}, {"annotations"}, {"ownerReferences"}};
inline constexpr json_keep pod_spec_read[] = {
    {"containers"}, {"initContainers"}, {"volumes"}, {"hostname"}, {"subdomain"}};
inline constexpr json_keep pod_fields_read[] = {
    {"apiVersion"}, {"kind"}, {"metadata", pod_metadata_read}, {"spec", pod_spec_read}};

class pod_view {
 public:
  // `pod` must outlive the view. Finds metadata, its labels and annotations, and spec once: the
  // engine reads labels and annotations dozens of times per admission.
  explicit pod_view(const nlohmann::json& pod);

  [[nodiscard]] const nlohmann::json& json() const { return *pod_; }

  // The string value, or nullptr when the key is absent or its value is not a string.
  [[nodiscard]] const std::string* label(std::string_view key) const;
  [[nodiscard]] const std::string* annotation(std::string_view key) const;

  [[nodiscard]] const std::string* name() const;
  [[nodiscard]] const std::string* generate_name() const;
  [[nodiscard]] const std::string* namespace_name() const;
  [[nodiscard]] const std::string* hostname() const;
  [[nodiscard]] const std::string* subdomain() const;

  // spec.containers when it is an array, else nullptr.
  [[nodiscard]] const nlohmann::json* containers() const;
  // The container named `preferred`; if none has that name, the first; nullopt if none.
  [[nodiscard]] std::optional<std::size_t> target_container(std::string_view preferred) const;

  // The ownerReference with `controller: true` (controller_of in the pod's namespace), read on
  // first use and kept: the owner walk asks for it several times per admission.
  [[nodiscard]] const std::optional<owner_ref>& controller() const;

 private:
  const nlohmann::json* pod_;
  const nlohmann::json* metadata_;  // each: nullptr when absent (or null)
  const nlohmann::json* labels_;
  const nlohmann::json* annotations_;
  const nlohmann::json* spec_;
  mutable std::optional<std::optional<owner_ref>> controller_;  // once read
};

// The value an env entry's fieldRef to the pod itself resolves to when the kubelet starts it, if
// it is one known at admission: metadata.name, metadata.namespace, or one of its labels or
// annotations. nullptr otherwise (a literal value, a resourceFieldRef, status.podIP, ...).
[[nodiscard]] const std::string* field_ref_value(const nlohmann::json& pod,
                                                 const nlohmann::json& env);

}  // namespace trainenv::core
