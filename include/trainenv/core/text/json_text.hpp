// Untrusted JSON text -> nlohmann::json. simdjson validates the text and finds its structure
// (at gigabytes per second, iteratively, so depth cannot overflow the stack); only then are
// nlohmann values built. A pod is not built at all: json_ref's parse_read_only reads it in place.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "trainenv/core/text/result.hpp"

namespace trainenv::core {

// Deepest nesting accepted from untrusted text. Pods nest a few dozen levels; nlohmann's copy,
// comparison and dump recurse, so a deeper document could overflow the stack.
inline constexpr int max_json_depth = 1000;

// Where `text` first opens more than `limit` arrays/objects outside strings, if it does: a
// linear scan before any recursive parser (yaml-cpp) sees the text.
[[nodiscard]] std::optional<std::size_t> nesting_exceeded_at(std::string_view text,
                                                             int limit = max_json_depth);

// The whole document. Errors name the byte offset (or the nesting limit); a key that appears
// twice in one object is an error, as silently picking one is how two readers of the same
// text come to disagree.
[[nodiscard]] result<nlohmann::json> parse_json(std::string_view text);

// `value` as compact JSON text appended to `out`: byte for byte what value.dump() writes
// (throwing as it does on invalid UTF-8), at a fraction of the cost for the text a patch is
// made of. nlohmann's serializer runs every byte of every string through its UTF-8 decoder;
// here a string of printable ASCII is copied in runs, and only a string with a control
// character or a byte over 0x7F goes through nlohmann's serializer.
void append_json(std::string& out, const nlohmann::json& value);

// `text` as a JSON string literal appended to `out`: what json(text).dump() writes with
// error_handler_t::replace (invalid UTF-8 becomes U+FFFD), for messages that may quote a value
// cut mid-character.
// With error_handler_t::strict it throws as dump() does: the bytes append_json writes for a string.
void append_json_string(
    std::string& out, std::string_view text,
    nlohmann::json::error_handler_t invalid_utf8 = nlohmann::json::error_handler_t::replace);

}  // namespace trainenv::core
