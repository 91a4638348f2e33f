// The text the readiness wait reads (docs/contract.md §3.1): its bound as seconds or a Go
// duration, an MPI hostfile in both launchers' forms, and a Volcano plugin's boolean flags.
#include <catch2/catch.hpp>

#include "owner_kind_support.hpp"
#include "trainenv/core/text/command_flags.hpp"
#include "trainenv/core/text/hostfile.hpp"
#include "trainenv/core/text/names.hpp"

using namespace trainenv::core;
using nlohmann::json;

TEST_CASE("a wait's bound is seconds or a duration of whole hours, minutes and seconds", "[wait]") {
  constexpr std::int64_t day = 86'400;
  for (const auto& [text, seconds] :
       std::vector<std::pair<std::string, std::int64_t>>{{"600", 600},
                                                         {"1", 1},
                                                         {"10m", 600},
                                                         {"90s", 90},
                                                         {"1h30m", 5400},
                                                         {"2h", 7200},
                                                         {"1h0m5s", 3605},
                                                         {"24h", day},
                                                         {"86400", day}}) {
    INFO(text);
    CHECK(parse_duration_seconds(text, day) == seconds);
  }
  for (const auto* bad : {"", "0", "0s", "25h", "86401", "10 m", "m", "1.5m", "-5", "5ms", "1m1h",
                          "1h1h", "10x", "s10", "1d"}) {
    INFO(bad);
    CHECK_FALSE(parse_duration_seconds(bad, day));
  }
}

TEST_CASE("a hostfile's hosts, once each, in order, from Open MPI's and Hydra's lines", "[wait]") {
  CHECK(hostfile_hosts("a.svc slots=4\n# the launcher\nb.svc slots=4 max_slots=8\n\n"
                       "  c.svc\t slots=1  # trailing\na.svc slots=4\n") ==
        std::vector<std::string>{"a.svc", "b.svc", "c.svc"});
  CHECK(hostfile_hosts("w-0.job:8\nw-1.job:8\nw-2.job\r\n") ==
        std::vector<std::string>{"w-0.job", "w-1.job", "w-2.job"});
  CHECK(hostfile_hosts("").empty());
  CHECK(hostfile_hosts("# only a comment\n\n   \n").empty());
  CHECK(hostfile_hosts("no-newline-at-end") == std::vector<std::string>{"no-newline-at-end"});
}

TEST_CASE("a job plugin's boolean flag as Go's flag package reads it", "[wait]") {
  const std::string flag = "--publish-not-ready-addresses";
  CHECK(bool_flag_value(json::array({flag}), flag) == true);
  CHECK(bool_flag_value(json::array({flag + "=false"}), flag) == false);
  CHECK(bool_flag_value(json::array({flag + "=T"}), flag) == true);
  CHECK(bool_flag_value(json::array({flag + "=0", "--other"}), flag) == false);
  CHECK(bool_flag_value(json::array({flag + "=false", flag}), flag) == true);  // the last wins
  CHECK_FALSE(bool_flag_value(json::array({flag + "=maybe"}), flag));
  CHECK_FALSE(bool_flag_value(json::array({"--publish"}), flag));
  CHECK_FALSE(bool_flag_value(json::array(), flag));
  CHECK_FALSE(bool_flag_value(json::object(), flag));
}

TEST_CASE("an owner kind says how its Service publishes not-ready addresses, or is refused",
          "[wait]") {
  const auto with = [](const std::string& rule) {
    return trainenv::test::owner_kind_from_spec(
        "k", R"({"apiGroup": "example.com", "versions": ["v1"], "kind": "K", "resource": "ks",
        "roles": {"own": {"jobSpec": "spec", "podTemplate": "spec.template"}},
        "naming": {"hostname": "${job}-${index}", "notReadyAddresses": )" +
                 rule + "}}");
  };
  CHECK(with(R"({"at": "spec.network.publish", "default": true})").naming->not_ready->by_default);
  CHECK(with(R"({"plugin": "spec.plugins.svc", "flag": "--publish"})").naming->not_ready->flag ==
        "--publish");
  for (const auto& [rule, expected] : std::vector<std::pair<std::string, std::string>>{
           {R"({"default": true})", "needs either `at`"},
           {R"({"at": "a", "plugin": "b", "flag": "--c"})", "needs either `at`"},
           {R"({"plugin": "spec.plugins.svc"})", "needs either `at`"},
           {R"({"at": "a", "default": "yes"})", "must be true or false"},
           {R"({"at": "a", "every": 1})", "every"}}) {
    INFO(rule);
    const auto parsed = parse_owner_kind(
        nlohmann::json::parse(R"({"apiVersion": "trainenv.io/v1alpha1", "kind": "OwnerKind",
          "metadata": {"name": "k"}, "spec": {"apiGroup": "example.com", "versions": ["v1"],
          "kind": "K", "resource": "ks",
          "roles": {"own": {"jobSpec": "spec", "podTemplate": "spec.template"}},
          "naming": {"hostname": "${job}-${index}", "notReadyAddresses": )" +
                              rule + "}}}"),
        "k.yaml");
    REQUIRE_FALSE(parsed);
    CHECK_THAT(parsed.message(), Catch::Contains(expected));
  }
}
