// What reading a pod's owners adds to an admission (docs/performance.md, "Owner lookups"):
// server::decide_with_owners, the walk /mutate runs, against a fake API server over real TLS on
// loopback (tests/support/fake_apiserver.hpp) serving examples/owners.
//
//   annotated     the Trainer torch pod with its counts and labels on it: no lookup (today's cost)
//   cache_hit     the same pod as Trainer makes it: four owners (Job, JobSet, TrainJob, runtime),
//                 all from the cache
//   cache_miss    the same, with a cache that keeps nothing: four GETs on a kept-alive connection
//   burst/1000    1,000 pods of one job at once on a cold cache; counter `gets` is the GETs sent
//   interleaved/1000  1,000 Trainer jobs of 10 pods each, their pods arriving in rounds of one pod
//                 per job (each job's owners read again 1,000 pods later); counters: GETs per
//                 owner object, new API connections, pods denied
//   slow_api/10000  10,000 pods of one job at once against an API server that answers each GET
//                 after 50 ms; counters: pods denied (a pod that waited out its budget is one),
//                 new API connections, GETs
#include <cstdio>
#include <deque>

#include <benchmark/benchmark.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include "fake_apiserver.hpp"
#include "trainenv/inputs/policy_dir.hpp"
#include "trainenv/server/kube_client.hpp"
#include "trainenv/server/owner_lookup.hpp"

namespace {

using namespace trainenv;
using namespace std::chrono_literals;
using nlohmann::json;

std::string example(const std::string& name) {
  return std::string(TRAINENV_EXAMPLES_DIR) + "/owners/" + name;
}

const core::policy_set& policies() {
  static const auto load = inputs::load_policy_dir(TRAINENV_POLICIES_DIR);
  return *load.policies;
}

json trainer_pod() {
  auto pod = inputs::parse_document(test::read_file(example("trainer-torch-pod.yaml")));
  if (!pod) throw std::runtime_error(pod.message());
  return std::move(*pod);
}

json annotated_pod() {
  auto pod = trainer_pod();
  pod["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] = "trainer";
  pod["metadata"]["labels"]["trainer.kubeflow.org/framework"] = "torch";
  pod["metadata"]["annotations"]["trainenv.io/num-nodes"] = "3";
  pod["metadata"]["annotations"]["trainenv.io/nproc-per-node"] = "2";
  return pod;
}

// The example Trainer job renamed to job `j` of many: its names and its own objects' uids made
// distinct (the runtime is shared, as a cluster's jobs share a ClusterTrainingRuntime).
std::string nth_job(std::string text, int j) {
  const auto replace_all = [&text](const std::string& from, const std::string& to) {
    for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
      text.replace(at, from.size(), to);
    }
  };
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "%012d", j);
  for (const char* uid :
       {"44a4d773-2e6f-d024-e4c7-", "08632c4d-0133-e70f-d559-", "65d59278-2c6b-7791-641b-"}) {
    const auto at = text.find(uid);
    if (at != std::string::npos) replace_all(text.substr(at, 36), uid + std::string(suffix));
  }
  replace_all("bert", "job" + std::to_string(j));
  return text;
}

// The fake API server with the example owners, and an owner lookup against it on `ioc`.
struct setup {
  test::fake_apiserver api{{.max_lifetime = std::chrono::seconds(600)}};
  boost::asio::io_context ioc;
  server::owner_lookup lookup;
  server::metrics metrics;

  explicit setup(std::chrono::milliseconds ttl) {
    api.load_yaml(example("trainer-torch-owners.yaml"));
    auto client = server::kube_client::create(ioc.get_executor(), api.credentials());
    if (!client) throw std::runtime_error(client.message());
    server::owner_cache_options options;
    options.ttl = ttl;
    lookup.cache.emplace(ioc.get_executor(), std::move(*client), options);
    lookup.budget = 5s;
  }
  ~setup() {
    ioc.run();  // let the pooled connections' handlers finish before the cache goes
    lookup.cache.reset();
  }
  setup(const setup&) = delete;
  setup& operator=(const setup&) = delete;

  // Decides each pod (JSON text, read as /mutate reads a review's pod) concurrently; returns how
  // many were patched (`denied`: how many were not allowed).
  int decide(const std::vector<std::string>& pods, int* denied = nullptr) {
    int patched = 0;
    std::deque<core::pod_view> views;    // each lives until its coroutine has run
    std::deque<core::subject> subjects;  // likewise
    const core::mutate_options options;  // likewise: a coroutine argument is a reference
    for (const auto& text : pods) {
      auto document = core::parse_read_only(text);
      if (!document) throw std::runtime_error(document.message());
      const auto root = document->root();
      auto& view = views.emplace_back(std::move(*document), root);
      const auto& what = subjects.emplace_back(core::subject{view});
      boost::asio::co_spawn(ioc,
                            server::decide_with_owners(what, policies(), options, lookup, metrics),
                            [&](const std::exception_ptr& e, const core::decision& d) {
                              if (e) std::rethrow_exception(e);
                              if (d.allowed && d.mutated()) ++patched;
                              if (!d.allowed && denied != nullptr) ++*denied;
                            });
    }
    ioc.restart();
    ioc.run();
    return patched;
  }
};

