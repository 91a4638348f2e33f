#include "trainenv/server/logging.hpp"

#include <poll.h>
#include <spdlog/details/log_msg.h>
#include <spdlog/formatter.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "trainenv/core/text/json_text.hpp"

namespace trainenv::server {
namespace {

// Marks a payload that log_event already wrote as JSON members, for the JSON formatter to wrap
// without parsing it again. A control character: no caller's text starts with it.
constexpr char json_members_mark = '\x1e';

bool json_lines = false;

void append(std::string& out, std::string_view text) {
  out.append(text.data(), text.size());
}

using core::append_json_string;  // invalid UTF-8 replaced, so no text can break the line

// Text values with spaces, quotes or '=' are quoted, so a line splits back into its fields.
void append_text_value(std::string& out, std::string_view value) {
  const bool plain = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
    return static_cast<unsigned char>(c) > ' ' && c != '"' && c != '=';
  });
  if (plain) {
    append(out, value);
  } else {
    append_json_string(out, value);
  }
}

void append_value(std::string& out, const log_field& field, bool as_json) {
  if (const auto* whole = std::get_if<std::string_view>(&field.value)) {
    // A field's value is the caller's text (a pod name, a uid, a message): cut, and marked so,
    // past max_log_field_bytes, so that no request writes a megabyte into the log.
    std::string cut;
    std::string_view text = *whole;
    if (text.size() > max_log_field_bytes) {
      cut.assign(text.substr(0, max_log_field_bytes));
      cut += "...(" + std::to_string(whole->size()) + " bytes)";
      text = cut;
    }
    as_json ? append_json_string(out, text) : append_text_value(out, text);
  } else if (const auto* number = std::get_if<std::int64_t>(&field.value)) {
    append(out, std::to_string(*number));
  } else if (const auto* flag = std::get_if<bool>(&field.value)) {
    append(out, *flag ? "true" : "false");
  }
}

// {"ts": "...Z", "level": "info", "msg": "...", ...}.
class json_formatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto time = std::chrono::system_clock::to_time_t(msg.time);
    const auto micros =
        std::chrono::duration_cast<std::chrono::microseconds>(msg.time.time_since_epoch()).count() %
        1'000'000;
    std::tm utc{};
    gmtime_r(&time, &utc);
    char head[128];
    const auto level = spdlog::level::to_string_view(msg.level);
    const int n = std::snprintf(
        head, sizeof head, R"({"ts":"%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ","level":"%.*s",)",
        utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
        static_cast<long long>(micros), static_cast<int>(level.size()), level.data());
    dest.append(head, head + n);
    const std::string_view payload(msg.payload.data(), msg.payload.size());
    std::string body;
    if (!payload.empty() && payload.front() == json_members_mark) {
      append(body, payload.substr(1));
    } else {
      append(body, R"("msg":)");
      append_json_string(body, payload);
    }
    body += "}\n";
    dest.append(body.data(), body.data() + body.size());
  }
  [[nodiscard]] std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<json_formatter>();
  }
};

// Every line dropped since start, stalled or failed output alike: /metrics reads it.
std::atomic<std::uint64_t> dropped_total{0};

// Writes `bytes` to `fd` whole, waiting out EINTR and a non-blocking descriptor's EAGAIN (for at
// most a second each time). Gives up on any other error (EPIPE: the reader went away; the server
// ignores SIGPIPE) and returns what was not written: logs are not worth stopping for.
std::string_view write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const auto n = ::write(fd, bytes.data(), bytes.size());
    if (n > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd out{fd, POLLOUT, 0};
      if (::poll(&out, 1, 1000) <= 0) break;
    } else {
      break;
    }
  }
  return bytes;
}

// The lines in what a write left unwritten: a line cut short counts as dropped.
std::uint64_t lines_in(std::string_view unwritten) {
  if (unwritten.empty()) return 0;
  const auto newlines =
      static_cast<std::uint64_t>(std::count(unwritten.begin(), unwritten.end(), '\n'));
  return unwritten.back() == '\n' ? newlines : newlines + 1;
}

