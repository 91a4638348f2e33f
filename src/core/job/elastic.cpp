#include "trainenv/core/job/elastic.hpp"

#include <cctype>

#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/keys.hpp"
#include "trainenv/core/text/names.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;

// Bounds and restarts above this are not believed (as the owners' counts).
constexpr std::int64_t max_bound = 1'000'000;

// A Job Kueue admitted partially, without completions following parallelism: its pods past the
// admitted count start only as the first ones complete, which no training world survives.
void note_partial_admission(const owner_values& owners, std::vector<std::string>& notes) {
  for (const auto& f : owners.all()) {
    if (!f.fetched || f.ref.kind != "Job" || f.ref.group() != "batch") continue;
    const auto& job = f.object();
    if (object_annotation(&job, keys::kueue_min_parallelism) == nullptr) continue;
    const auto* equal = object_annotation(&job, keys::kueue_completions_equal);
    if (equal != nullptr && *equal == "true") continue;
    const auto* spec = member(job, "spec");
    const auto* parallelism = spec != nullptr ? member(*spec, "parallelism") : nullptr;
    const auto* completions = spec != nullptr ? member(*spec, "completions") : nullptr;
    if (parallelism == nullptr || completions == nullptr || !parallelism->is_number_integer() ||
        !completions->is_number_integer() ||
        parallelism->get<std::int64_t>() >= completions->get<std::int64_t>())
      continue;
    notes.push_back("trainenv: Kueue admitted " + f.ref.display() + " partially (parallelism " +
                    std::to_string(parallelism->get<std::int64_t>()) + " of completions " +
                    std::to_string(completions->get<std::int64_t>()) + ") without annotation " +
                    std::string(keys::kueue_completions_equal) +
                    ": the pods past the admitted count start only as the first ones end");
  }
}

}  // namespace

std::optional<std::pair<std::int64_t, std::int64_t>> parse_bounds(std::string_view text) {
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const auto min = parse_decimal(text.substr(0, colon), max_bound);
  const auto max = parse_decimal(text.substr(colon + 1), max_bound);
  if (!min || !max || *min < 1 || *min > *max) return std::nullopt;
  return std::pair(*min, *max);
}

result<elastic_reading> read_elastic(const pod_view& pod, const owner_values& owners,
                                     const trainer_settings* trainer) {
  elastic_reading out;
  if (const auto bounds = find_job_annotation(pod, owners, keys::elastic)) {
    const auto parsed = parse_bounds(bounds->value);
    if (!parsed) {
      return error{"trainenv: " + bounds->describe(keys::elastic) + " is " + quote(bounds->value) +
                   "; expected MIN:MAX with 1 <= MIN <= MAX (torchrun's --nnodes), e.g. \"2:8\""};
    }
    out.elastic =
        elastic_mode{parsed->first, parsed->second, std::nullopt, bounds->describe(keys::elastic)};
  } else if (trainer != nullptr && (trainer->elastic_min || trainer->elastic_max)) {
    const auto min = trainer->elastic_min.value_or(1);
    const auto max = trainer->elastic_max.value_or(min);
    const std::string where = "spec.mlPolicy.torch.elasticPolicy of " + trainer->runtime;
    if (min < 1 || min > max || max > max_bound) {
      return error{"trainenv: " + where + " gives minNodes " + std::to_string(min) +
                   " and maxNodes " + std::to_string(max) + "; expected 1 <= minNodes <= maxNodes"};
    }
    out.elastic = elastic_mode{min, max, trainer->elastic_max_restarts, where};
  }
  if (out.elastic) {
    if (const auto restarts = find_job_annotation(pod, owners, keys::max_restarts)) {
      const auto n = parse_decimal(restarts->value, max_bound);
      if (!n) {
        return error{"trainenv: " + restarts->describe(keys::max_restarts) + " is " +
                     quote(restarts->value) + "; expected a whole number >= 0"};
      }
      out.elastic->max_restarts = *n;
    }
  } else if (const auto kueue = find_job_annotation(pod, owners, keys::kueue_elastic);
             kueue && kueue->value == "true") {
    out.notes.push_back("trainenv: Kueue marks the job elastic (" +
                        kueue->describe(keys::kueue_elastic) + "), but it has no " +
                        std::string(keys::elastic) +
                        " bounds: wired statically, for its size now; set them to rendezvous "
                        "as it grows and shrinks");
  }
  if (const auto rendezvous = find_job_annotation(pod, owners, keys::rendezvous)) {
    if (rendezvous->value != "c10d") {
      return error{"trainenv: " + rendezvous->describe(keys::rendezvous) + " is " +
                   quote(rendezvous->value) + "; expected c10d (torch's rendezvous)"};
    }
    out.rendezvous_c10d = true;
  }
  note_partial_admission(owners, out.notes);
  return out;
}

std::string job_uid(const pod_view& pod, const owner_values& owners,
                    const trainer_settings* trainer) {
  if (trainer != nullptr && !trainer->trainjob_uid.empty()) return trainer->trainjob_uid;
  // The last object of the chain the walk read that runs pods (a Job's JobSet over the Job).
  std::string uid;
  for (const auto& f : owners.all()) {
    if (!f.fetched) continue;
    const auto* metadata = member(f.object(), "metadata");
    const auto* found = metadata != nullptr ? string_member(*metadata, "uid") : nullptr;
    if (found != nullptr && f.ref.kind != "ClusterTrainingRuntime" &&
        f.ref.kind != "TrainingRuntime" && f.ref.kind != "TrainJob")
      uid = *found;
  }
  if (!uid.empty()) return uid;
  if (const auto* jobset = pod.label(keys::jobset_uid)) return std::string(*jobset);
  if (const auto& controller = pod.controller()) return controller->uid;
  const auto* name = pod.name();
  return name != nullptr ? std::string(*name) : std::string("trainenv");
}

}  // namespace trainenv::core
