#include "trainenv/inputs/yaml.hpp"

#include <algorithm>
#include <charconv>
#include <memory>
#include <optional>

#include <yaml.h>

#include "trainenv/core/text/json_text.hpp"

namespace trainenv::inputs {
namespace {

using nlohmann::json;

// Hand-written, not std::regex: libstdc++'s regex recurses per character, so one long scalar
// in a hostile document could exhaust the stack.
bool all_digits(std::string_view s, int base) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [base](char c) {
    if (c >= '0' && c <= '9') return c - '0' < base;
    const char lower = static_cast<char>(c | 0x20);
    return base == 16 && lower >= 'a' && lower <= 'f';
  });
}

std::string_view without_sign(std::string_view s) {
  return !s.empty() && (s[0] == '-' || s[0] == '+') ? s.substr(1) : s;
}

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
bool is_float(std::string_view s) {
  s = without_sign(s);
  std::size_t i = 0;
  const auto digits = [&] {
    const auto from = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i - from;
  };
  const auto whole = digits();
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (digits() == 0 && whole == 0) return false;
  } else if (whole == 0) {
    return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    if (digits() == 0) return false;
  }
  return i == s.size();
}

core::result<json> plain_scalar(const std::string& s) {
  // YAML 1.2 core schema; a Kubernetes user quotes "4" when they mean a string.
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return json(nullptr);
  if (s == "true" || s == "True" || s == "TRUE") return json(true);
  if (s == "false" || s == "False" || s == "FALSE") return json(false);
  const bool negative = !s.empty() && s[0] == '-';
  const std::string_view digits = without_sign(s);
  // Octal and hex as Kubernetes' YAML reads them: "defaultMode: 0400" is 256.
  const bool is_hex =
      digits.size() > 2 && digits[0] == '0' && digits[1] == 'x' && all_digits(digits.substr(2), 16);
  const bool is_octal =
      digits.size() > 1 && digits[0] == '0' &&
      (digits[1] == 'o' ? all_digits(digits.substr(2), 8) : all_digits(digits.substr(1), 8));
  if (is_hex || is_octal) {
    const std::size_t skip = is_hex || digits[1] == 'o' ? 2 : 1;
    std::int64_t n = 0;
    auto [end, ec] =
        std::from_chars(digits.data() + skip, digits.data() + digits.size(), n, is_hex ? 16 : 8);
    if (ec == std::errc() && end == digits.data() + digits.size()) return json(negative ? -n : n);
    return json(s);
  }
  if (all_digits(digits, 10)) {
    std::int64_t n = 0;
    const char* begin = s.data() + (s[0] == '+' ? 1 : 0);
    auto [end, ec] = std::from_chars(begin, s.data() + s.size(), n);
    if (ec == std::errc() && end == s.data() + s.size()) return json(n);
    return json(s);  // beyond int64: kept as text
  }
  if (is_float(s)) {
    double d = 0;
    const char* begin = s.data() + (s[0] == '+' ? 1 : 0);
    auto [end, ec] = std::from_chars(begin, s.data() + s.size(), d);
    if (ec == std::errc() && end == s.data() + s.size()) return json(d);
    return core::error{"number " + core::quote(s) + " is out of range"};
  }
  return json(s);
}

std::string at_line(const yaml_mark_t& mark) {
  return "line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1);
}

// libyaml's event stream -> JSON values, without recursion: an explicit stack of the open
// sequences and mappings.
class document_builder {
 public:
  // Takes one event; an error ends the parse.
  core::result<bool> take(const yaml_event_t& event) {
    switch (event.type) {
      case YAML_DOCUMENT_START_EVENT:
        root_.reset();
        return true;
      case YAML_DOCUMENT_END_EVENT:
        // An empty document (between two "---") holds a null: skipped, as nothing was written.
        if (root_ && !root_->is_null()) documents_.push_back(std::move(*root_));
        root_.reset();
        return true;
      case YAML_ALIAS_EVENT:
        // Expanding aliases lets a few hundred bytes stand for billions of values.
        return core::error{at_line(event.start_mark) +
                           ": YAML aliases (*name) are not supported; write the value out"};
      case YAML_SCALAR_EVENT: {
        const std::string text(reinterpret_cast<const char*>(event.data.scalar.value),
                               event.data.scalar.length);
        if (!open_.empty() && open_.back().value.is_object() && !open_.back().key) {
          return key(text, event.start_mark);
        }
        const auto* tag = reinterpret_cast<const char*>(event.data.scalar.tag);
        const bool quoted = event.data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
        if (quoted || (tag != nullptr && std::string_view(tag) == YAML_STR_TAG)) {
          return deliver(json(text));
        }
        auto value = plain_scalar(text);
        if (!value) return core::error{at_line(event.start_mark) + ": " + value.message()};
        return deliver(std::move(*value));
      }
      case YAML_SEQUENCE_START_EVENT:
      case YAML_MAPPING_START_EVENT: {
        if (!open_.empty() && open_.back().value.is_object() && !open_.back().key)
          return core::error{at_line(event.start_mark) + ": mapping keys must be plain strings"};
        if (open_.size() >= static_cast<std::size_t>(core::max_json_depth)) {
          return core::error{"document nests deeper than " + std::to_string(core::max_json_depth) +
                             " levels"};
        }
        open_.push_back({event.type == YAML_MAPPING_START_EVENT ? json::object() : json::array(),
                         std::nullopt});
        return true;
      }
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT: {
        json done = std::move(open_.back().value);
        open_.pop_back();
        return deliver(std::move(done));
      }
      default:
        return true;
    }
  }

