// The pod model: a Pod read once, read-only, by every reader (the view, the diff, the shape check,
// render, the resources rules, the owner walk, the log line). Its JSON is the DOM simdjson parsed
// from the admission's text, read in place through json_ref: nothing is built per member, and a
// new reader of another field reads it where it is, with no list of fields to extend. What is
// read many times per admission is read once here: names, labels and annotations (flat, as
// string_maps), the containers list, the controlling ownerReference.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "trainenv/core/model/owner_ref.hpp"
#include "trainenv/core/text/json_ref.hpp"
#include "trainenv/core/text/string_map.hpp"

namespace trainenv::core {

class pod_view {
 public:
  // No pod: json() is none.
  pod_view() = default;
  // The object at `pod` in `document`, which the view keeps. `request_namespace`: the namespace
  // the admission request names, the pod's when its metadata names none (the apiserver fills it
  // in before admission; a review written by hand may not).
  pod_view(read_only_json document, json_ref pod, std::string_view request_namespace = {});
  // A pod held as nlohmann values (a preview's, a generated one, a test's): written out and read
  // back, so that every pod is read the one way.
  explicit pod_view(const nlohmann::json& pod);

  pod_view(pod_view&&) noexcept = default;
  pod_view& operator=(pod_view&&) noexcept = default;
  pod_view(const pod_view&) = delete;
  pod_view& operator=(const pod_view&) = delete;
  ~pod_view() = default;

  // The pod's JSON: none when there is no pod, and not always an object.
  [[nodiscard]] const json_ref& json() const { return pod_; }
  [[nodiscard]] const string_map& labels() const { return labels_; }
  [[nodiscard]] const string_map& annotations() const { return annotations_; }

  // The string value, or nullptr when the key is absent or its value is not a string.
  [[nodiscard]] const std::string_view* label(std::string_view key) const {
    return labels_.find(key);
  }
  [[nodiscard]] const std::string_view* annotation(std::string_view key) const {
    return annotations_.find(key);
  }

  // Each: nullptr when absent or not a string, as label() is.
  [[nodiscard]] const std::string_view* name() const { return known(name_); }
  [[nodiscard]] const std::string_view* generate_name() const { return known(generate_name_); }
  [[nodiscard]] const std::string_view* namespace_name() const { return known(namespace_); }
  [[nodiscard]] const std::string_view* hostname() const { return known(hostname_); }
  [[nodiscard]] const std::string_view* subdomain() const { return known(subdomain_); }

  // spec.containers when it is an array, else none.
  [[nodiscard]] const json_ref& containers() const { return containers_; }
  // spec, when the pod has one (not null), else none.
  [[nodiscard]] const json_ref& spec() const { return spec_; }
  // The ownerReference with `controller: true` (controller_of in the pod's namespace), read on
  // first use and kept: the owner walk asks for it several times per admission.
  [[nodiscard]] const std::optional<owner_ref>& controller() const;

 private:
  void read(std::string_view request_namespace);

  read_only_json document_;
  json_ref pod_, metadata_, spec_, containers_;
  string_map labels_, annotations_;
  // The namespace_ of a pod whose metadata names none: on the heap, where a move leaves it.
  std::unique_ptr<const std::string> request_namespace_;
  // Read once: every accessor returns the same kind of pointer, a view.
  std::optional<std::string_view> name_, generate_name_, namespace_, hostname_, subdomain_;

  static const std::string_view* known(const std::optional<std::string_view>& v) {
    return v ? &*v : nullptr;
  }
  mutable std::optional<std::optional<owner_ref>> controller_;  // once read
};

// The value an env entry's fieldRef to the pod itself resolves to when the kubelet starts it, if
// it is one known at admission: metadata.name, metadata.namespace, or one of its labels or
// annotations. nullopt otherwise (a literal value, a resourceFieldRef, status.podIP, ...).
[[nodiscard]] std::optional<std::string_view> field_ref_value(const pod_view& pod,
                                                              const json_ref& env);

}  // namespace trainenv::core
