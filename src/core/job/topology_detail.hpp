// The parts of topology.cpp and topology_layout.cpp both use: reading a pod's labels and
// annotations as sourced values and numbers. Internal to the job wing (not under include/).
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "trainenv/core/job/owner_walk.hpp"
#include "trainenv/core/job/topology.hpp"
#include "trainenv/core/model/pod_view.hpp"
#include "trainenv/core/text/names.hpp"
#include "trainenv/core/text/result.hpp"

namespace trainenv::core::topology_detail {

inline const std::string_view* non_empty(const std::string_view* s) {
  return s != nullptr && !s->empty() ? s : nullptr;
}

// The first present, non-empty source wins. Its name is written only for a message.
struct sourced {
  const std::string_view* value = nullptr;
  std::string_view kind;  // "annotation", "label", "spec.subdomain"
  std::string_view key;   // of the annotation or label

  [[nodiscard]] std::string source() const {
    return key.empty() ? std::string(kind) : std::string(kind) + " " + std::string(key);
  }
};

inline sourced first_of(std::initializer_list<sourced> candidates) {
  for (const auto& c : candidates) {
    if (non_empty(c.value) != nullptr) return c;
  }
  return {};
}

inline std::string label_name(std::string_view key) {
  return "label " + std::string(key);
}
inline std::string annotation_name(std::string_view key) {
  return "annotation " + std::string(key);
}

inline sourced label_or_annotation(const pod_view& pod, std::string_view key) {
  if (const auto* v = non_empty(pod.label(key))) return {v, "label", key};
  return {non_empty(pod.annotation(key)), "annotation", key};
}

// A label the pod's controller writes (owner_kind::labels), as a sourced value.
inline sourced controller_label(const pod_view& pod, const owner_kind_set& kinds,
                                pod_label_field field) {
  const auto read = read_pod_label(pod, kinds, field);
  return {read.value, read.from, read.key};
}

// The owner kinds the sources name; none when they name none.
inline const owner_kind_set& kinds_of(const topology_sources& src) {
  static const owner_kind_set none;
  return src.kinds != nullptr ? *src.kinds : none;
}

// A whole number from `min` to `max` in a label or annotation; nullopt when absent.
inline result<std::optional<std::int64_t>> read_number(const std::string_view* text,
                                                       const std::string& what, std::int64_t min,
                                                       std::int64_t max) {
  if (text == nullptr) return std::optional<std::int64_t>();
  const auto n = parse_decimal(trim(*text), max);
  if (!n || *n < min) {
    return error{"trainenv: " + what + " is " + quote(*text) + "; expected a whole number from " +
                 std::to_string(min) + " to " + std::to_string(max)};
  }
  return std::optional<std::int64_t>(*n);
}

inline result<std::optional<std::int64_t>> read_int_annotation(const pod_view& pod,
                                                               std::string_view key,
                                                               std::int64_t min, std::int64_t max) {
  return read_number(pod.annotation(key), annotation_name(key), min, max);
}

inline std::string replicas_text(const job_layout& layout) {
  std::string out;
  for (const auto& r : layout.roles)
    out += (out.empty() ? "" : ",") + r.name + "=" + std::to_string(r.pods);
  return out;
}

// The job's layout: the owner's when it was read (with trainenv.io/replicas over it), else what
// the pod's annotations and labels say (topology_layout.cpp).
result<bool> build_layout(const pod_view& pod, const policy& p, const topology_sources& src,
                          const std::string& role, std::int64_t nodes, job_layout& layout);
result<bool> find_own_role(const pod_view& pod, const policy& p, const topology_sources& src,
                           const std::string& role, job_layout& layout);
result<bool> own_jobs_from_labels(const pod_view& pod, const owner_kind_set& kinds, std::size_t own,
                                  job_layout& layout);
result<bool> apply_num_nodes(std::int64_t nodes, job_layout& layout);

}  // namespace trainenv::core::topology_detail
