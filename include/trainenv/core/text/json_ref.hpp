// Read-only JSON read straight from the DOM simdjson parsed, without building a tree: the pod an
// admission carries is read this way, once, by every reader. A json_ref is used as a
// `const nlohmann::json*` is (none for an absent member, `*` and `->` to read it), so code that
// reads a pod reads it like any other JSON; reading never allocates.
#pragma once

#include <cstddef>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <simdjson.h>
#include <nlohmann/json.hpp>

#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/result.hpp"
#include "trainenv/core/text/string_map.hpp"

namespace trainenv::core {

class json_ref {
 public:
  json_ref() = default;  // none
  explicit json_ref(simdjson::dom::element e) : element_(e), present_(true) {}

  explicit operator bool() const { return present_; }
  friend bool operator==(const json_ref& r, std::nullptr_t) { return !r.present_; }
  const json_ref& operator*() const { return *this; }
  const json_ref* operator->() const { return this; }

  [[nodiscard]] simdjson::dom::element_type type() const { return element_.type(); }
  [[nodiscard]] bool is_object() const { return is(simdjson::dom::element_type::OBJECT); }
  [[nodiscard]] bool is_array() const { return is(simdjson::dom::element_type::ARRAY); }
  [[nodiscard]] bool is_string() const { return is(simdjson::dom::element_type::STRING); }
  [[nodiscard]] bool is_boolean() const { return is(simdjson::dom::element_type::BOOL); }
  [[nodiscard]] bool is_null() const { return is(simdjson::dom::element_type::NULL_VALUE); }
  [[nodiscard]] bool is_integer() const {
    return is(simdjson::dom::element_type::INT64) || is(simdjson::dom::element_type::UINT64);
  }
  [[nodiscard]] bool is_number() const {
    return is(simdjson::dom::element_type::INT64) || is(simdjson::dom::element_type::UINT64) ||
           is(simdjson::dom::element_type::DOUBLE);
  }

  // The string; empty when this is not one.
  [[nodiscard]] std::string_view string() const;
  // True only for the boolean true.
  [[nodiscard]] bool is_true() const;
  // An array's items or an object's members; 0 for anything else.
  [[nodiscard]] std::size_t size() const;
  [[nodiscard]] bool empty() const { return size() == 0; }
  // An array's item `i` (found by walking the array: iterate where you can); none past the end.
  [[nodiscard]] json_ref operator[](std::size_t i) const;
  // The member `key` of an object, as it is (null included); none when absent.
  [[nodiscard]] json_ref find(std::string_view key) const;

  // An iterator over simdjson's `At` that gives each place as `Value` (read_at): an array's
  // items and an object's members are walked alike.
  template <class At, class Value>
  class cursor;
  struct member_entry;
  // An array's items, in order; nothing for anything else.
  using iterator = cursor<simdjson::dom::array::iterator, json_ref>;
  [[nodiscard]] iterator begin() const;
  [[nodiscard]] iterator end() const;
  // An object's members, in the order written: `for (const auto [key, value] : r.members())`.
  using member_iterator = cursor<simdjson::dom::object::iterator, member_entry>;
  struct member_range;
  [[nodiscard]] member_range members() const;

  [[nodiscard]] simdjson::dom::element element() const { return element_; }

 private:
  [[nodiscard]] static json_ref read_at(const simdjson::dom::array::iterator& at);
  [[nodiscard]] static member_entry read_at(const simdjson::dom::object::iterator& at);
  [[nodiscard]] bool is(simdjson::dom::element_type t) const {
    return present_ && element_.type() == t;
  }

  simdjson::dom::element element_;
  bool present_ = false;
};

struct json_ref::member_entry {
  std::string_view key;
  json_ref value;
};

template <class At, class Value>
class json_ref::cursor {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = Value;
  using difference_type = std::ptrdiff_t;
  using pointer = void;
  using reference = Value;

  cursor() = default;
  explicit cursor(At at) : at_(at) {}
  Value operator*() const { return json_ref::read_at(at_); }
  cursor& operator++() {
    ++at_;
    return *this;
  }
  cursor operator++(int) {
    auto before = *this;
    ++at_;
    return before;
  }
  bool operator==(const cursor& other) const { return at_ == other.at_; }

 private:
  At at_;
};

inline json_ref json_ref::read_at(const simdjson::dom::array::iterator& at) {
  return json_ref(*at);
}
inline json_ref::member_entry json_ref::read_at(const simdjson::dom::object::iterator& at) {
  return {at.key(), json_ref(at.value())};
}

struct json_ref::member_range {
  member_iterator first, last;
  [[nodiscard]] member_iterator begin() const { return first; }
  [[nodiscard]] member_iterator end() const { return last; }
};

// As json_access's over nlohmann values: the member when present and not null; its string.
[[nodiscard]] json_ref member(const json_ref& object, std::string_view key);
[[nodiscard]] std::optional<std::string_view> string_member(const json_ref& object,
                                                            std::string_view key);
[[nodiscard]] std::string_view string_or_empty(const json_ref& object, std::string_view key);

// Whether `value` equals `wanted` as nlohmann's operator== would find them: numbers by value
// across integer and floating-point types, objects member by member. None equals null.
[[nodiscard]] bool same_value(const json_ref& value, const nlohmann::json& wanted);

// The value as nlohmann values (non-negative integers unsigned, as nlohmann's parser types them),
// where JSON is built for output: null for none.
[[nodiscard]] nlohmann::json to_json(const json_ref& value);

// `value` as compact JSON text appended to `out`: what to_json(value).dump() writes.
void append_json(std::string& out, const json_ref& value);

// An object of strings (labels, annotations) read flat; not_object when it is something else.
[[nodiscard]] string_map read_string_map(const json_ref& at);

// A parsed JSON document, owned: the values json_refs into it refer to live as long as it does.
class read_only_json {
 public:
  read_only_json() = default;
  explicit read_only_json(std::unique_ptr<simdjson::dom::document> document);

  [[nodiscard]] json_ref root() const { return root_; }

 private:
  std::unique_ptr<simdjson::dom::document> document_;
  json_ref root_;
};

// `text` parsed and checked as parse_json checks it (its errors, word for word): valid JSON,
// nested at most max_json_depth levels, no key twice in one object.
[[nodiscard]] result<read_only_json> parse_read_only(std::string_view text);

}  // namespace trainenv::core
