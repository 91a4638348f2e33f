// YAML or JSON text -> nlohmann::json documents. libyaml reads the YAML (as events, turned into
// values without recursion); plain scalars are typed by the YAML 1.2 core schema (null,
// booleans, integers, floats), quoted ones stay strings. Anchors, aliases and merge keys (<<) are
// expanded as `kubectl apply` takes them, up to 1 MiB and 10,000 aliases per text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainenv/core/text/result.hpp"

namespace trainenv::inputs {

// Every document in the text ("---"-separated); JSON text is parsed as JSON directly.
[[nodiscard]] core::result<std::vector<nlohmann::json>> parse_documents(std::string_view text);

// Exactly one document.
[[nodiscard]] core::result<nlohmann::json> parse_document(std::string_view text);

// One document as block-style YAML, starting "---" (libyaml's emitter): a string that a YAML
// reader would take for a number, a boolean or null (the core schema's, or YAML 1.1's yes/no/on/
// off that kubectl still reads) is double-quoted, so parse_document gives `document` back.
[[nodiscard]] std::string to_yaml(const nlohmann::json& document);

}  // namespace trainenv::inputs
