// The job preview (`trainenv preview --job`, POST /preview/job) on arbitrary text: YAML or JSON,
// laid out as its controllers would create it (Trainer's runtimes from examples/jobs given),
// every pod decided, the whole checked. Beyond "no crash, no leak, no UB" (the sanitizers):
//   - an error and every problem are `trainenv:` messages or name pods of the job;
//   - every admitted pod, decided again with the job's objects, needs no further patch.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string_view>

#include "fuzz_support.hpp"
#include "trainenv/core/preview/job_preview.hpp"
#include "trainenv/inputs/owner_file.hpp"
#include "trainenv/inputs/preview.hpp"

using nlohmann::json;
using namespace trainenv;

namespace {

const std::vector<json>& runtimes() {
  static const auto all = [] {
    std::ifstream in(std::string(TRAINENV_EXAMPLES_DIR) + "/jobs/runtimes.yaml", std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    auto file = inputs::owner_file::parse(text.str(), "runtimes.yaml");
    fuzz::require(file.ok(), "the example runtimes load");
    return file->objects();
  }();
  return all;
}

// Small jobs only: each pod is decided, and a fuzzer's input should take milliseconds.
constexpr core::preview_bounds small_jobs{64, 128, std::size_t{1} << 20};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto job = inputs::read_job(text);
  if (!job) return 0;
  const auto& policies = fuzz::shipped_policies();
  auto preview = core::preview_job(*job, runtimes(), policies, small_jobs);
  if (!preview) {
    fuzz::require(preview.message().rfind("trainenv: ", 0) == 0,
                  "a preview error says trainenv:", preview.message());
    return 0;
  }
  (void)inputs::to_json(*preview).dump(-1, ' ', false, json::error_handler_t::replace);
  (void)inputs::to_table(*preview);
  std::vector<json> objects = preview->job.objects;
  objects.insert(objects.end(), runtimes().begin(), runtimes().end());
  for (const auto& p : preview->pods) {
    if (!p.d.allowed || !p.d.mutated()) continue;
    const auto again = core::decide(p.admitted, policies, {},
                                    [&](const core::owner_ref& ref, core::owner_values& owners) {
                                      if (const auto* o = core::find_object(objects, ref)) {
                                        owners.add(ref, *o);
                                      } else {
                                        owners.add_failure(ref, core::lookup_failure::not_found);
                                      }
                                    });
    fuzz::require(again.allowed && again.patch().empty(), "an admitted pod needs no further patch",
                  p.created.name + "\n" + again.patch().dump() + "\n" + again.message);
  }
  return 0;
}
