#include "trainenv/server/logging.hpp"

#include <spdlog/async.h>
#include <spdlog/details/log_msg.h>
#include <spdlog/formatter.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <algorithm>

#include <nlohmann/json.hpp>

namespace trainenv::server {
namespace {

// Marks a payload that log_event already wrote as JSON members, for the JSON formatter to wrap
// without parsing it again. A control character: no caller's text starts with it.
constexpr char json_members_mark = '\x1e';

bool json_lines = false;

void append(std::string& out, std::string_view text) {
  out.append(text.data(), text.size());
}

// A JSON string literal, escaped by nlohmann (invalid UTF-8 replaced), so a pod name with
// quotes or newlines cannot break the line.
void append_json_string(std::string& out, std::string_view text) {
  append(out, nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

// Text values with spaces, quotes or '=' are quoted, so a line splits back into its fields.
void append_text_value(std::string& out, std::string_view value) {
  const bool plain = !value.empty() && value.find_first_of(" \"=") == std::string_view::npos &&
                     std::all_of(value.begin(), value.end(),
                                 [](char c) { return static_cast<unsigned char>(c) >= 0x20; });
  if (plain) {
    append(out, value);
  } else {
    append_json_string(out, value);
  }
}

void append_value(std::string& out, const log_field& field, bool as_json) {
  if (const auto* text = std::get_if<std::string_view>(&field.value)) {
    as_json ? append_json_string(out, *text) : append_text_value(out, *text);
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

}  // namespace

void setup_logging(const std::string& format, const std::string& level) {
  json_lines = format == "json";
  spdlog::init_thread_pool(8192, 1);
  auto logger = std::make_shared<spdlog::async_logger>(
      "trainenv", std::make_shared<spdlog::sinks::stderr_sink_mt>(), spdlog::thread_pool(),
      spdlog::async_overflow_policy::overrun_oldest);
  if (json_lines) {
    logger->set_formatter(std::make_unique<json_formatter>());
  } else {
    logger->set_formatter(std::make_unique<spdlog::pattern_formatter>(
        "%Y-%m-%dT%H:%M:%S.%fZ %l %v", spdlog::pattern_time_type::utc));
  }
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(std::move(logger));
}

void stop_logging() {
  spdlog::shutdown();
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
