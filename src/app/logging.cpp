#include "trainenv/app/logging.hpp"

#include <spdlog/async.h>
#include <spdlog/details/log_msg.h>
#include <spdlog/formatter.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

namespace trainenv::app {
namespace {

// Text values with spaces or quotes are quoted, so a line splits back into its fields.
std::string core_quote_if_needed(const std::string& value) {
  if (!value.empty() && value.find_first_of(" \"=") == std::string::npos) return value;
  return nlohmann::json(value).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// {"ts": "...Z", "level": "info", "msg": "..."}: the message is escaped by nlohmann, so a
// pod name with quotes or newlines cannot break the line.
class json_formatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto time = std::chrono::system_clock::to_time_t(msg.time);
    const auto micros =
        std::chrono::duration_cast<std::chrono::microseconds>(msg.time.time_since_epoch()).count() %
        1'000'000;
    std::tm utc{};
    gmtime_r(&time, &utc);
    char stamp[64];
    std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", utc.tm_year + 1900,
                  utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                  static_cast<long long>(micros));
    const auto level = spdlog::level::to_string_view(msg.level);
    const std::string_view payload(msg.payload.data(), msg.payload.size());
    nlohmann::ordered_json line = {{"ts", stamp},
                                   {"level", std::string(level.data(), level.size())}};
    // log_event hands over its fields as a JSON object: merge them in; anything else is "msg".
    auto fields = !payload.empty() && payload.front() == '{'
                      ? nlohmann::ordered_json::parse(payload, nullptr, false)
                      : nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded);
    if (fields.is_object()) {
      line.update(fields);
    } else {
      line["msg"] = std::string(payload);
    }
    const auto text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    dest.append(text.data(), text.data() + text.size());
    dest.push_back('\n');
  }
  [[nodiscard]] std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<json_formatter>();
  }
};

}  // namespace

namespace {
bool json_lines = false;
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

void log_event(std::string_view event, const nlohmann::ordered_json& fields) {
  if (!spdlog::default_logger_raw()->should_log(spdlog::level::info)) return;
  if (json_lines) {
    nlohmann::ordered_json line = {{"msg", event}};
    line.update(fields);
    spdlog::info("{}", line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return;
  }
  std::string text(event);
  for (const auto& [key, value] : fields.items()) {
    text += ' ';
    text += key;
    text += '=';
    text += value.is_string() ? core_quote_if_needed(value.get<std::string>()) : value.dump();
  }
  spdlog::info("{}", text);
}

}  // namespace trainenv::app
