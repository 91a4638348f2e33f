// The preview path (POST /preview and `trainenv preview`) on arbitrary text: YAML or JSON, a
// Pod or an AdmissionReview, the shipped policies. An allowed answer's "object" must be the
// input pod with the answer's patch applied, and stable under another pass.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.hpp"
#include "trainenv/inputs/preview.hpp"

using nlohmann::json;
using namespace trainenv;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto& policies = fuzz::shipped_policies();
  const auto answer = inputs::preview(text, policies, {});
  if (!answer) return 0;
  (void)inputs::to_json(*answer).dump(-1, ' ', false, json::error_handler_t::replace);
  if (!answer->decision.allowed || !answer->decision.mutated()) return 0;
  const auto again = core::mutate_pod(answer->object, policies);
  fuzz::require(again.allowed && again.patch().empty(), "the previewed pod needs no further patch",
                again.patch().dump() + "\n" + again.message);
  return 0;
}
