#include "trainenv/server/readiness_wait.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <queue>
#include <random>
#include <thread>
#include <utility>

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace trainenv::server {
namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct check_outcome {
  wait_cause cause = wait_cause::unchecked;  // unchecked here: it answered
  std::string detail;
};

// One connection attempt to one address, bounded by `timeout`.
check_outcome connect_once(const addrinfo& address, milliseconds timeout) {
  const int fd = ::socket(address.ai_family, address.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return {wait_cause::other, std::strerror(errno)};
  int error = 0;
  if (::connect(fd, address.ai_addr, address.ai_addrlen) != 0) {
    error = errno;
    if (error == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
      socklen_t size = sizeof error;
      if (ready == 0) {
        error = ETIMEDOUT;
      } else if (ready < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0) {
        error = errno;
      }
    }
  }
  ::close(fd);
  switch (error) {
    case 0:
      return {};
    case ECONNREFUSED:
      return {wait_cause::refused, {}};
    case ETIMEDOUT:
      return {wait_cause::no_answer, {}};
    case EHOSTUNREACH:
    case ENETUNREACH:
      return {wait_cause::unreachable, std::strerror(error)};
    default:
      return {wait_cause::other, std::strerror(error)};
  }
}

// Resolves the name as the trainer will (getaddrinfo: /etc/hosts, then the pod's resolv.conf and
// its search list), then, with a port, connects to each address in turn until one accepts.
check_outcome check(const wait_item& item, milliseconds connect_timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const auto service = item.port != 0 ? std::to_string(item.port) : std::string();
  const int status =
      ::getaddrinfo(item.host.c_str(), service.empty() ? nullptr : service.c_str(), &hints, &found);
  if (status != 0) {
    switch (status) {
      case EAI_NONAME:
#ifdef EAI_NODATA
      case EAI_NODATA:
#endif
        return {wait_cause::no_record, {}};
      case EAI_AGAIN:
        return {wait_cause::dns_silent, {}};
      case EAI_FAIL:
        return {wait_cause::dns_failed, {}};
      default:
        return {wait_cause::other, ::gai_strerror(status)};
    }
  }
  const std::unique_ptr<addrinfo, void (*)(addrinfo*)> owned(found, ::freeaddrinfo);
  if (item.port == 0) return {};
  check_outcome last{wait_cause::no_answer, {}};
  for (const auto* a = found; a != nullptr; a = a->ai_next) {
    last = connect_once(*a, connect_timeout);
    if (last.cause == wait_cause::unchecked) return last;
  }
  return last;
}

struct target_state {
  check_outcome last;
  clock::time_point missing_since;
  int failures = 0;
  bool done = false;  // answered in this round
};

// What the checkers share: a queue of targets by the time they are due, the round (the first
// until every target answered once; the second, every one checked again), and when it ended.
struct shared {
  std::vector<wait_item> items;
  wait_options options;
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<target_state> states;
  using due = std::pair<clock::time_point, std::size_t>;
  std::priority_queue<due, std::vector<due>, std::greater<>> queue;
  std::size_t remaining = 0;
  int round = 0;
  bool finished = false;
  bool stop = false;
  std::mt19937 random{std::random_device{}()};

  // The next check of a target that failed `failures` times: 1 s, 2 s, 4 s, then 5 s, each ±20%
  // so that the pods of a large job do not ask the cluster DNS in step.
  clock::duration backoff(int failures) {
    auto delay = options.backoff_first;
    for (int i = 1; i < failures && delay < options.backoff_most; ++i) delay *= 2;
    delay = std::min(delay, options.backoff_most);
    std::uniform_real_distribution<double> jitter(0.8, 1.2);
    return std::chrono::duration_cast<clock::duration>(delay * jitter(random));
  }

  void answered(std::size_t i, check_outcome outcome) {
    auto& s = states[i];
    const auto now = clock::now();
    if (outcome.cause == wait_cause::unchecked) {
      s.done = true;
      s.failures = 0;
      s.last = {};
      if (--remaining > 0) return;
      if (round == 0) {
        // Every target answered once: check them all again before saying so, as a pod that
        // answered early may have gone since.
        round = 1;
        remaining = items.size();
        for (std::size_t j = 0; j < states.size(); ++j) {
          states[j].done = false;
          queue.emplace(now, j);
        }
      } else {
        finished = true;
      }
      changed.notify_all();
      return;
    }
    if (s.last.cause == wait_cause::unchecked && s.failures == 0 && round == 1)
      s.missing_since = now;  // answered in the first round, gone in the second
    s.last = std::move(outcome);
    ++s.failures;
    queue.emplace(now + backoff(s.failures), i);
    changed.notify_all();
  }

  void work() {
    std::unique_lock lock(mutex);
    while (!stop) {
      if (queue.empty()) {
        changed.wait(lock);
        continue;
      }
      const auto [when, i] = queue.top();
      if (when > clock::now()) {
        changed.wait_until(lock, when);
        continue;
      }
      queue.pop();
      const auto item = items[i];
      lock.unlock();
      auto outcome = check(item, options.connect_timeout);
      lock.lock();
      if (!stop) answered(i, std::move(outcome));
    }
  }

  std::vector<wait_missing> missing(clock::time_point now) const {
    std::vector<wait_missing> out;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const auto& s = states[i];
      if (s.done) continue;
      out.push_back({items[i], s.last.cause, s.last.detail,
                     std::chrono::duration_cast<milliseconds>(now - s.missing_since)});
    }
    return out;
  }
};

long long whole_seconds(milliseconds ms) {
  return (ms.count() + 500) / 1000;
}

// The missing targets grouped by cause, each group in the targets' order.
std::map<wait_cause, std::vector<const wait_missing*>> by_cause(
    const std::vector<wait_missing>& missing) {
  std::map<wait_cause, std::vector<const wait_missing*>> groups;
  for (const auto& m : missing) groups[m.cause].push_back(&m);
  return groups;
}

// "no DNS record yet (NXDOMAIN): a, b, +3 more; refused: c:22", at most `per_cause` names each.
std::string summary(const std::vector<wait_missing>& missing, std::size_t per_cause) {
  std::string out;
  for (const auto& [cause, list] : by_cause(missing)) {
    out += out.empty() ? "" : "; ";
    out += cause_text(cause) + ": ";
    for (std::size_t i = 0; i < list.size() && i < per_cause; ++i)
      out += (i == 0 ? "" : ", ") + list[i]->item.display();
    if (list.size() > per_cause) out += ", +" + std::to_string(list.size() - per_cause) + " more";
  }
  return out;
}

}  // namespace

