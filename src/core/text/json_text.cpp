#include "trainenv/core/text/json_text.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <simdjson.h>

namespace trainenv::core {
namespace {

using nlohmann::json;
using simdjson::dom::element;
using simdjson::dom::element_type;

// Bodies up to this size reuse a per-thread parser; larger ones get their own, freed after, so a
// thread does not keep ~14 bytes of parser state per byte of the largest body it ever saw.
constexpr std::size_t reused_capacity = std::size_t{64} * 1024;

class tree_builder {
 public:
  explicit tree_builder(std::span<string_map> maps = {})
      : maps_(maps), map_read_in_(maps.size(), 0) {}

  // The first problem met; building stops adding once set.
  std::string problem;

  json whole(element e) {
    switch (e.type()) {
      case element_type::OBJECT: {
        json out = json::object();
        const simdjson::dom::object object = e.get_object().value_unsafe();
        for (const auto field : object) add(out, field.key, whole(field.value));
        return out;
      }
      case element_type::ARRAY: {
        json out = json::array();
        const simdjson::dom::array array = e.get_array().value_unsafe();
        for (const auto item : array) out.push_back(whole(item));
        return out;
      }
      case element_type::STRING:
        return std::string(e.get_string().value_unsafe());
      case element_type::INT64: {
        // As nlohmann's own parser types them: non-negative integers are unsigned.
        const auto n = e.get_int64().value_unsafe();
        return n >= 0 ? json(static_cast<std::uint64_t>(n)) : json(n);
      }
      case element_type::UINT64:
        return e.get_uint64().value_unsafe();
      case element_type::DOUBLE:
        return e.get_double().value_unsafe();
      case element_type::BOOL:
        return e.get_bool().value_unsafe();
      case element_type::NULL_VALUE:
        break;
    }
    return nullptr;
  }

  json only(element e, std::span<const json_keep> keep) {
    if (e.type() != element_type::OBJECT) return whole(e);
    const auto id = ++objects_;
    json out = json::object();
    const simdjson::dom::object object = e.get_object().value_unsafe();
    for (const auto field : object) {
      for (const auto& k : keep) {
        if (k.key != field.key) continue;
        if (k.map >= 0 && static_cast<std::size_t>(k.map) < maps_.size()) {
          read_map(field.key, field.value, static_cast<std::size_t>(k.map), id);
        } else {
          add(out, field.key,
              k.only.empty() ? whole(field.value)
              : k.each       ? each(field.value, k.only)
                             : only(field.value, k.only));
        }
        break;
      }
    }
    return out;
  }

 private:
  // `only` applied to each object in the list `e`; anything else whole.
  json each(element e, std::span<const json_keep> keep) {
    if (e.type() != element_type::ARRAY) return whole(e);
    json out = json::array();
    const simdjson::dom::array array = e.get_array().value_unsafe();
    for (const auto item : array) out.push_back(only(item, keep));
    return out;
  }

  // `e` into maps_[slot]. The problems found are those building it into the tree finds, in the
  // same order: per member, what is wrong inside its value, then the key if it is a repeat.
  void read_map(std::string_view key, element e, std::size_t slot, std::size_t parent) {
    const bool repeated = map_read_in_[slot] == parent;
    map_read_in_[slot] = parent;
    maps_[slot] = map_of(e);
    if (repeated && problem.empty())
      problem = "duplicate key " + quote(std::string(key)) + " in an object";
  }

