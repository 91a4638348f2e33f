// Preview: what the webhook would answer for a Pod or an AdmissionReview, with the mutated
// Pod. Shared by POST /preview and `trainenv preview`, so both say exactly the same. Reading the
// input and showing the answer are split from the decision between them, so that each edge
// decides with the owners it has: the API through the server's cache (/preview), a --owners
// file or --kubeconfig (the command), or none.
#pragma once

#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "trainenv/core/decide/engine.hpp"
#include "trainenv/core/model/admission.hpp"
#include "trainenv/core/model/decision.hpp"
#include "trainenv/core/preview/job_preview.hpp"
#include "trainenv/core/text/result.hpp"
#include "trainenv/inputs/owner_file.hpp"

namespace trainenv::inputs {

// A Pod, or the Pod of an AdmissionReview with its request.
// clang-tidy 14 reads the implicit special members through nlohmann::json's members; none of
// them throws in practice.
struct preview_input {                             // NOLINT(bugprone-exception-escape)
  nlohmann::json pod;                              // as shown, patched
  core::pod_view view;                             // as the engine reads it
  std::optional<core::admission_request> request;  // an AdmissionReview (request.object moved out)

  // The review it came in, for core::subject; none for a bare pod.
  [[nodiscard]] const core::admission_request* review() const {
    return request ? &*request : nullptr;
  }
};

// clang-tidy 14 reads the implicit special members through nlohmann::json's members; none of
// them throws in practice.
struct preview_answer {  // NOLINT(bugprone-exception-escape)
  core::decision decision;
  nlohmann::json object;  // the Pod with the patch applied; null when denied
};

// An error means the input itself is unusable (not JSON/YAML, not a Pod or an AdmissionReview).
[[nodiscard]] core::result<preview_input> read_preview(std::string_view text);

// The documents of a `preview -f` file (`file` names it in messages): each Pod or AdmissionReview
// (an object with no kind counts as a Pod), in order, others skipped. An error when the file
// holds none; when it holds a job (a TrainJob, a JobSet, a Job), the error gives the
// `preview --job` command that previews it whole.
[[nodiscard]] core::result<std::vector<nlohmann::json>> read_preview_documents(
    std::string_view text, const std::string& file);

// The answer for `input` given its decision.
[[nodiscard]] preview_answer answer_preview(preview_input input, core::decision d);

// read_preview, core::decide with `fetch` (core::decide's), answer_preview: the synchronous
// preview (the fuzzers, tests). The edges' is server::preview_with_owners, the same three steps.
template <class Fetch>
[[nodiscard]] core::result<preview_answer> preview(std::string_view text,
                                                   const core::policy_set& policies,
                                                   const core::mutate_options& options,
                                                   Fetch fetch) {
  auto input = read_preview(text);
  if (!input) return std::move(input).take_error();
  auto d = core::decide(core::subject{input->view, input->review()}, policies, options,
                        std::move(fetch));
  return answer_preview(std::move(*input), std::move(d));
}

// With no owners to read: a pod that needs one is treated as its lookup failing (no_access).
[[nodiscard]] core::result<preview_answer> preview(std::string_view text,
                                                   const core::policy_set& policies,
                                                   const core::mutate_options& options);

// The answer as the edges show it: {"allowed", "policy", "patch", "object", "warnings",
// "message", "injected", "sources"}.
[[nodiscard]] nlohmann::json to_json(const preview_answer& answer);

// The same as a person reads it: the pod, its policy or why none, each value it is told and
// where the counts came from, its wait, and the warnings.
[[nodiscard]] std::string to_table(const preview_answer& answer);

// A job to preview (`preview --job`, POST /preview/job): one JSON or YAML object.
[[nodiscard]] core::result<nlohmann::json> read_job(std::string_view text);

// A job's preview as the edges show it: {"kind", "name", "namespace", "ok", "pods": [{"name",
// "role", "policy", "allowed", "nodeRank", "rank", "dnsName", "values", "warnings",
// "message"}], "problems": [{"message", "pods"}], "notes"}.
[[nodiscard]] nlohmann::json to_json(const core::job_preview& preview);
// The same as a table a person reads at a glance: the values every pod shares once, a row per
// pod, then the checks.
[[nodiscard]] std::string to_table(const core::job_preview& preview);

}  // namespace trainenv::inputs
