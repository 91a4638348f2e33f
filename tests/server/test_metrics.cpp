// The metrics' series as /metrics renders them: the owner lookups' result labels (an
// operator-facing contract, docs/operations.md), and the events the owner cache and the API
// client report.
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "trainenv/server/metrics.hpp"

namespace {

using namespace trainenv;
using Catch::Matchers::Contains;
using core::lookup_failure;
using server::lookup_source;

}  // namespace

TEST_CASE("owner lookup results are labelled as docs/operations.md lists them", "[metrics]") {
  CHECK(server::owner_lookup_result(lookup_source::cached, std::nullopt) == "hit");
  CHECK(server::owner_lookup_result(lookup_source::shared, std::nullopt) == "shared");
  CHECK(server::owner_lookup_result(lookup_source::fetched, std::nullopt) == "ok");
  const std::pair<lookup_failure, std::string_view> failures[] = {
      {lookup_failure::not_found, "not_found"},
      {lookup_failure::unauthorized, "unauthorized"},
      {lookup_failure::forbidden, "forbidden"},
      {lookup_failure::server_error, "server_error"},
      {lookup_failure::malformed, "malformed"},
      {lookup_failure::too_large, "too_large"},
      {lookup_failure::timeout, "timeout"},
      {lookup_failure::unreachable, "unreachable"},
      {lookup_failure::uid_mismatch, "uid_mismatch"},
      {lookup_failure::no_access, "no_access"},
  };
  static_assert(std::size(failures) == core::lookup_failure_count);
  std::set<std::string_view> labels = {"hit", "shared", "ok"};
  for (const auto& [failure, name] : failures) {
    INFO(name);
    // A failure is named by what failed, wherever the answer came from (a shared lookup that
    // failed counts under its failure).
    for (const auto source : {lookup_source::fetched, lookup_source::cached, lookup_source::shared})
      CHECK(server::owner_lookup_result(source, failure) == name);
    labels.insert(name);
  }
  CHECK(labels.size() == 3 + core::lookup_failure_count);
}

TEST_CASE("each owner lookup is counted once, under its kind and result", "[metrics]") {
  server::metrics m;
  m.on_owner_lookup("jobset", lookup_source::fetched, std::nullopt, std::chrono::milliseconds(3));
  m.on_owner_lookup("jobset", lookup_source::cached, std::nullopt, {});
  m.on_owner_lookup("jobset", lookup_source::shared, lookup_failure::timeout, {});
  m.on_owner_lookup("job", lookup_source::fetched, lookup_failure::no_access, {});
  CHECK(m.owner_lookups("jobset", lookup_source::fetched) == 1);
  CHECK(m.owner_lookups("jobset", lookup_source::cached) == 1);
  CHECK(m.owner_lookups("jobset", lookup_source::shared) == 0);
  CHECK(m.owner_lookups("jobset", lookup_source::shared, lookup_failure::timeout) == 1);
  CHECK(m.owner_lookups("job", lookup_source::fetched, lookup_failure::no_access) == 1);
  const auto text = m.render();
  CHECK_THAT(text, Contains("trainenv_owner_lookups_total{kind=\"jobset\",result=\"ok\"} 1"));
  CHECK_THAT(text, Contains("trainenv_owner_lookups_total{kind=\"jobset\",result=\"hit\"} 1"));
  CHECK_THAT(text, Contains("trainenv_owner_lookups_total{kind=\"jobset\",result=\"timeout\"} 1"));
  CHECK_THAT(text, Contains("trainenv_owner_lookups_total{kind=\"job\",result=\"no_access\"} 1"));
  // no_access made no lookup: not timed.
  CHECK_THAT(text, Contains("trainenv_owner_lookup_duration_seconds_count 3"));
}

// A series declared in metrics.hpp's tables is registered, rendered with its help, counted by
// its one call, and listed for operators in docs/operations.md: nothing else to add by hand.
TEST_CASE("every declared counter and gauge renders with its help and is documented", "[metrics]") {
  server::metrics m;
  std::ifstream doc(std::string(TRAINENV_SOURCE_DIR) + "/docs/operations.md");
  const std::string operations((std::istreambuf_iterator<char>(doc)),
                               std::istreambuf_iterator<char>());
  REQUIRE_FALSE(operations.empty());
  for (const auto& s : server::counter_series) {
    m.count(s.id, 3);
    CHECK(m.value(s.id) == 3);
    const auto text = m.render();
    CHECK_THAT(text, Contains("# HELP " + std::string(s.name) + " " + std::string(s.help)));
    CHECK_THAT(text, Contains("# TYPE " + std::string(s.name) + " counter"));
    CHECK_THAT(operations, Contains("| `" + std::string(s.name) + "` | counter |"));
  }
  for (const auto& s : server::gauge_series) {
    m.set(s.id, 5);
    m.add(s.id, -2);
    CHECK(m.value(s.id) == 3);
    const auto text = m.render();
    CHECK_THAT(text, Contains("# HELP " + std::string(s.name) + " " + std::string(s.help)));
    CHECK_THAT(text, Contains("# TYPE " + std::string(s.name) + " gauge"));
    CHECK_THAT(operations, Contains("| `" + std::string(s.name) + "` | gauge |"));
  }
}

TEST_CASE("the readiness waits are counted by policy and result, as docs/operations.md lists them",
          "[metrics]") {
  server::metrics m;
  core::decision added;
  added.wait = core::wait_plan{};
  core::decision present;
  present.wait = core::wait_plan{};
  present.wait->present = true;
  core::decision off;
  off.no_wait_reason = core::no_wait::switched_off;
  core::decision rank0;
  rank0.no_wait_reason = core::no_wait::nothing_to_dial;
  for (const auto* d : {&added, &added, &present, &off, &rank0}) m.on_wait("torch", *d);
  CHECK(m.waits("torch", "added") == 2);
  CHECK(m.waits("torch", "present") == 1);
  CHECK(m.waits("torch", "switched-off") == 1);
  CHECK(m.waits("torch", "nothing-to-dial") == 1);
  CHECK(m.waits("torch", "waits-already") == 0);
  CHECK(m.waits("mpi", "added") == 0);
  CHECK_THAT(m.render(), Contains(R"(trainenv_waits_total{policy="torch",result="added"} 2)"));
  std::ifstream doc(std::string(TRAINENV_SOURCE_DIR) + "/docs/operations.md");
  const std::string operations((std::istreambuf_iterator<char>(doc)),
                               std::istreambuf_iterator<char>());
  for (const auto* reason : {"no-policy-wait", "switched-off", "nothing-to-dial", "waits-already"})
    CHECK_THAT(operations, Contains(std::string("`") + reason + "`"));
  CHECK(core::no_wait_name(core::no_wait::waits_already) == "waits-already");
}
