#include "trainenv/app/yaml.hpp"

#include <charconv>
#include <optional>
#include <regex>

#include <yaml-cpp/yaml.h>

#include "trainenv/core/admission.hpp"

namespace trainenv::app {
namespace {

using nlohmann::json;

core::result<json> plain_scalar(const std::string& s) {
  // YAML 1.2 core schema; a Kubernetes user quotes "4" when they mean a string.
  static const std::regex integer(R"([-+]?[0-9]+)");
  static const std::regex floating(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return json(nullptr);
  if (s == "true" || s == "True" || s == "TRUE") return json(true);
  if (s == "false" || s == "False" || s == "FALSE") return json(false);
  // Octal and hex as Kubernetes' YAML reads them: "defaultMode: 0400" is 256.
  static const std::regex octal(R"([-+]?0o?[0-7]+)");
  static const std::regex hex(R"([-+]?0x[0-9a-fA-F]+)");
  if (std::regex_match(s, octal) || std::regex_match(s, hex)) {
    const bool negative = s[0] == '-';
    const std::string_view digits = std::string_view(s).substr(s[0] == '-' || s[0] == '+' ? 1 : 0);
    const bool is_hex = digits.size() > 1 && digits[1] == 'x';
    const std::size_t skip = is_hex || (digits.size() > 1 && digits[1] == 'o') ? 2 : 1;
    if (digits.size() > skip) {
      std::int64_t n = 0;
      auto [end, ec] =
          std::from_chars(digits.data() + skip, digits.data() + digits.size(), n, is_hex ? 16 : 8);
      if (ec == std::errc() && end == digits.data() + digits.size()) return json(negative ? -n : n);
      return json(s);
    }
  }
  if (std::regex_match(s, integer)) {
    std::int64_t n = 0;
    const char* begin = s.data() + (s[0] == '+' ? 1 : 0);
    auto [end, ec] = std::from_chars(begin, s.data() + s.size(), n);
    if (ec == std::errc() && end == s.data() + s.size()) return json(n);
    return json(s);  // beyond int64: kept as text
  }
  if (std::regex_match(s, floating)) {
    double d = 0;
    const char* begin = s.data() + (s[0] == '+' ? 1 : 0);
    auto [end, ec] = std::from_chars(begin, s.data() + s.size(), d);
    if (ec == std::errc() && end == s.data() + s.size()) return json(d);
    return core::error{"number " + core::quote(s) + " is out of range"};
  }
  return json(s);
}

core::result<json> to_json(const YAML::Node& node, int depth) {
  if (depth > core::max_json_depth)
    return core::error{"document nests deeper than " + std::to_string(core::max_json_depth) +
                       " levels"};
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return json(nullptr);
    case YAML::NodeType::Scalar:
      // yaml-cpp tags quoted scalars "!" and plain ones "?"; "!!str" forces a string too.
      if (node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str") return json(node.Scalar());
      return plain_scalar(node.Scalar());
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& child : node) {
        auto value = to_json(child, depth + 1);
        if (!value) return value;
        out.push_back(std::move(*value));
      }
      return out;
    }
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& entry : node) {
        if (!entry.first.IsScalar()) return core::error{"mapping keys must be plain strings"};
        const auto& key = entry.first.Scalar();
        if (out.contains(key)) {
          return core::error{"line " + std::to_string(entry.first.Mark().line + 1) +
                             ": duplicate key " + core::quote(key) +
                             " (the first would be silently lost)"};
        }
        auto value = to_json(entry.second, depth + 1);
        if (!value) return value;
        out[key] = std::move(*value);
      }
      return out;
    }
  }
  return json(nullptr);
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
  std::vector<json> out;
  try {
    for (const auto& node : YAML::LoadAll(std::string(text))) {
      if (node.IsNull()) continue;  // an empty document between "---" separators
      auto doc = to_json(node, 0);
      if (!doc) return core::error{"not valid YAML: " + doc.message()};
      out.push_back(std::move(*doc));
    }
  } catch (const YAML::Exception& e) {
    if (json_error) return core::error{*json_error};
    return core::error{"not valid YAML: line " + std::to_string(e.mark.line + 1) + ", column " +
                       std::to_string(e.mark.column + 1) + ": " + e.msg};
  }
  return out;
}

core::result<json> parse_document(std::string_view text) {
  auto docs = parse_documents(text);
  if (!docs) return std::move(docs).take_error();
  if (docs->size() != 1) {
    return core::error{"expected one document, found " + std::to_string(docs->size())};
  }
  return std::move(docs->front());
}

}  // namespace trainenv::app
