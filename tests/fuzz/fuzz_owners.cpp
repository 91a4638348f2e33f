// Hostile answers from the API server on the owner walk. Each example pod of examples/owners is
// decided with its real owners, except one: the first input byte picks the pod and which owner
// the walk asks for is answered with the rest of the input, parsed as the API client parses an
// answer (core::parse_json; not an object is `malformed`). The rest is also read as a --owners
// file. Beyond "no crash, no leak, no UB" (the sanitizers):
//   - a denial is a `trainenv:` message;
//   - an allowed patch applies to the pod with nlohmann's json::patch;
//   - the patched pod, with the same answers, gets no further patch (reinvocation).
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "trainenv/core/decide/engine.hpp"
#include "trainenv/core/text/json_text.hpp"
#include "trainenv/inputs/owner_file.hpp"
#include "trainenv/inputs/yaml.hpp"

using nlohmann::json;
using namespace trainenv;

namespace {

std::string read_example(const std::string& name) {
  std::ifstream in(std::string(TRAINENV_EXAMPLES_DIR) + "/owners/" + name, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct scenario {
  json pod;
  inputs::owner_file owners;
};

const std::vector<scenario>& scenarios() {
  static const auto all = [] {
    std::vector<scenario> out;
    for (const auto& [pod, owners] :
         {std::pair{"trainer-torch-pod.yaml", "trainer-torch-owners.yaml"},
          std::pair{"deepspeed-launcher-pod.yaml", "deepspeed-owners.yaml"},
          std::pair{"volcano-worker-pod.yaml", "volcano-owners.yaml"}}) {
      auto p = inputs::parse_document(read_example(pod));
      auto o = inputs::owner_file::parse(read_example(owners), owners);
      fuzz::require(p.ok() && o.ok(), "the owner examples load", pod);
      out.push_back({std::move(*p), std::move(*o)});
    }
    return out;
  }();
  return all;
}

// The walk's answers: the scenario's objects, except the `victim`-th owner asked for (counted
// from 0), answered with `body`. The replaced owner is remembered by path, so that the second
// walk (of the patched pod) gets the same answers even if it asks in another order.
struct hostile_answers {
  const scenario& s;
  std::size_t victim;
  std::string_view body;
  std::optional<std::string> replaced;  // the path answered with `body`
  std::size_t asked = 0;

  void operator()(const core::owner_ref& ref, core::owner_values& owners) {
    const auto path = ref.kind + "/" + ref.namespace_name + "/" + ref.name;
    const bool hostile = replaced ? *replaced == path : asked == victim;
    ++asked;
    if (!hostile) {
      s.owners.answer(ref, owners);
      return;
    }
    replaced = path;
    auto parsed = core::parse_json(body);
    if (!parsed || !parsed->is_object()) {
      owners.add_failure(ref, core::lookup_failure::malformed, "not a JSON object");
      return;
    }
    owners.add(ref, std::move(*parsed));
  }
};

void check(const json& pod, const core::decision& d, hostile_answers& again,
           const core::policy_set& policies) {
  if (!d.allowed) {
    fuzz::require(d.message.rfind("trainenv: ", 0) == 0, "a denial is a trainenv: message",
                  d.message);
    return;
  }
  if (!d.mutated()) return;
  json patched;
  try {
    patched = pod.patch(d.patch());
  } catch (const json::exception& e) {
    fuzz::require(false, "the patch applies to the pod",
                  std::string(e.what()) + "\n" + d.patch().dump());
  }
  again.asked = 0;
  const auto second = core::decide(patched, policies, {}, std::ref(again));
  fuzz::require(second.allowed && second.patch().empty(), "the patched pod needs no further patch",
                second.patch().dump() + "\n" + second.message);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const auto& policies = fuzz::shipped_policies();
  const auto& all = scenarios();
  const auto& s = all[data[0] % all.size()];
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);

  hostile_answers answers{s, static_cast<std::size_t>(data[0] / all.size()) % 4, body, {}, 0};
  const auto d = core::decide(s.pod, policies, {}, std::ref(answers));
  check(s.pod, d, answers, policies);

  // The same bytes as a --owners file.
  if (auto file = inputs::owner_file::parse(body, "fuzz")) {
    const auto from_file = core::decide(
        s.pod, policies, {},
        [&](const core::owner_ref& ref, core::owner_values& o) { file->answer(ref, o); });
    if (!from_file.allowed)
      fuzz::require(from_file.message.rfind("trainenv: ", 0) == 0,
                    "a denial is a trainenv: message", from_file.message);
  }
  return 0;
}
