#include "trainenv/core/text/json_text.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include <simdjson.h>

#include "trainenv/core/text/json_ref.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;
using simdjson::dom::element;

// Bodies up to this size reuse a per-thread parser; larger ones get their own, freed after, so a
// thread does not keep ~14 bytes of parser state per byte of the largest body it ever saw.
constexpr std::size_t reused_capacity = std::size_t{64} * 1024;

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

// Objects up to this many members are searched for a repeated key pairwise; larger ones hashed.
constexpr std::size_t pairwise_members = 32;

// The objects and arrays open at a point of the tape scan, and the keys of each open object:
// where a key written twice is found.
class key_scan {
 public:
  void reset() {
    scopes_.clear();
    keys_.clear();
    sets_.clear();
  }
  void open(bool object) { scopes_.push_back({object, false, true, keys_.size(), {}, false}); }
  void close() {
    keys_.resize(scopes_.back().first_key);
    if (scopes_.back().many) sets_.pop_back();
    scopes_.pop_back();
  }
  // Whether a string just read is a key (of the innermost object, whose last value has ended).
  [[nodiscard]] bool wants_key() const {
    return !scopes_.empty() && scopes_.back().object && !scopes_.back().has_key;
  }
  void key(std::string_view k) {
    scopes_.back().key = k;
    scopes_.back().has_key = true;
  }
  // A value ended in the innermost scope: when that is an object, its key is checked and kept.
  // The key, when it was written before in that object.
  std::optional<std::string_view> value_ended() {
    if (scopes_.empty() || !scopes_.back().object) return std::nullopt;
    auto& scope = scopes_.back();
    scope.has_key = false;
    const auto key = scope.key;
    if (scope.many) {
      if (!sets_.back().insert(key).second) return key;
      return std::nullopt;
    }
    const auto held = keys_.size() - scope.first_key;
    // The apiserver writes a map's keys in order: while each key sorts after the one before, none
    // can repeat, and one comparison a key is all it costs.
    if (held == 0 || (scope.in_order && keys_.back() < key)) {
      keys_.push_back(key);
      return std::nullopt;
    }
    scope.in_order = false;
    for (std::size_t i = scope.first_key; i < keys_.size(); ++i) {
      if (keys_[i] == key) return key;
    }
    keys_.push_back(key);
    if (held + 1 > pairwise_members) {  // hashed from here on: a hostile object stays linear
      scope.many = true;
      sets_.emplace_back(keys_.begin() + static_cast<std::ptrdiff_t>(scope.first_key), keys_.end());
    }
    return std::nullopt;
  }

 private:
  struct open_scope {
    bool object = false;
    bool has_key = false;       // a key read whose value has not ended yet
    bool in_order = true;       // every key so far sorts after the one before it
    std::size_t first_key = 0;  // where the object's keys start in keys_
    std::string_view key;       // the key read
    bool many = false;          // past pairwise_members keys: they are in sets_.back()
  };
  std::vector<open_scope> scopes_;
  std::vector<std::string_view> keys_;
  std::vector<std::unordered_set<std::string_view>> sets_;  // one per scope with `many`
};

// The first key written twice in one object of `doc`, in the order building a tree meets it
// (parse_json's): per member, what is inside its value first, then its key. Every object of a
// review is checked, so this is one linear scan over simdjson's tape (its documented format:
// a word per value, numbers two, a string's word pointing into the string buffer), with no call
// per value: going through dom::element it cost as much as the parse itself.
std::optional<std::string_view> first_repeated_key(const simdjson::dom::document& doc) {
  thread_local key_scan kept;  // cleared, not freed: reached once, as a thread_local costs a call
  auto& scan = kept;
  scan.reset();
  const std::uint64_t* tape = doc.tape.get();
  const std::uint8_t* strings = doc.string_buf.get();
  const auto value_of = [](std::uint64_t word) {
    return word & simdjson::internal::JSON_VALUE_MASK;
  };
  const std::size_t end = value_of(tape[0]);  // the root's closing word
  for (std::size_t i = 1; i < end;) {
    const auto word = tape[i];
    switch (static_cast<char>(word >> 56)) {
      case '{':
      case '[':
        scan.open(static_cast<char>(word >> 56) == '{');
        ++i;
        continue;
      case '}':
      case ']':
        scan.close();
        ++i;
        break;
      case '"':
        ++i;
        if (scan.wants_key()) {
          std::uint32_t length = 0;
          const auto* at = strings + value_of(word);
          std::memcpy(&length, at, sizeof length);
          scan.key({reinterpret_cast<const char*>(at + sizeof length), length});
          continue;
        }
        break;
      case 'l':
      case 'u':
      case 'd':
        i += 2;
        break;
      default:  // null, true, false
        ++i;
        break;
    }
    if (auto repeat = scan.value_ended()) return repeat;
  }
  return std::nullopt;
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

result<read_only_json> parse_read_only(std::string_view text) {
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
  // The values are the caller's, in a document of their own; the parser's state stays here.
  auto document = std::make_unique<simdjson::dom::document>();
  element root;
  if (const auto code =
          parser.parse_into_document(*document, buffer.data(), buffer.size(), false).get(root);
      code != simdjson::SUCCESS)
    return describe_failure(text, code);
  if (const auto repeat = first_repeated_key(*document))
    return error{"not valid JSON: duplicate key " + quote(std::string(*repeat)) + " in an object"};
  return read_only_json(std::move(document));
}

result<json> parse_json(std::string_view text) {
  auto document = parse_read_only(text);
  if (!document) return std::move(document).take_error();
  return to_json(document->root());
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
