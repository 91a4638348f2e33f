// Read-only accessors over a Pod's JSON: labels, annotations, names, containers.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "trainenv/core/model/owner_ref.hpp"
#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/json_text.hpp"
#include "trainenv/core/text/string_map.hpp"

namespace trainenv::core {

// A pod's labels and annotations, flat: decode_review reads them from the text into these and
// not into the tree; a pod held whole as nlohmann values gets them from its tree (`of`).
struct pod_maps {
  enum slot : int { labels_slot = 0, annotations_slot = 1 };
  std::array<string_map, 2> maps;  // by slot: parse_json fills a span of them

  [[nodiscard]] const string_map& labels() const { return maps[labels_slot]; }
  [[nodiscard]] const string_map& annotations() const { return maps[annotations_slot]; }
  [[nodiscard]] static pod_maps of(const nlohmann::json& pod);
};

// Every part of a Pod that the engine reads (pod_view, topology, render, the patch diff).
// decode_review builds only these from the text, so a new reader of another field must be
// added here; the tests and the decode fuzz target check that a pod decoded this way gets the
// same decision as the whole pod.
// Of each ownerReference, what controller_of reads.
inline constexpr json_keep owner_reference_read[] = {
    {"apiVersion"}, {"kind"}, {"name"}, {"uid"}, {"controller"}};
inline constexpr json_keep pod_metadata_read[] = {
    {"name"},
    {"generateName"},
    {"namespace"},
    {"labels", {}, pod_maps::labels_slot},
    {"annotations", {}, pod_maps::annotations_slot},
    {"ownerReferences", owner_reference_read, -1, true}};
// Of each container, what the engine reads or compares: the lists it merges into (whole, as
// entries are compared member by member), the command line, resources for the GPU count, and
// the image and securityContext an expanding init container copies. Init containers are kept
// whole: an added one is compared with the pod's own of that name.
inline constexpr json_keep container_fields_read[] = {
    {"name"},  {"image"},        {"command"},   {"args"},           {"env"},
    {"ports"}, {"volumeMounts"}, {"resources"}, {"securityContext"}};
inline constexpr json_keep pod_spec_read[] = {{"containers", container_fields_read, -1, true},
                                              {"initContainers"},
                                              {"volumes"},
                                              {"hostname"},
                                              {"subdomain"},
                                              {"securityContext"},
                                              {"dnsConfig"}};
inline constexpr json_keep pod_fields_read[] = {
    {"apiVersion"}, {"kind"}, {"metadata", pod_metadata_read}, {"spec", pod_spec_read}};

class pod_view {
 public:
  // A pod held whole: its labels and annotations are read from the tree into the view's own maps.
  // `pod` must outlive the view.
  explicit pod_view(const nlohmann::json& pod);
  // A pod decoded with `maps` (decode_review): both must outlive the view.
  pod_view(const nlohmann::json& pod, const pod_maps& maps);
  pod_view(const pod_view&) = delete;
  pod_view& operator=(const pod_view&) = delete;
  ~pod_view() = default;

  // The pod's tree; without its labels and annotations when it was decoded with maps.
  [[nodiscard]] const nlohmann::json& json() const { return *pod_; }
  [[nodiscard]] const string_map& labels() const { return maps_->labels(); }
  [[nodiscard]] const string_map& annotations() const { return maps_->annotations(); }

  // The string value, or nullptr when the key is absent or its value is not a string.
  [[nodiscard]] const std::string_view* label(std::string_view key) const;
  [[nodiscard]] const std::string_view* annotation(std::string_view key) const;

  // Each: nullptr when absent or not a string, as label() is.
  [[nodiscard]] const std::string_view* name() const { return known(name_); }
  [[nodiscard]] const std::string_view* generate_name() const { return known(generate_name_); }
  [[nodiscard]] const std::string_view* namespace_name() const { return known(namespace_); }
  [[nodiscard]] const std::string_view* hostname() const { return known(hostname_); }
  [[nodiscard]] const std::string_view* subdomain() const { return known(subdomain_); }

  // spec.containers when it is an array, else nullptr.
  [[nodiscard]] const nlohmann::json* containers() const { return containers_; }
  // The ownerReference with `controller: true` (controller_of in the pod's namespace), read on
  // first use and kept: the owner walk asks for it several times per admission.
  [[nodiscard]] const std::optional<owner_ref>& controller() const;

 private:
  const nlohmann::json* pod_;
  const nlohmann::json* metadata_;  // each: nullptr when absent (or null)
  const nlohmann::json* spec_;
  std::optional<pod_maps> own_maps_;  // a pod held whole
  const pod_maps* maps_;              // own_maps_ or the decoder's
  // Read once: every accessor returns the same kind of pointer, a view.
  std::optional<std::string_view> name_, generate_name_, namespace_, hostname_, subdomain_;
  const nlohmann::json* containers_;  // read once too: the engine asks for it several times

  static const std::string_view* known(const std::optional<std::string_view>& v) {
    return v ? &*v : nullptr;
  }
  mutable std::optional<std::optional<owner_ref>> controller_;  // once read
};

// The value an env entry's fieldRef to the pod itself resolves to when the kubelet starts it, if
// it is one known at admission: metadata.name, metadata.namespace, or one of its labels or
// annotations. nullopt otherwise (a literal value, a resourceFieldRef, status.podIP, ...).
[[nodiscard]] std::optional<std::string_view> field_ref_value(const pod_view& pod,
                                                              const nlohmann::json& env);

}  // namespace trainenv::core
