// What a process looks like from outside, from /proc, and the descriptor limit the tests that
// open thousands of connections raise. No Catch2 here: the benchmarks use it too.
#pragma once

#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <string>

namespace trainenv::test {

// A field of /proc/PID/status in KiB (VmRSS, VmHWM, ...); -1 if absent.
inline long proc_status_kib(const std::string& field, const std::string& pid = "self") {
  std::ifstream in("/proc/" + pid + "/status");
  std::string line;
  const std::string key = field + ":";
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::stol(line.substr(key.size()));
  }
  return -1;
}

// Resets this process's peak RSS (VmHWM) to its current RSS (Linux >= 4.0); false if refused.
inline bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

// Raises the soft limit on open descriptors to `wanted` (capped by the hard limit); returns it.
inline rlim_t raise_fd_limit(rlim_t wanted) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur >= wanted) return limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max == RLIM_INFINITY ? wanted : std::min(wanted, limit.rlim_max);
  ::setrlimit(RLIMIT_NOFILE, &limit);
  ::getrlimit(RLIMIT_NOFILE, &limit);
  return limit.rlim_cur;
}

}  // namespace trainenv::test
