// Micro benchmarks over the core, one stage at a time, for the four pod shapes of
// pod_shapes.hpp and the shipped policies. Run: build/bench/core_bench [--benchmark_filter=...]
//
//   review/<shape>    what /mutate does between the bytes in and the bytes out: decode, mutate,
//                     encode, serialise (the HTTP and TLS layers are bench/e2e.sh's business)
//   review_wait_off/<shape>  the same with serve --wait off: the readiness wait's cost
//   decode/<shape>    JSON text -> admission_request (parse, depth pre-scan, field extraction)
//   mutate/<shape>    admission_request -> decision (select, topology, render, patch)
//   render/<shape>    policy selection done: topology + the wanted entries, no diff
//   patch/<shape>     wanted entries -> JSON Patch (diff against the pod's lists)
//   encode/<shape>    decision -> AdmissionReview response text (patch dump, base64, audit)
//   select_among_policies/N   mutate with N loaded policies, the pod selecting the last one
#include <benchmark/benchmark.h>

#include "pod_shapes.hpp"
#include "synthetic_policies.hpp"
#include "trainenv/core/decide/diff.hpp"
#include "trainenv/core/decide/engine.hpp"
#include "trainenv/core/decide/pod_shape.hpp"
#include "trainenv/core/job/topology.hpp"
#include "trainenv/inputs/policy_dir.hpp"

namespace {

using namespace trainenv;

const core::policy_set& shipped() {
  static const auto load = inputs::load_policy_dir(TRAINENV_POLICIES_DIR);
  if (!load.errors.empty()) throw std::runtime_error(load.errors.front());
  return *load.policies;
}

core::admission_request decoded(const std::string& body) {
  auto request = core::decode_review(body);
  if (!request) throw std::runtime_error(request.message());
  return std::move(*request);
}

void review(benchmark::State& state, const std::string& body) {
  const auto& policies = shipped();
  for (auto _ : state) {
    auto request = decoded(body);
    const auto d = core::mutate(request, policies);
    auto out = core::encode_response(request, d);
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
}

// review with serve --wait off: the same pod without its readiness wait (docs/readiness.md), in
// the same run, for the wait's cost per admission.
void review_wait_off(benchmark::State& state, const std::string& body) {
  const auto& policies = shipped();
  core::mutate_options options;
  options.wait = false;
  for (auto _ : state) {
    auto request = decoded(body);
    const auto d = core::mutate(request, policies, options);
    auto out = core::encode_response(request, d);
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
}

void decode(benchmark::State& state, const std::string& body) {
  for (auto _ : state) {
    auto request = core::decode_review(body);
    benchmark::DoNotOptimize(request);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
}

void mutate(benchmark::State& state, const std::string& body) {
  const auto request = decoded(body);
  const auto& policies = shipped();
  for (auto _ : state) {
    auto d = core::mutate(request, policies);
    benchmark::DoNotOptimize(d);
  }
}

const core::policy& torch() {
  return *shipped().by_name("torch");
}

core::topology topology_of(const core::pod_view& pod) {
  core::topology_sources sources;
  sources.kinds = &shipped().owner_kinds();
  return core::resolve_topology(
             pod, torch(), core::choose_container(pod, torch(), shipped().sidecars()).index.value(),
             sources)
      .value();
}

void render(benchmark::State& state, const std::string& body) {
  const auto request = decoded(body);
  const auto& pod = request.pod();
  for (auto _ : state) {
    auto want = core::render(torch(), topology_of(pod), pod, {});
    benchmark::DoNotOptimize(want);
  }
}

void patch(benchmark::State& state, const std::string& body) {
  const auto request = decoded(body);
  const auto& pod = request.pod();
  const auto want = core::render(torch(), topology_of(pod), pod, {}).value();
  for (auto _ : state) {
    auto d = core::build_patch(pod, want, "torch");
    benchmark::DoNotOptimize(d);
  }
}

void encode(benchmark::State& state, const std::string& body) {
  const auto request = decoded(body);
  const auto d = core::mutate(request, shipped());
  if (!d.mutated()) throw std::runtime_error("the shape is not patched");
  for (auto _ : state) {
    auto out = core::encode_response(request, d);
    benchmark::DoNotOptimize(out);
  }
}

// Selection by framework value is a hash lookup: the cost of mutate must not grow with the
// number of loaded policies. The pod selects the last policy, the worst case for a scan.
void BM_select_among_policies(benchmark::State& state) {
  const auto count = static_cast<int>(state.range(0));
  const auto policies = test::synthetic_policies(count);
  const auto pod = test::pod_for_framework("fw-" + std::to_string(count - 1));
  for (auto _ : state) {
    auto d = core::mutate_pod(pod, policies);
    benchmark::DoNotOptimize(d);
  }
}
BENCHMARK(BM_select_among_policies)->Name("select_among_policies")->Arg(2)->Arg(50)->Arg(500);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  // Stage by stage, each over every shape, so a row's neighbours are its comparisons.
  const auto shapes = bench::pod_shapes();
  for (const auto& [stage, fn] : std::initializer_list<
           std::pair<const char*, void (*)(benchmark::State&, const std::string&)>>{
           {"review", review},
           {"review_wait_off", review_wait_off},
           {"decode", decode},
           {"mutate", mutate},
           {"render", render},
           {"patch", patch},
           {"encode", encode}}) {
    for (const auto& shape : shapes) {
      benchmark::RegisterBenchmark((std::string(stage) + "/" + shape.name).c_str(), fn, shape.body)
          ->Unit(benchmark::kMicrosecond);
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
