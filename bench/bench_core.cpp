// Micro benchmarks over the pure core. Run: build/bench/core_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include "synthetic_policies.hpp"
#include "trainenv/core/engine.hpp"

namespace {

using namespace trainenv;

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
BENCHMARK(BM_select_among_policies)->Arg(2)->Arg(50)->Arg(500);

}  // namespace

BENCHMARK_MAIN();
