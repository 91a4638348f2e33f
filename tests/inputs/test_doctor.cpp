// trainenv doctor over live jobs as `kubectl get -o json` lists them (tests/fixtures/doctor/,
// written by tests/doctor/make_fixtures.py): each failure fixture gives exactly its findings, and
// a healthy job of each owner kind gives none.
#include <algorithm>
#include <set>

#include <catch2/catch.hpp>

#include "trainenv/inputs/doctor.hpp"
#include "trainenv/inputs/owner_file.hpp"

#include "../support/doctor_fixtures.hpp"
#include "../support/shipped_policies.hpp"

namespace {

using namespace trainenv;

struct doctored {
  core::diagnosis d;
  std::multiset<std::string> kinds;  // of the findings
};

core::live_job live(const std::string& fixture, const std::string& target) {
  const auto dump = test::doctor_fixture(fixture);
  auto parsed_target = inputs::parse_doctor_target(target);
  REQUIRE(parsed_target);
  auto job = inputs::live_job_from(dump.objects(), *parsed_target, "team-a", "the fixture");
  INFO((job.ok() ? std::string() : job.message()));
  REQUIRE(job);
  return std::move(*job);
}

doctored doctor(const std::string& fixture, const std::string& target = "jobset/gpt") {
  auto d = core::diagnose(live(fixture, target), test::shipped_policies());
  INFO((d.ok() ? std::string() : d.message()));
  REQUIRE(d);
  doctored out{std::move(*d), {}};
  for (const auto& f : out.d.findings) out.kinds.insert(f.kind);
  return out;
}

std::string described(const core::diagnosis& d) {
  return inputs::to_table(d);
}

}  // namespace

TEST_CASE("doctor: a healthy job of each owner kind has no finding", "[doctor]") {
  for (const auto& c : test::doctor_cases()) {
    if (!c.kinds.empty()) continue;
    INFO(c.fixture);
    const auto r = doctor(c.fixture, c.target);
    INFO(described(r.d));
    CHECK(r.d.findings.empty());
    CHECK(r.d.healthy());
    CHECK(r.d.live_pods == r.d.layout_pods);
    for (const auto& row : r.d.rows) {
      INFO(row.name);
      CHECK(row.expected_rank == row.actual_rank);
      if (row.expected_rank) CHECK(row.admitted == "yes");
    }
  }
}

TEST_CASE("doctor: a pod named for its job stands for the job", "[doctor]") {
  const auto by_job = doctor("healthy-trainjob", "trainjob/llama");
  const auto by_pod = doctor("healthy-trainjob", "pod/" + by_job.d.rows.front().name);
  CHECK(by_pod.d.kind == "TrainJob");
  CHECK(by_pod.d.name == "llama");
}

TEST_CASE("doctor: each failure gives exactly its findings", "[doctor]") {
  std::set<std::string> kinds_met;
  for (const auto& c : test::doctor_cases()) {
    INFO(c.fixture);
    const auto r = doctor(c.fixture, c.target);
    INFO(described(r.d));
    CHECK(r.kinds == c.kinds);
    CHECK(r.d.healthy() == c.healthy);
    kinds_met.insert(c.kinds.begin(), c.kinds.end());
  }
  // Every kind docs/doctor.md lists has its fixture.
  CHECK(kinds_met.size() == 25);
}

TEST_CASE("doctor: a stale pod's finding names the value found, the one expected and the owner",
          "[doctor]") {
  const auto r = doctor("stale-after-resize", "job/pretrain");
  REQUIRE_FALSE(r.d.findings.empty());
  const auto& stale = r.d.findings.front();
  INFO(stale.what);
  CHECK(stale.pods.size() == 1);
  CHECK_THAT(stale.what, Catch::Contains("WORLD_SIZE 3, expected 4") ||
                             Catch::Contains("PET_NNODES 3, expected 4"));
  CHECK_THAT(stale.what, Catch::Contains("Job team-a/pretrain"));
}

TEST_CASE("doctor: the denial quotes trainenv's message from the Job's FailedCreate event",
          "[doctor]") {
  const auto r = doctor("denied");
  REQUIRE(r.d.findings.size() == 1);
  CHECK_THAT(r.d.findings[0].what, Catch::Contains("trainenv.io/nproc-per-node"));
  CHECK(r.d.findings[0].pods == std::vector<std::string>{"gpt-worker-1-0", "gpt-worker-1-1"});
  CHECK(r.d.live_pods + 2 == r.d.layout_pods);
}

TEST_CASE("doctor: a wait that gave up is quoted, with the host, cause and duration", "[doctor]") {
  const auto r = doctor("wait-timed-out");
  REQUIRE(r.d.findings.size() == 1);
  CHECK_THAT(r.d.findings[0].what,
             Catch::Contains("no DNS record yet (NXDOMAIN): gpt-master-0-0.train-svc (600 s)"));
}

TEST_CASE("doctor: a KIND/NAME it does not know, or a job not in the dump, is refused",
          "[doctor]") {
  CHECK_FALSE(inputs::parse_doctor_target("deployment/x"));
  CHECK_FALSE(inputs::parse_doctor_target("jobset"));
  CHECK_FALSE(inputs::parse_doctor_target("jobset/"));
  CHECK(inputs::parse_doctor_target("vcjob/mnist")->group == "batch.volcano.sh");
  auto dump =
      inputs::owner_file::parse(R"({"apiVersion": "v1", "kind": "List", "items": []})", "empty");
  REQUIRE(dump);
  const auto missing = inputs::live_job_from(
      dump->objects(), *inputs::parse_doctor_target("jobset/gpt"), "", "the fixture");
  REQUIRE_FALSE(missing);
  CHECK_THAT(missing.message(), Catch::Contains("no JobSet.jobset.x-k8s.io gpt"));
}

TEST_CASE("doctor: a pod with no place in the layout has its own row, named", "[doctor]") {
  const auto r = doctor("no-place", "job/pretrain");
  REQUIRE(r.d.findings.size() == 1);
  REQUIRE(r.d.findings[0].pods.size() == 1);
  const auto& name = r.d.findings[0].pods[0];
  const auto row = std::find_if(r.d.rows.begin(), r.d.rows.end(),
                                [&](const core::doctor_row& x) { return x.name == name; });
  INFO(described(r.d));
  REQUIRE(row != r.d.rows.end());
  CHECK(row->role == "?");
  CHECK(row->phase != "not created");
  CHECK_FALSE(row->expected_rank);
  CHECK(row->findings == std::vector<std::string>{"no-place"});
  for (const auto& x : r.d.rows) CHECK_FALSE(x.name.empty());
}