  string_map map_of(element e) {
    if (e.type() == element_type::NULL_VALUE) return {};
    if (e.type() != element_type::OBJECT) {
      (void)whole(e);  // for its problems only
      return string_map(string_map::shape::not_object);
    }
    const simdjson::dom::object object = e.get_object().value_unsafe();
    std::size_t members = 0;
    std::size_t bytes = 0;
    for (const auto field : object) {
      ++members;
      bytes += field.key.size();
      if (field.value.type() == element_type::STRING)
        bytes += field.value.get_string().value_unsafe().size();
    }
    string_map::writer w(members, bytes);
    for (const auto field : object) {
      if (field.value.type() == element_type::STRING) {
        const std::string_view text = field.value.get_string().value_unsafe();
        w.add(field.key, &text);
      } else {
        w.add(field.key, nullptr);
      }
    }
    std::size_t first_repeat = 0;
    auto map = std::move(w).finish(first_repeat);
    std::size_t i = 0;
    for (const auto field : object) {
      if (!problem.empty()) break;
      const auto type = field.value.type();
      if (type != element_type::STRING && type != element_type::NULL_VALUE)
        (void)whole(field.value);
      if (problem.empty() && i++ == first_repeat)
        problem = "duplicate key " + quote(std::string(field.key)) + " in an object";
    }
    return map;
  }

  // At the end first: the apiserver writes an object's members in key order, where the hint
  // saves the search; a key out of order is placed by a search as without it.
  void add(json& object, std::string_view key, json value) {
    auto& members = object.get_ref<json::object_t&>();
    const auto before = members.size();
    members.emplace_hint(members.end(), std::string(key), std::move(value));
    if (members.size() == before && problem.empty())
      problem = "duplicate key " + quote(std::string(key)) + " in an object";
  }

  std::span<string_map> maps_;
  std::vector<std::size_t> map_read_in_;  // per slot: the object it was read from (0: none)
  std::size_t objects_ = 0;               // objects read by `only` so far
};

// nlohmann's lexer, without building anything: only to name the byte of an error simdjson found.
struct no_values : nlohmann::json_sax<json> {
  std::size_t error_at = 0;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception&) override {
    error_at = position;
    return false;
  }
};

error describe_failure(std::string_view text, simdjson::error_code code) {
  if (const auto at = nesting_exceeded_at(text, max_json_depth)) {
    return error{"nests deeper than " + std::to_string(max_json_depth) + " levels (at byte " +
                 std::to_string(*at) + ")"};
  }
  no_values sax;
  if (!json::sax_parse(text, &sax)) {
    return error{"not valid JSON (at byte " + std::to_string(sax.error_at) + ")"};
  }
  // Text both read as JSON but simdjson refuses, e.g. an integer beyond 64 bits.
  return error{std::string("not valid JSON: ") + simdjson::error_message(code)};
}

template <class Build>
result<json> parse_with(std::string_view text, std::span<string_map> maps, Build build) {
  thread_local simdjson::dom::parser reused;
  thread_local std::string reused_buffer;
  simdjson::dom::parser own;
  std::string own_buffer;
  const bool small = text.size() <= reused_capacity;
  auto& parser = small ? reused : own;
  auto& buffer = small ? reused_buffer : own_buffer;
  if (parser.max_depth() != static_cast<std::size_t>(max_json_depth) ||
      parser.capacity() < text.size()) {
    const auto capacity = small ? reused_capacity : text.size();
    if (parser.allocate(capacity, max_json_depth) != simdjson::SUCCESS)
      return error{"not parsed: out of memory"};
  }
  // simdjson reads up to SIMDJSON_PADDING bytes past the end; give it room to.
  buffer.reserve(text.size() + simdjson::SIMDJSON_PADDING);
  buffer.assign(text);
  element root;
  if (const auto code = parser.parse(buffer.data(), buffer.size(), false).get(root);
      code != simdjson::SUCCESS) {
    return describe_failure(text, code);
  }
  tree_builder b(maps);
  json out = build(b, root);
  if (!b.problem.empty()) return error{"not valid JSON: " + b.problem};
  return out;
}

}  // namespace

std::optional<std::size_t> nesting_exceeded_at(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::nullopt;
}

result<json> parse_json(std::string_view text) {
  return parse_with(text, {}, [](tree_builder& b, element root) { return b.whole(root); });
}

result<json> parse_json(std::string_view text, std::span<const json_keep> only,
                        std::span<string_map> maps) {
  return parse_with(text, maps,
                    [only](tree_builder& b, element root) { return b.only(root, only); });
}

