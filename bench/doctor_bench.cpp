// `trainenv doctor` on a large live job (issue 40's done-when: a 1,000-pod job answered in under
// 2 s against the fake API, with one LIST per kind, not one GET per pod). The built binary reads
// the job from the tests' fake API server over TLS with a kubeconfig, as a person runs it; the job
// is bench/doctor_job.py's (a JobSet of --pods pods made live as the doctor fixtures are). Each
// round is one whole run of the binary (start-up, policies, every read, the layout, the diagnosis,
// the table); it prints each round's time, the median with the spread, and what the run asked of
// the API: its requests by resource and verb, and the GETs of single pods.
//
//   /usr/bin/python3 bench/doctor_job.py --trainenv build/trainenv --pods 1000 > /tmp/job.json
//   build/bench/doctor_bench --binary build/trainenv --job /tmp/job.json [--rounds 5]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "fake_apiserver.hpp"
#include "trainenv/inputs/owner_file.hpp"

namespace {

using namespace trainenv;
using clock_type = std::chrono::steady_clock;

struct settings {
  std::string binary = "build/trainenv";
  std::string job;
  int rounds = 5;
};

std::string pod_path_prefix = "/api/v1/namespaces/team-a/pods/";

}  // namespace

int main(int argc, char** argv) {
  settings s;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--binary")
      s.binary = argv[i + 1];
    else if (flag == "--job")
      s.job = argv[i + 1];
    else if (flag == "--rounds")
      s.rounds = std::stoi(argv[i + 1]);
    else {
      std::cerr << "doctor_bench: unknown flag " << flag << "\n";
      return 2;
    }
  }
  if (s.job.empty()) {
    std::cerr << "doctor_bench: --job FILE (bench/doctor_job.py writes one)\n";
    return 2;
  }
  auto dump = inputs::owner_file::parse(test::read_file(s.job), s.job);
  if (!dump) {
    std::cerr << "doctor_bench: " << dump.message() << "\n";
    return 2;
  }
  test::fake_apiserver api({.max_lifetime = std::chrono::seconds(600)});
  std::size_t pods = 0;
  for (const auto& object : dump->objects()) {
    api.add_object(object);
    pods += object.value("kind", "") == "Pod" ? 1 : 0;
  }
  const auto dir = std::filesystem::temp_directory_path() /
                   ("trainenv-doctor-bench-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto kubeconfig = api.write_kubeconfig(dir / "kubeconfig");
  const std::string command = s.binary + " doctor jobset/gpt -n team-a --kubeconfig " + kubeconfig +
                              " --policies " + TRAINENV_POLICIES_DIR + " > /dev/null";
  std::vector<double> seconds;
  int failed = 0;
  for (int round = 0; round < s.rounds; ++round) {
    const auto start = clock_type::now();
    const int status = std::system(command.c_str());
    const double took = std::chrono::duration<double>(clock_type::now() - start).count();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
    seconds.push_back(took);
    std::printf("round %d: %.3f s (exit %d)\n", round + 1, took,
                WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  std::filesystem::remove_all(dir);
  auto sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  std::printf("doctor on a job of %zu pods: median %.3f s (min %.3f, max %.3f) over %d rounds\n",
              pods, sorted[sorted.size() / 2], sorted.front(), sorted.back(), s.rounds);
  // What one run asked: the requests by path (queries dropped), and single pods read.
  std::map<std::string, std::size_t> asked;
  std::size_t pod_gets = 0;
  for (const auto& target : api.targets()) {
    const auto path = target.substr(0, target.find('?'));
    ++asked[path];
    if (path.rfind(pod_path_prefix, 0) == 0) ++pod_gets;
  }
  std::printf("requests of one run (pages of 100):\n");
  for (const auto& [path, count] : asked)
    std::printf("  %4zu  %s\n", count / static_cast<std::size_t>(s.rounds), path.c_str());
  std::printf("single-pod GETs: %zu\n", pod_gets / static_cast<std::size_t>(s.rounds));
  return failed == 0 && pod_gets == 0 ? 0 : 1;
}