// Standard error, written in batches by a thread of its own. A request thread formats its line
// into the pending text under the sink's lock and goes on: no system call, no hand-off per
// line. The writer wakes when text arrives, gives more lines `batch_window` to join it, and
// writes them with one write(2); a full batch or a flush (after every warning and error:
// flush_on) cuts the wait short. spdlog's own console sink writes and flushes every line, and its
// async logger wakes its thread for every line: at one line per admission that was about a fifth of
// the throughput on small pods (docs/performance.md). If standard error stops draining, pending
// text stops growing at `max_pending` and later lines are dropped; if a write fails (the reader
// closed the pipe), the lines it held are dropped. Both are counted (dropped_total) and reported
// in one line once a write succeeds again; a request thread never waits on the output.
class batched_stderr_sink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit batched_stderr_sink(int fd) : fd_(fd), writer_([this] { write_batches(); }) {}
  ~batched_stderr_sink() override {
    {
      const std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    writer_.join();
  }
  batched_stderr_sink(const batched_stderr_sink&) = delete;
  batched_stderr_sink& operator=(const batched_stderr_sink&) = delete;

 protected:
  // Called with mutex_ held.
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (pending_.size() >= max_pending) {
      drop(1);
      return;
    }
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    const bool was_empty = pending_.empty();
    pending_.append(formatted.data(), formatted.size());
    if (was_empty || pending_.size() >= batch_bytes) wake_.notify_one();
  }
  void flush_() override {
    urgent_ = true;
    wake_.notify_one();
  }

 private:
  static constexpr std::size_t batch_bytes = std::size_t{64} * 1024;
  static constexpr std::size_t max_pending = std::size_t{4} * 1024 * 1024;
  static constexpr std::chrono::milliseconds batch_window{100};

  // Called with mutex_ held.
  void drop(std::uint64_t lines) {
    unreported_ += lines;
    dropped_total.fetch_add(lines, std::memory_order_relaxed);
  }

  void write_batches() {
    std::string batch;
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
      wake_.wait_for(lock, batch_window,
                     [&] { return stopping_ || urgent_ || pending_.size() >= batch_bytes; });
      batch.swap(pending_);
      urgent_ = false;
      const auto unreported = std::exchange(unreported_, 0);
      const bool stop = stopping_;
      lock.unlock();
      const auto lost = lines_in(write_all(fd_, batch));
      batch.clear();
      bool reported = unreported == 0;
      if (!reported && lost == 0) {
        reported = write_all(fd_, "trainenv: " + std::to_string(unreported) +
                                      " log lines dropped: standard error was not being read\n")
                       .empty();
      }
      if (stop) return;
      lock.lock();
      if (!reported) unreported_ += unreported;  // said with the next batch that gets through
      if (lost != 0) drop(lost);
    }
  }

  int fd_;
  std::condition_variable wake_;
  std::string pending_;  // guarded by mutex_, as are the three below
  bool urgent_ = false;  // a warning, an error or a flush is pending
  bool stopping_ = false;
  std::uint64_t unreported_ = 0;  // dropped lines not yet reported on the output
  std::thread writer_;            // last: starts once the members above exist
};

}  // namespace

void setup_logging(const std::string& format, const std::string& level, int fd) {
  json_lines = format == "json";
  auto logger =
      std::make_shared<spdlog::logger>("trainenv", std::make_shared<batched_stderr_sink>(fd));
  if (json_lines) {
    logger->set_formatter(std::make_unique<json_formatter>());
  } else {
    logger->set_formatter(std::make_unique<spdlog::pattern_formatter>(
        "%Y-%m-%dT%H:%M:%S.%fZ %l %v", spdlog::pattern_time_type::utc));
  }
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(std::move(logger));
}

void stop_logging() {
  spdlog::shutdown();
}

std::uint64_t log_lines_dropped() {
  return dropped_total.load(std::memory_order_relaxed);
}

bool info_enabled() {
  return spdlog::default_logger_raw()->should_log(spdlog::level::info);
}

void log_event(std::string_view event, std::initializer_list<log_field> fields) {
  if (!info_enabled()) return;
  std::string line;
  line.reserve(256);
  if (json_lines) {
    line += json_members_mark;
    append(line, R"("msg":)");
    append_json_string(line, event);
    for (const auto& field : fields) {
      if (std::holds_alternative<std::monostate>(field.value)) continue;
      line += ',';
      append_json_string(line, field.key);
      line += ':';
      append_value(line, field, true);
    }
  } else {
    append(line, event);
    for (const auto& field : fields) {
      if (std::holds_alternative<std::monostate>(field.value)) continue;
      line += ' ';
      append(line, field.key);
      line += '=';
      append_value(line, field, false);
    }
  }
  spdlog::info("{}", line);
}

}  // namespace trainenv::server
