#include "trainenv/inputs/preview.hpp"

#include "trainenv/core/pod_view.hpp"
#include "trainenv/inputs/yaml.hpp"

namespace trainenv::inputs {

using nlohmann::json;

core::decision preview_input::pass_through(const core::policy_set& policies) const {
  // core::mutate answers a review that is not a pod CREATE without reading any owner.
  return core::mutate(*request, policies);
}

core::result<preview_input> read_preview(std::string_view text) {
  auto document = parse_document(text);
  if (!document) return std::move(document).take_error();
  if (!document->is_object()) return core::error{"expected a Pod or an AdmissionReview object"};

  const auto* kind = core::string_member(*document, "kind");
  preview_input input;
  if (kind != nullptr && *kind == "AdmissionReview") {
    auto request = core::decode_review_json(std::move(*document));
    if (!request) return std::move(request).take_error();
    input.pod = std::move(request->object);
    request->object = nullptr;
    input.request = std::move(*request);
    return input;
  }
  if (kind != nullptr && *kind != "Pod") {
    return core::error{"expected a Pod or an AdmissionReview, got kind \"" + kind->substr(0, 64) +
                       "\""};
  }
  input.pod = std::move(*document);
  return input;
}

preview_answer answer_preview(preview_input input, core::decision d) {
  json object = nullptr;
  if (d.allowed) object = d.mutated() ? input.pod.patch(d.patch()) : std::move(input.pod);
  return preview_answer{std::move(d), std::move(object)};
}

core::result<preview_answer> preview(std::string_view text, const core::policy_set& policies,
                                     const core::mutate_options& options) {
  return preview(text, policies, options, [](const core::owner_ref& ref, core::owner_values& o) {
    o.add_failure(ref, core::lookup_failure::no_access, "no API access (give --owners FILE)");
  });
}

core::result<preview_answer> preview(std::string_view text, const core::policy_set& policies,
                                     const core::mutate_options& options,
                                     const owner_file& owners) {
  return preview(
      text, policies, options,
      [&owners](const core::owner_ref& ref, core::owner_values& o) { owners.answer(ref, o); });
}

json to_json(const preview_answer& answer) {
  const auto& d = answer.decision;
  const auto& injected = d.injected;
  json sources = json::array();
  for (const auto& s : d.sources)
    sources.push_back({{"name", s.name}, {"value", s.value}, {"source", s.source}});
  return json{{"allowed", d.allowed},
              {"policy", d.policy},
              {"patch", d.patch()},
              {"object", answer.object},
              {"warnings", d.warnings},
              {"message", d.message},
              {"sources", std::move(sources)},
              {"injected",
               {{"env", injected.env},
                {"ports", injected.ports},
                {"mounts", injected.mounts},
                {"args", injected.args},
                {"volumes", injected.volumes},
                {"annotations", injected.annotations}}}};
}

}  // namespace trainenv::inputs