std::string wait_item::display() const {
  return port == 0 ? host : host + ":" + std::to_string(port);
}

std::string cause_text(wait_cause cause) {
  switch (cause) {
    case wait_cause::unchecked:
      return "not checked yet";
    case wait_cause::no_record:
      return "no DNS record yet (NXDOMAIN)";
    case wait_cause::dns_silent:
      return "DNS not answering";
    case wait_cause::dns_failed:
      return "DNS failed (SERVFAIL)";
    case wait_cause::refused:
      return "refused (nothing listens yet)";
    case wait_cause::no_answer:
      return "no answer";
    case wait_cause::unreachable:
      return "unreachable";
    case wait_cause::other:
      break;
  }
  return "failed";
}

wait_result wait_for(const std::vector<wait_item>& items, const wait_options& options,
                     std::ostream& log) {
  const auto start = clock::now();
  wait_result result;
  result.targets = items.size();
  if (items.empty()) {
    result.ok = true;
    return result;
  }
  auto s = std::make_shared<shared>();
  s->items = items;
  s->options = options;
  s->states.resize(items.size(), target_state{{}, start, 0, false});
  s->remaining = items.size();
  for (std::size_t i = 0; i < items.size(); ++i) s->queue.emplace(start, i);
  // Detached: a check blocked in getaddrinfo (a DNS server that does not answer) must not hold
  // the time-out; each keeps what it shares alive until it sees `stop`.
  const auto workers = std::min<std::size_t>(std::max(options.parallel, 1U), items.size());
  for (std::size_t i = 0; i < workers; ++i) std::thread([s] { s->work(); }).detach();

  const auto deadline = start + options.timeout;
  auto next_progress = start + options.progress_every;
  std::unique_lock lock(s->mutex);
  while (!s->finished) {
    const auto now = clock::now();
    if (now >= deadline) break;
    if (now >= next_progress) {
      const auto missing = s->missing(now);
      log << "trainenv wait: "
          << whole_seconds(std::chrono::duration_cast<milliseconds>(now - start)) << " s of "
          << whole_seconds(options.timeout) << ": " << missing.size() << " of " << items.size()
          << " targets missing: " << summary(missing, 5) << std::endl;
      next_progress += options.progress_every;
      continue;
    }
    s->changed.wait_until(lock, std::min(deadline, next_progress));
  }
  const auto end = clock::now();
  result.took = std::chrono::duration_cast<milliseconds>(end - start);
  result.ok = s->finished;
  if (!result.ok) result.missing = s->missing(end);
  s->stop = true;
  s->changed.notify_all();
  lock.unlock();
  if (result.ok) {
    log << "trainenv wait: all " << items.size() << " targets answered, twice, in "
        << whole_seconds(result.took) << " s" << std::endl;
  } else {
    log << "trainenv wait: gave up after " << whole_seconds(result.took)
        << " s: " << result.missing.size() << " of " << items.size()
        << " targets did not answer:\n";
    for (const auto& m : result.missing) {
      log << "  " << m.item.display() << ": " << cause_text(m.cause)
          << (m.detail.empty() ? "" : " (" + m.detail + ")") << ", for "
          << whole_seconds(m.missing_for) << " s\n";
    }
    log.flush();
  }
  return result;
}

std::string timeout_message(const wait_result& result, const std::string& doctor,
                            std::size_t limit) {
  std::string head = "trainenv wait: gave up after " + std::to_string(whole_seconds(result.took)) +
                     " s: " + std::to_string(result.missing.size()) + " of " +
                     std::to_string(result.targets) + " targets did not answer\n";
  const std::string tail = "Why, and what to do: " + doctor + "\n";
  // What does not fit is counted.
  std::string body;
  std::size_t left_out = 0;
  const auto budget =
      limit > head.size() + tail.size() + 64 ? limit - head.size() - tail.size() - 64 : 0;
  for (const auto& [cause, list] : by_cause(result.missing)) {
    std::string line = cause_text(cause) + ":";
    std::size_t listed = 0;
    for (const auto* m : list) {
      const auto entry = " " + m->item.display() + " (" +
                         std::to_string(whole_seconds(m->missing_for)) + " s)" +
                         (m->detail.empty() ? "" : " " + m->detail);
      if (body.size() + line.size() + entry.size() + 1 > budget) break;
      line += (listed == 0 ? "" : ",") + entry;
      ++listed;
    }
    left_out += list.size() - listed;
    if (listed > 0) body += line + "\n";
  }
  if (left_out > 0)
    body += "... and " + std::to_string(left_out) + " more (the container's log lists them all)\n";
  auto message = head + body + tail;
  if (message.size() > limit) message.resize(limit);
  return message;
}

}  // namespace trainenv::server