  std::vector<json> take_documents() { return std::move(documents_); }

 private:
  struct container {
    json value;
    std::optional<std::string> key;  // a mapping's key awaiting its value
  };

  core::result<bool> key(const std::string& text, const yaml_mark_t& mark) {
    if (open_.back().value.contains(text)) {
      return core::error{"line " + std::to_string(mark.line + 1) + ": duplicate key " +
                         core::quote(text) + " (the first would be silently lost)"};
    }
    open_.back().key = text;
    return true;
  }

  core::result<bool> deliver(json value) {
    if (open_.empty()) {
      root_ = std::move(value);
    } else if (auto& top = open_.back(); top.value.is_array()) {
      top.value.push_back(std::move(value));
    } else {
      top.value.emplace(std::move(*top.key), std::move(value));
      top.key.reset();
    }
    return true;
  }

  std::vector<container> open_;
  std::optional<json> root_;
  std::vector<json> documents_;
};

core::result<std::vector<json>> parse_yaml(std::string_view text) {
  yaml_parser_t parser;
  if (yaml_parser_initialize(&parser) == 0) return core::error{"not parsed: out of memory"};
  const std::unique_ptr<yaml_parser_t, void (*)(yaml_parser_t*)> parser_guard(&parser,
                                                                              yaml_parser_delete);
  yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(text.data()),
                               text.size());
  document_builder builder;
  for (;;) {
    yaml_event_t event;
    if (yaml_parser_parse(&parser, &event) == 0) {
      std::string problem = parser.problem != nullptr ? parser.problem : "syntax error";
      if (parser.context != nullptr) problem = std::string(parser.context) + ": " + problem;
      return core::error{"not valid YAML: " + at_line(parser.problem_mark) + ": " + problem};
    }
    const std::unique_ptr<yaml_event_t, void (*)(yaml_event_t*)> event_guard(&event,
                                                                             yaml_event_delete);
    if (event.type == YAML_STREAM_END_EVENT) break;
    if (auto taken = builder.take(event); !taken) {
      return core::error{"not valid YAML: " + taken.message()};
    }
  }
  return builder.take_documents();
}

bool looks_like_json(std::string_view text) {
  for (char c : text) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    return c == '{' || c == '[';
  }
  return false;
}

}  // namespace

core::result<std::vector<json>> parse_documents(std::string_view text) {
  // Flow-style YAML nests with the same brackets as JSON: refuse deep text before either parser.
  if (const auto at = core::nesting_exceeded_at(text)) {
    return core::error{"nests deeper than " + std::to_string(core::max_json_depth) +
                       " levels (at byte " + std::to_string(*at) + ")"};
  }
  std::optional<std::string> json_error;
  if (looks_like_json(text)) {
    auto doc = core::parse_json(text);
    if (doc) {
      std::vector<json> out;
      out.push_back(std::move(*doc));  // moved, never copied: copies recurse
      return out;
    }
    json_error = doc.message();  // may still be YAML flow style: {kind: Pod}
  }
  auto documents = parse_yaml(text);
  if (!documents && json_error) return core::error{*json_error};
  return documents;
}

core::result<json> parse_document(std::string_view text) {
  auto docs = parse_documents(text);
  if (!docs) return std::move(docs).take_error();
  if (docs->size() != 1) {
    return core::error{"expected one document, found " + std::to_string(docs->size())};
  }
  return std::move(docs->front());
}

}  // namespace trainenv::inputs
