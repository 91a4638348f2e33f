#include "trainenv/inputs/yaml.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

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

// What aliases may expand to in one text (SPEC §5): past either bound the text is refused, so a
// few hundred bytes cannot stand for billions of values ("billion laughs").
constexpr std::size_t max_alias_bytes = std::size_t{1} << 20;  // 1 MiB, all expansions together
constexpr std::size_t max_aliases = 10'000;

// The bytes a value takes as JSON text, and how deep it nests, without recursion.
struct value_extent {
  std::size_t bytes = 0;
  int depth = 0;
};
value_extent extent_of(const json& value) {
  value_extent out;
  std::vector<std::pair<const json*, int>> stack{{&value, 1}};
  while (!stack.empty()) {
    const auto [v, depth] = stack.back();
    stack.pop_back();
    if (v->is_structured()) {
      out.depth = std::max(out.depth, depth);
      out.bytes += 2;
      for (auto it = v->begin(); it != v->end(); ++it) {
        if (v->is_object()) out.bytes += it.key().size() + 4;
        stack.emplace_back(&*it, depth + 1);
      }
    } else {
      out.bytes += v->is_string() ? v->get_ref<const std::string&>().size() + 2 : 8;
    }
  }
  return out;
}

std::string anchor_name(const yaml_char_t* anchor) {
  return anchor != nullptr ? std::string(reinterpret_cast<const char*>(anchor)) : std::string();
}

