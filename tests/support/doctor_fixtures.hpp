// The doctor fixtures (tests/fixtures/doctor/, written by tests/doctor/make_fixtures.py): each
// live job as `kubectl get -o json` lists it, the job doctor is pointed at, and the findings it
// must give. Read offline (--from: tests/inputs/test_doctor.cpp) and served by the fake API
// server (tests/server/test_doctor_cluster.cpp), they must give the same.
#pragma once

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "trainenv/inputs/owner_file.hpp"

namespace trainenv::test {

// tests/fixtures/doctor/<name>.json, read as --from reads it.
inline inputs::owner_file doctor_fixture(const std::string& name) {
  const std::string path = std::string(TRAINENV_FIXTURES_DIR) + "/doctor/" + name + ".json";
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  auto dump = inputs::owner_file::parse(text.str(), path);
  REQUIRE(dump);
  return std::move(*dump);
}

struct doctor_case {
  std::string fixture;                // tests/fixtures/doctor/<fixture>.json
  std::multiset<std::string> kinds;   // of the findings, exactly
  bool healthy;                       // no error among them
  std::string target = "jobset/gpt";  // KIND/NAME, in namespace team-a
};

// A healthy job of each owner kind, then one case per failure mode.
inline const std::vector<doctor_case>& doctor_cases() {
  static const std::vector<doctor_case> cases = {
      {"healthy-jobset", {}, true},
      {"healthy-trainjob", {}, true, "trainjob/llama"},
      {"healthy-indexed-job", {}, true, "job/pretrain"},
      {"healthy-vcjob", {}, true, "vcjob/mnist"},
      {"older-trainenv", {"older-trainenv"}, true},
      {"stale-after-resize", {"stale", "stale", "stale"}, false, "job/pretrain"},
      {"not-admitted", {"not-admitted"}, false},
      {"duplicate-rank", {"job-check", "job-check"}, false},  // RANK 1 twice; 2..4 missing
      {"service-selects-other", {"service-selects-other"}, false},
      {"subdomain-mismatch", {"subdomain-mismatch"}, false},
      {"not-published", {"not-published"}, false},
      {"denied", {"denied"}, false},
      {"wait-timed-out", {"wait-timed-out"}, false},
      {"missing-ssh-secret", {"mount-failed"}, false, "trainjob/ds"},
      {"host-network-dns", {"host-network-dns"}, false},
      {"unschedulable", {"unschedulable"}, false},
      {"image-pull", {"image-pull"}, false},
      {"crash-loop", {"crash-loop"}, false},
      {"waiting", {"waiting"}, true},
      {"no-place", {"no-place"}, false, "job/pretrain"},
      {"suspended", {"suspended"}, false},
      {"no-service", {"no-service"}, false},
      {"service-not-headless", {"service-not-headless"}, false},
      {"scheduling-gated", {"scheduling-gated"}, true},
      {"container-config", {"container-config"}, false},
      {"queued", {"queued"}, false},
      {"podgroup-pending", {"podgroup-pending"}, false, "vcjob/mnist"},
      {"not-created", {"not-created"}, true},
      {"host-not-live", {"host-not-live"}, false},
  };
  return cases;
}

}  // namespace trainenv::test
