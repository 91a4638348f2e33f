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

struct admission_request {
  std::string api_version;  // as received: admission.k8s.io/v1 or admission.k8s.io/v1beta1
  std::string uid;
  std::string group, version, resource, sub_resource;  // request.resource / subResource
  std::string operation;
  std::string namespace_name;
  std::string name;
  bool dry_run = false;
  // request.object, read in place in the review's document, which it keeps.
  pod_view object;

  [[nodiscard]] const pod_view& pod() const { return object; }

  [[nodiscard]] bool is_pod_create() const;
};

// Errors are for a 400: not JSON (a key twice in one object included), not an AdmissionReview,
// no request.uid. Nothing is built of the pod: it is read where simdjson parsed it.
[[nodiscard]] result<admission_request> decode_review(std::string_view body);
// A review already parsed whole (the preview path, where the mutated pod is shown): written
// out and decoded as text is, so that every review is read the one way.
[[nodiscard]] result<admission_request> decode_review_json(const nlohmann::json& document);

// The AdmissionReview response, as JSON text, in the version received.
[[nodiscard]] std::string encode_response(const admission_request& request, const decision& d);

[[nodiscard]] std::string base64_encode(std::string_view bytes);
[[nodiscard]] std::optional<std::string> base64_decode(std::string_view text);

}  // namespace trainenv::core
