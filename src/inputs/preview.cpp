#include "trainenv/inputs/preview.hpp"

#include "trainenv/core/pod_view.hpp"
#include "trainenv/inputs/yaml.hpp"

namespace trainenv::inputs {

using nlohmann::json;

core::result<preview_answer> preview(std::string_view text, const core::policy_set& policies,
                                     const core::mutate_options& options) {
  auto document = parse_document(text);
  if (!document) return std::move(document).take_error();
  if (!document->is_object()) return core::error{"expected a Pod or an AdmissionReview object"};

  const auto* kind = core::string_member(*document, "kind");
  core::decision d;
  json pod;
  if (kind != nullptr && *kind == "AdmissionReview") {
    auto request = core::decode_review_json(std::move(*document));
    if (!request) return std::move(request).take_error();
    d = core::mutate(*request, policies, options);
    pod = std::move(request->object);
  } else {
    if (kind != nullptr && *kind != "Pod") {
      return core::error{"expected a Pod or an AdmissionReview, got kind \"" + kind->substr(0, 64) +
                         "\""};
    }
    pod = std::move(*document);
    d = core::mutate_pod(pod, policies, options);
  }

  json object = nullptr;
  if (d.allowed) object = d.mutated() ? pod.patch(d.patch) : std::move(pod);
  return preview_answer{std::move(d), std::move(object)};
}

json to_json(const preview_answer& answer) {
  const auto& d = answer.decision;
  const auto& injected = d.injected;
  return json{{"allowed", d.allowed},
              {"policy", d.policy},
              {"patch", d.patch},
              {"object", answer.object},
              {"warnings", d.warnings},
              {"message", d.message},
              {"injected",
               {{"env", injected.env},
                {"ports", injected.ports},
                {"mounts", injected.mounts},
                {"args", injected.args},
                {"volumes", injected.volumes},
                {"annotations", injected.annotations}}}};
}

}  // namespace trainenv::inputs
