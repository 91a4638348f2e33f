// Untrusted JSON text -> nlohmann::json. simdjson validates the text and finds its structure
// (at gigabytes per second, iteratively, so depth cannot overflow the stack); only then are
// nlohmann values built, and only for the members asked for: building values is what costs.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

#include <nlohmann/json.hpp>

#include "trainenv/core/text/result.hpp"
#include "trainenv/core/text/string_map.hpp"

namespace trainenv::core {

// Deepest nesting accepted from untrusted text. Pods nest a few dozen levels; nlohmann's copy,
// comparison and dump recurse, so a deeper document could overflow the stack.
inline constexpr int max_json_depth = 1000;

// Where `text` first opens more than `limit` arrays/objects outside strings, if it does: a
// linear scan before any recursive parser (yaml-cpp) sees the text.
[[nodiscard]] std::optional<std::size_t> nesting_exceeded_at(std::string_view text,
                                                             int limit = max_json_depth);

// Which members of an object to build: `key` with all of its value when `only` is empty, else
// just the members `only` lists of the value when it is an object, or, with `each`, of each
// object in it when it is an array (a pod's containers). Any other value, and any item of such an
// array that is not an object, is built whole, so the reader sees every shape the text had at the
// paths it reads; one read into a map slot keeps only that shape (string_map::shape::not_object).
struct json_keep {
  std::string_view key;
  std::span<const json_keep> only = {};
  // Not -1: the value is read into this slot of parse_json's `maps` instead of the tree (an
  // object of strings the reader looks keys up in: a pod's labels and annotations).
  int map = -1;
  // The value is a list: `only` applies to each object in it. Without it a list is built whole,
  // so that a list where an object belongs (an array for `metadata`) keeps its shape and its
  // items never reach a map slot.
  bool each = false;
};

// The whole document. Errors name the byte offset (or the nesting limit); a key that appears
// twice in one object is an error, as silently picking one is how two readers of the same
// text come to disagree.
[[nodiscard]] result<nlohmann::json> parse_json(std::string_view text);

// The same validation over the whole text, but of the root object only the members in `only`
// are built (duplicate keys are found only among what is built), those marked with a map slot
// into `maps`.
[[nodiscard]] result<nlohmann::json> parse_json(std::string_view text,
                                                std::span<const json_keep> only,
                                                std::span<string_map> maps = {});

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