namespace {

// Which bytes a JSON string literal cannot hold as they are: '"' and '\\' are escaped in place;
// a control character or a byte over 0x7F (to be validated as UTF-8) sends the whole string
// through nlohmann's serializer, so that the output stays its output.
enum class byte_class : std::uint8_t { plain, escape, other };
constexpr auto byte_classes = [] {
  std::array<byte_class, 256> table{};
  for (std::size_t c = 0; c < table.size(); ++c)
    table[c] = c < 0x20 || c >= 0x80 ? byte_class::other : byte_class::plain;
  table['"'] = byte_class::escape;
  table['\\'] = byte_class::escape;
  return table;
}();

// Whether any of the eight bytes in `word` is not plain: below 0x20, from 0x80, '"' or '\\'.
// Bit tricks (one subtraction per test, no branch per byte): the strings written are nearly
// always plain, and a byte at a time this loop was a tenth of the encode's instructions.
constexpr bool any_special(std::uint64_t word) {
  constexpr std::uint64_t ones = 0x0101010101010101;
  constexpr std::uint64_t highs = 0x8080808080808080;
  const auto has_zero = [](std::uint64_t v) { return (v - ones) & ~v & highs; };
  const auto below_space = (word - ones * 0x20) & ~word & highs;
  return (below_space | (word & highs) | has_zero(word ^ (ones * '"')) |
          has_zero(word ^ (ones * '\\'))) != 0;
}

// A JSON string literal, in one pass: plain runs are copied whole.
void write_string(std::string& out, std::string_view text, json::error_handler_t invalid_utf8) {
  const auto start = out.size();
  out += '"';
  std::size_t from = 0;
  std::size_t i = 0;
  for (;;) {
    // Plain words are skipped whole; a word with a special byte, and the tail, byte by byte.
    while (i + 8 <= text.size()) {
      std::uint64_t word = 0;
      std::memcpy(&word, text.data() + i, sizeof word);
      if (any_special(word)) break;
      i += 8;
    }
    const auto stop = std::min(text.size(), i + 8);
    if (i == stop) break;
    for (; i < stop; ++i) {
      switch (byte_classes[static_cast<unsigned char>(text[i])]) {
        case byte_class::plain:
          continue;
        case byte_class::escape:
          out.append(text, from, i - from);
          out += '\\';
          out += text[i];
          from = i + 1;
          continue;
        case byte_class::other:
          out.resize(start);
          out += json(text).dump(-1, ' ', false, invalid_utf8);
          return;
      }
    }
  }
  out.append(text, from, text.size() - from);
  out += '"';
}

}  // namespace

void append_json_string(std::string& out, std::string_view text,
                        json::error_handler_t invalid_utf8) {
  write_string(out, text, invalid_utf8);
}

void append_json(std::string& out, const json& value) {
  switch (value.type()) {
    case json::value_t::object: {
      out += '{';
      bool first = true;
      for (auto it = value.begin(); it != value.end(); ++it) {
        if (!first) out += ',';
        first = false;
        write_string(out, it.key(), json::error_handler_t::strict);
        out += ':';
        append_json(out, it.value());
      }
      out += '}';
      return;
    }
    case json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& item : value) {
        if (!first) out += ',';
        first = false;
        append_json(out, item);
      }
      out += ']';
      return;
    }
    case json::value_t::string:
      write_string(out, value.get_ref<const std::string&>(), json::error_handler_t::strict);
      return;
    case json::value_t::boolean:
      out += value.get<bool>() ? "true" : "false";
      return;
    case json::value_t::null:
      out += "null";
      return;
    case json::value_t::number_integer:
      out += std::to_string(value.get<std::int64_t>());
      return;
    case json::value_t::number_unsigned:
      out += std::to_string(value.get<std::uint64_t>());
      return;
    default:  // floating point (nlohmann's shortest round-trip form), binary, discarded
      out += value.dump();
      return;
  }
}

}  // namespace trainenv::core