void run_one(benchmark::State& state, const json& pod, std::chrono::milliseconds ttl) {
  setup s(ttl);
  const std::vector<std::string> one{pod.dump()};
  if (s.decide(one) != 1) state.SkipWithError("the pod was not patched");  // warms the pool
  const auto gets_before = s.api.total_gets();
  for (auto _ : state) benchmark::DoNotOptimize(s.decide(one));
  state.counters["gets_per_pod"] =
      benchmark::Counter(static_cast<double>(s.api.total_gets() - gets_before) /
                         static_cast<double>(state.iterations()));
}

void annotated(benchmark::State& state) {
  run_one(state, annotated_pod(), 10s);
}
void cache_hit(benchmark::State& state) {
  run_one(state, trainer_pod(), 3600s);
}
void cache_miss(benchmark::State& state) {
  run_one(state, trainer_pod(), 0ms);
}

void burst(benchmark::State& state) {
  const std::vector<std::string> pods(static_cast<std::size_t>(state.range(0)),
                                      trainer_pod().dump());
  double gets = 0;
  for (auto _ : state) {
    setup s(10s);  // a cold cache each time
    if (s.decide(pods) != static_cast<int>(pods.size())) state.SkipWithError("a pod not patched");
    gets += static_cast<double>(s.api.total_gets());
  }
  state.counters["gets"] = benchmark::Counter(gets / static_cast<double>(state.iterations()));
}

void interleaved(benchmark::State& state) {
  const int jobs = static_cast<int>(state.range(0));
  const auto owners_text = test::read_file(example("trainer-torch-owners.yaml"));
  const auto pod_text = test::read_file(example("trainer-torch-pod.yaml"));
  std::vector<std::string> pods;
  for (int j = 0; j < jobs; ++j) {
    auto pod = inputs::parse_document(nth_job(pod_text, j));
    if (!pod) throw std::runtime_error(pod.message());
    pods.push_back(pod->dump());
  }
  double gets_per_object = 0;
  double connections = 0;
  int denied = 0;
  for (auto _ : state) {
    setup s(10s);
    for (int j = 0; j < jobs; ++j) {
      auto docs = inputs::parse_documents(nth_job(owners_text, j));
      if (!docs) throw std::runtime_error(docs.message());
      for (const auto& doc : *docs) s.api.add_object(doc);
    }
    const auto accepts_before = s.api.accepts();
    for (int round = 0; round < 10; ++round) {
      if (s.decide(pods, &denied) != jobs) state.SkipWithError("a pod not patched");
    }
    // Each job's Job, JobSet and TrainJob, and the one runtime.
    gets_per_object += static_cast<double>(s.api.total_gets()) / (3.0 * jobs + 1);
    connections += static_cast<double>(s.api.accepts() - accepts_before);
  }
  const auto n = static_cast<double>(state.iterations());
  state.counters["gets_per_object"] = benchmark::Counter(gets_per_object / n);
  state.counters["connections"] = benchmark::Counter(connections / n);
  state.counters["denied"] = benchmark::Counter(denied / n);
}

void slow_api(benchmark::State& state) {
  const std::vector<std::string> pods(static_cast<std::size_t>(state.range(0)),
                                      trainer_pod().dump());
  double gets = 0;
  double connections = 0;
  int denied = 0;
  for (auto _ : state) {
    setup s(10s);  // a cold cache each time
    s.api.misbehave({.delay = 50ms});
    s.lookup.budget = 2s;  // serve's default
    s.decide(pods, &denied);
    gets += static_cast<double>(s.api.total_gets());
    connections += static_cast<double>(s.api.accepts());
  }
  const auto n = static_cast<double>(state.iterations());
  state.counters["gets"] = benchmark::Counter(gets / n);
  state.counters["connections"] = benchmark::Counter(connections / n);
  state.counters["denied"] = benchmark::Counter(denied / n);
}

BENCHMARK(annotated)->Unit(benchmark::kMicrosecond);
BENCHMARK(cache_hit)->Unit(benchmark::kMicrosecond);
BENCHMARK(cache_miss)->Unit(benchmark::kMicrosecond);
BENCHMARK(burst)->Arg(1000)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(interleaved)->Arg(1000)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(slow_api)->Arg(10000)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
