// AdmissionReview admission.k8s.io/v1 and v1beta1: decode a request, encode a response in the
// version received.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "trainenv/core/model/decision.hpp"
#include "trainenv/core/model/pod_view.hpp"
#include "trainenv/core/text/json_text.hpp"
#include "trainenv/core/text/result.hpp"

namespace trainenv::core {

// clang-tidy 14 reads the implicit special members through nlohmann::json's default member
// initialiser; none of them throws in practice.
struct admission_request {  // NOLINT(bugprone-exception-escape)
  std::string api_version;  // as received: admission.k8s.io/v1 or admission.k8s.io/v1beta1
  std::string uid;
  std::string group, version, resource, sub_resource;  // request.resource / subResource
  std::string operation;
  std::string namespace_name;
  std::string name;
  bool dry_run = false;
  nlohmann::json object;  // request.object, moved out of the review
  // Its labels and annotations, which decode_review reads apart from the tree: read the object
  // through pod().
  pod_maps object_maps;

  // The object as the engine reads it; the request must outlive the view.
  [[nodiscard]] pod_view pod() const { return pod_view(object, object_maps); }

  [[nodiscard]] bool is_pod_create() const;
};

// Errors are for a 400: not JSON, not an AdmissionReview, no request.uid. Of the pod, only
// what the engine reads (pod_fields_read) is built; the rest of the text is validated only.
[[nodiscard]] result<admission_request> decode_review(std::string_view body);
// A review already parsed whole (the preview path, where the mutated pod is shown).
[[nodiscard]] result<admission_request> decode_review_json(nlohmann::json document);

// The AdmissionReview response, as JSON text, in the version received.
[[nodiscard]] std::string encode_response(const admission_request& request, const decision& d);

[[nodiscard]] std::string base64_encode(std::string_view bytes);
[[nodiscard]] std::optional<std::string> base64_decode(std::string_view text);

}  // namespace trainenv::core
