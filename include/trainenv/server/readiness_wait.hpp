// `trainenv wait` (docs/contract.md §3.1): resolve names and connect to ports as the trainer will,
// until all answer or a wall-clock bound passes, saying what is missing and why.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace trainenv::server {

struct wait_item {
  std::string host;
  std::uint16_t port = 0;  // 0: that the name resolves; else also that this port accepts

  [[nodiscard]] std::string display() const;  // "host" or "host:port"
};

struct wait_options {
  std::chrono::milliseconds timeout{600'000};
  unsigned parallel = 32;  // checks in flight at most
  std::chrono::milliseconds progress_every{10'000};
  std::chrono::milliseconds connect_timeout{2'000};
  // Backoff between two checks of one target: from `first`, doubling, to `most`, each ±20%.
  std::chrono::milliseconds backoff_first{1'000};
  std::chrono::milliseconds backoff_most{5'000};
};

// Why a target did not answer, as a person reads it.
enum class wait_cause : std::uint8_t {
  unchecked,    // not checked yet
  no_record,    // NXDOMAIN: the name has no record (yet)
  dns_silent,   // the DNS server did not answer in time
  dns_failed,   // it answered with a failure (SERVFAIL)
  refused,      // the port refused the connection: nothing listens (yet)
  no_answer,    // the connection attempt timed out
  unreachable,  // no route to the address
  other,        // anything else (the detail says)
};
[[nodiscard]] std::string cause_text(wait_cause cause);

struct wait_missing {
  wait_item item;
  wait_cause cause = wait_cause::unchecked;
  std::string detail;  // the system's own words, for cause other
  std::chrono::milliseconds missing_for{0};
};

struct wait_result {
  bool ok = false;
  std::chrono::milliseconds took{0};
  std::size_t targets = 0;
  std::vector<wait_missing> missing;  // in the targets' order
};

// Checks `items` until each has answered, then every one once more; or until options.timeout.
// Writes a progress line to `log` every options.progress_every, and what is missing at the end.
[[nodiscard]] wait_result wait_for(const std::vector<wait_item>& items, const wait_options& options,
                                   std::ostream& log);

// The termination message of a wait that timed out: the missing targets by cause, each with how
// long it was missing, and `doctor` (the command that explains the job), in at most `limit`
// bytes; the first targets in order when all do not fit.
[[nodiscard]] std::string timeout_message(const wait_result& result, const std::string& doctor,
                                          std::size_t limit = 4096);

}  // namespace trainenv::server
