// The /mutate path on arbitrary bytes: decode_review -> mutate (shipped policies) ->
// encode_response. Beyond "no crash, no leak, no UB" (the sanitizers), it checks what a wrong
// answer would break in a cluster:
//   - text that decodes also parses whole into nlohmann values (the same rules: no key twice
//     anywhere), and the review written back out from those values gets the same decision;
//   - a patch applies to the pod with nlohmann's json::patch (an applier we did not write);
//   - the patched pod, fed back in, gets no further patch (reinvocation is idempotent);
//   - the response is valid JSON carrying the request's uid.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.hpp"
#include "trainenv/core/decide/engine.hpp"
#include "trainenv/core/model/admission.hpp"

using nlohmann::json;
using namespace trainenv;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const auto& policies = fuzz::shipped_policies();
  auto request = core::decode_review(body);
  if (!request) return 0;
  const auto d = core::mutate(*request, policies);

  const auto text = core::encode_response(*request, d);
  const auto response = json::parse(text, nullptr, false);
  fuzz::require(!response.is_discarded(), "the response is valid JSON", text);
  fuzz::require(response["response"]["uid"] == request->uid, "the response carries the uid", text);

  auto whole = core::parse_json(body);
  fuzz::require(whole.ok(), "text that decodes also parses whole",
                whole.ok() ? std::string() : whole.message());
  auto whole_request = core::decode_review_json(*whole);
  fuzz::require(whole_request.ok(), "a whole review decodes like its text", std::string(body));
  const auto reference = core::mutate(*whole_request, policies);
  fuzz::require(d.allowed == reference.allowed && d.patch() == reference.patch() &&
                    d.warnings == reference.warnings && d.message == reference.message,
                "the decision from the text equals the one from its values written out",
                d.patch().dump() + "\nvs\n" + reference.patch().dump() + "\n" + d.message +
                    "\nvs\n" + reference.message);

  if (!d.mutated()) return 0;
  // Reinvoked as the apiserver does it: the same review, carrying the patched pod.
  auto& object = (*whole)["request"]["object"];
  try {
    object = object.patch(d.patch());
  } catch (const json::exception& e) {
    fuzz::require(false, "the patch applies to the pod",
                  std::string(e.what()) + "\n" + d.patch().dump());
  }
  auto reinvoked = core::decode_review_json(*whole);
  fuzz::require(reinvoked.ok(), "the patched review decodes",
                reinvoked.ok() ? std::string() : reinvoked.message());
  const auto again = core::mutate(*reinvoked, policies);
  fuzz::require(again.allowed && again.patch().empty(), "the patched pod needs no further patch",
                again.patch().dump() + "\n" + again.message);
  return 0;
}
