#include "trainenv/app/yaml.hpp"

#include <charconv>
#include <regex>

#include <yaml-cpp/yaml.h>

#include "trainenv/core/admission.hpp"

namespace trainenv::app {
namespace {

using nlohmann::json;

// Deeper documents are refused rather than recursed into (yaml-cpp builds them recursively).
constexpr int max_depth = 128;

json plain_scalar(const std::string& s) {
  // YAML 1.2 core schema; a Kubernetes user quotes "4" when they mean a string.
  static const std::regex integer(R"([-+]?[0-9]+)");
  static const std::regex floating(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (std::regex_match(s, integer)) {
    std::int64_t n = 0;
    const char* begin = s.data() + (s[0] == '+' ? 1 : 0);
    auto [end, ec] = std::from_chars(begin, s.data() + s.size(), n);
    if (ec == std::errc() && end == s.data() + s.size()) return n;
    return s;
  }
  if (std::regex_match(s, floating)) return std::stod(s);
  return s;
}

core::result<json> to_json(const YAML::Node& node, int depth) {
  if (depth > max_depth) return core::error{"document nests deeper than " + std::to_string(max_depth) + " levels"};
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return json(nullptr);
    case YAML::NodeType::Scalar:
      // yaml-cpp tags quoted scalars "!" and plain ones "?".
      return node.Tag() == "!" ? json(node.Scalar()) : plain_scalar(node.Scalar());
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
        auto value = to_json(entry.second, depth + 1);
        if (!value) return value;
        out[entry.first.Scalar()] = std::move(*value);
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
  if (looks_like_json(text)) {
    auto doc = core::parse_json(text);
    if (!doc) return core::error{"not valid JSON: " + doc.message()};
    return std::vector<json>{std::move(*doc)};
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
