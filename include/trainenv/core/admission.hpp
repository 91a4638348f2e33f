// AdmissionReview admission.k8s.io/v1 and v1beta1: decode a request, encode a response in the
// version received.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "trainenv/core/result.hpp"

namespace trainenv::core {

struct decision;

struct admission_request {
  std::string api_version;  // as received: admission.k8s.io/v1 or admission.k8s.io/v1beta1
  std::string uid;
  std::string group, version, resource, sub_resource;  // request.resource / subResource
  std::string operation;
  std::string namespace_name;
  std::string name;
  bool dry_run = false;
  nlohmann::json object;  // request.object, moved out of the review

  [[nodiscard]] bool is_pod_create() const;
};

// Errors are for a 400: not JSON, not an AdmissionReview, no request.uid.
[[nodiscard]] result<admission_request> decode_review(std::string_view body);
[[nodiscard]] result<admission_request> decode_review_json(nlohmann::json document);

[[nodiscard]] nlohmann::json encode_response(const admission_request& request, const decision& d);

// Deepest nesting accepted from untrusted text. Pods nest a few dozen levels; nlohmann's copy,
// comparison and dump recurse, so a deeper document could overflow the stack.
inline constexpr int max_json_depth = 1000;

// Where `text` first opens more than `limit` arrays/objects outside strings, if it does: a
// linear scan before any parser recurses or builds anything.
[[nodiscard]] std::optional<std::size_t> nesting_exceeded_at(std::string_view text,
                                                             int limit = max_json_depth);

// Parses untrusted JSON text; the error names the byte offset, or the nesting limit.
[[nodiscard]] result<nlohmann::json> parse_json(std::string_view text);

[[nodiscard]] std::string base64_encode(std::string_view bytes);
[[nodiscard]] std::optional<std::string> base64_decode(std::string_view text);

}  // namespace trainenv::core