// libyaml's event stream -> JSON values, without recursion: an explicit stack of the open
// sequences and mappings. Anchors (&name) keep a copy of their node's value; an alias (*name)
// delivers that copy, within max_alias_bytes and max_aliases for the whole text and the nesting
// bound; a mapping's merge key (<<: *name, or a list of them) adds the merged mappings' keys that
// the mapping does not set itself, as Kubernetes' YAML reader (YAML 1.1) does.
class document_builder {
 public:
  // Takes one event; an error ends the parse.
  core::result<bool> take(const yaml_event_t& event) {
    switch (event.type) {
      case YAML_DOCUMENT_START_EVENT:
        root_.reset();
        anchors_.clear();  // an anchor names a node of its own document only
        return true;
      case YAML_DOCUMENT_END_EVENT:
        // An empty document (between two "---") holds a null: skipped, as nothing was written.
        if (root_ && !root_->is_null()) documents_.push_back(std::move(*root_));
        root_.reset();
        return true;
      case YAML_ALIAS_EVENT:
        return alias(anchor_name(event.data.alias.anchor), event.start_mark);
      case YAML_SCALAR_EVENT: {
        const std::string text(reinterpret_cast<const char*>(event.data.scalar.value),
                               event.data.scalar.length);
        const bool quoted = event.data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
        if (!open_.empty() && open_.back().value.is_object() && !open_.back().key) {
          if (event.data.scalar.anchor != nullptr)
            return core::error{at_line(event.start_mark) + ": an anchor on a mapping key"};
          return key(text, !quoted && text == "<<", event.start_mark);
        }
        const auto* tag = reinterpret_cast<const char*>(event.data.scalar.tag);
        if (quoted || (tag != nullptr && std::string_view(tag) == YAML_STR_TAG)) {
          return deliver(json(text), anchor_name(event.data.scalar.anchor), event.start_mark);
        }
        auto value = plain_scalar(text);
        if (!value) return core::error{at_line(event.start_mark) + ": " + value.message()};
        return deliver(std::move(*value), anchor_name(event.data.scalar.anchor), event.start_mark);
      }
      case YAML_SEQUENCE_START_EVENT:
      case YAML_MAPPING_START_EVENT: {
        if (!open_.empty() && open_.back().value.is_object() && !open_.back().key)
          return core::error{at_line(event.start_mark) + ": mapping keys must be plain strings"};
        if (open_.size() >= static_cast<std::size_t>(core::max_json_depth)) {
          return core::error{"document nests deeper than " + std::to_string(core::max_json_depth) +
                             " levels"};
        }
        const bool mapping = event.type == YAML_MAPPING_START_EVENT;
        container c;
        c.value = mapping ? json::object() : json::array();
        c.anchor = anchor_name(mapping ? event.data.mapping_start.anchor
                                       : event.data.sequence_start.anchor);
        c.start = event.start_mark;
        open_.push_back(std::move(c));
        return true;
      }
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT: {
        container done = std::move(open_.back());
        open_.pop_back();
        for (auto& merged : done.merges) {  // the first merged mapping wins over later ones
          for (auto it = merged.begin(); it != merged.end(); ++it) {
            if (!done.value.contains(it.key())) done.value.emplace(it.key(), std::move(*it));
          }
        }
        return deliver(std::move(done.value), done.anchor, done.start);
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
    bool merge_key = false;          // the mapping has a merge key << (one at most)
    bool merging = false;            // the key awaiting its value is that merge key
    json merges = json::array();     // the mappings merged in, in order
    std::string anchor;              // the anchor on this node, if any
    yaml_mark_t start{};
  };
  struct anchored {
    json value;
    value_extent extent;
  };

  core::result<bool> key(const std::string& text, bool merge, const yaml_mark_t& mark) {
    auto& top = open_.back();
    if ((merge && top.merge_key) || (!merge && top.value.contains(text))) {
      return core::error{"line " + std::to_string(mark.line + 1) + ": duplicate key " +
                         core::quote(text) + " (the first would be silently lost)"};
    }
    top.key = text;
    top.merging = merge;
    top.merge_key = top.merge_key || merge;
    return true;
  }

  core::result<bool> alias(const std::string& name, const yaml_mark_t& mark) {
    if (!open_.empty() && open_.back().value.is_object() && !open_.back().key)
      return core::error{at_line(mark) + ": mapping keys must be plain strings, not aliases"};
    const auto found = anchors_.find(name);
    if (found == anchors_.end()) {
      return core::error{at_line(mark) + ": alias *" + name + " names no anchor before it"};
    }
    const auto& [value, extent] = found->second;
    if (++aliases_ > max_aliases) {
      return core::error{at_line(mark) + ": more than " + std::to_string(max_aliases) +
                         " aliases (*name) in one text; write the values out"};
    }
    alias_bytes_ += extent.bytes;
    if (alias_bytes_ > max_alias_bytes) {
      return core::error{at_line(mark) + ": aliases (*name) expand to more than 1 MiB; write " +
                         "the values out"};
    }
    if (open_.size() + static_cast<std::size_t>(extent.depth) >
        static_cast<std::size_t>(core::max_json_depth)) {
      return core::error{at_line(mark) + ": alias *" + name + " nests the document deeper than " +
                         std::to_string(core::max_json_depth) + " levels"};
    }
    return deliver(json(value), {}, mark);
  }

  core::result<bool> deliver(json value, const std::string& anchor, const yaml_mark_t& mark) {
    if (!anchor.empty()) {
      const auto extent = extent_of(value);
      anchors_.insert_or_assign(anchor, anchored{value, extent});  // a later one shadows it
    }
    if (open_.empty()) {
      root_ = std::move(value);
    } else if (auto& top = open_.back(); top.value.is_array()) {
      top.value.push_back(std::move(value));
    } else if (top.merging) {
      top.merging = false;
      top.key.reset();
      return merge(top, std::move(value), mark);
    } else {
      top.value.emplace(std::move(*top.key), std::move(value));
      top.key.reset();
    }
    return true;
  }

  // The value of a merge key: a mapping, or a list of mappings.
  static core::result<bool> merge(container& into, json value, const yaml_mark_t& mark) {
    const auto refused = [&] {
      return core::error{at_line(mark) + ": the merge key << takes a mapping or a list of them"};
    };
    if (value.is_object()) {
      into.merges.push_back(std::move(value));
      return true;
    }
    if (!value.is_array()) return refused();
    for (auto& each : value) {
      if (!each.is_object()) return refused();
      into.merges.push_back(std::move(each));
    }
    return true;
  }

  std::vector<container> open_;
  std::optional<json> root_;
  std::vector<json> documents_;
  std::map<std::string, anchored, std::less<>> anchors_;
  std::size_t aliases_ = 0;      // in the whole text
  std::size_t alias_bytes_ = 0;  // what they expanded to, in the whole text
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

namespace {

// Whether a string written plain would be read back as something else: by the core schema this
// reader uses (4, true, null, 0x1F), or by the YAML 1.1 readers kubectl and client-go use
// (yes, no, on, off, y, n).
bool needs_quotes(const std::string& s) {
  std::string lower(s);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* word : {"yes", "no", "on", "off", "y", "n"}) {
    if (lower == word) return true;
  }
  const auto typed = plain_scalar(s);
  return !typed || !typed->is_string();
}

class yaml_writer {
 public:
  yaml_writer() {
    if (yaml_emitter_initialize(&emitter_) == 0) throw std::bad_alloc();
    yaml_emitter_set_output(&emitter_, &yaml_writer::append, &out_);
    yaml_emitter_set_unicode(&emitter_, 1);
    yaml_emitter_set_width(&emitter_, -1);  // no folding: a value stays on its line
  }
  yaml_writer(const yaml_writer&) = delete;
  yaml_writer& operator=(const yaml_writer&) = delete;
  yaml_writer(yaml_writer&&) = delete;
  yaml_writer& operator=(yaml_writer&&) = delete;
  ~yaml_writer() { yaml_emitter_delete(&emitter_); }

  std::string write(const json& document) {
    yaml_event_t event;
    yaml_stream_start_event_initialize(&event, YAML_UTF8_ENCODING);
    emit(event);
    yaml_document_start_event_initialize(&event, nullptr, nullptr, nullptr, 0);  // "---"
    emit(event);
    value(document);
    yaml_document_end_event_initialize(&event, 1);
    emit(event);
    yaml_stream_end_event_initialize(&event);
    emit(event);
    return std::move(out_);
  }

 private:
  static int append(void* data, unsigned char* buffer, size_t size) {
    static_cast<std::string*>(data)->append(reinterpret_cast<const char*>(buffer), size);
    return 1;
  }

  void emit(yaml_event_t& event) {
    if (yaml_emitter_emit(&emitter_, &event) == 0)
      throw std::runtime_error(emitter_.problem != nullptr ? emitter_.problem : "YAML emitter");
  }

  void scalar(const std::string& text, yaml_scalar_style_t style) {
    yaml_event_t event;
    yaml_scalar_event_initialize(
        &event, nullptr, nullptr,
        reinterpret_cast<yaml_char_t*>(const_cast<char*>(text.data())),  // NOLINT: libyaml copies
        static_cast<int>(text.size()), 1, 1, style);
    emit(event);
  }

  // The document's depth is bounded by the reader that made it (core::max_json_depth).
  void value(const json& v) {  // NOLINT(misc-no-recursion)
    yaml_event_t event;
    if (v.is_object()) {
      yaml_mapping_start_event_initialize(
          &event, nullptr, nullptr, 1,
          v.empty() ? YAML_FLOW_MAPPING_STYLE : YAML_BLOCK_MAPPING_STYLE);
      emit(event);
      for (const auto& [key, member] : v.items()) {
        scalar(key, needs_quotes(key) ? YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_ANY_SCALAR_STYLE);
        value(member);
      }
      yaml_mapping_end_event_initialize(&event);
      emit(event);
    } else if (v.is_array()) {
      yaml_sequence_start_event_initialize(
          &event, nullptr, nullptr, 1,
          v.empty() ? YAML_FLOW_SEQUENCE_STYLE : YAML_BLOCK_SEQUENCE_STYLE);
      emit(event);
      for (const auto& item : v) value(item);
      yaml_sequence_end_event_initialize(&event);
      emit(event);
    } else if (v.is_string()) {
      const auto& text = v.get_ref<const std::string&>();
      scalar(text, needs_quotes(text) ? YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_ANY_SCALAR_STYLE);
    } else {
      scalar(v.dump(), YAML_PLAIN_SCALAR_STYLE);  // numbers, booleans, null as JSON writes them
    }
  }

  yaml_emitter_t emitter_{};
  std::string out_;
};

}  // namespace

std::string to_yaml(const json& document) {
  return yaml_writer().write(document);
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
