#include "trainenv/core/text/json_ref.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "trainenv/core/text/json_text.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;
using simdjson::dom::element_type;

}  // namespace

std::string_view json_ref::string() const {
  return is_string() ? element_.get_string().value_unsafe() : std::string_view();
}

bool json_ref::is_true() const {
  return is_boolean() && element_.get_bool().value_unsafe();
}

std::size_t json_ref::size() const {
  if (is_array()) return element_.get_array().value_unsafe().size();
  if (is_object()) return element_.get_object().value_unsafe().size();
  return 0;
}

json_ref json_ref::operator[](std::size_t i) const {
  for (const auto item : *this) {
    if (i-- == 0) return item;
  }
  return {};
}

json_ref json_ref::find(std::string_view key) const {
  if (!is_object()) return {};
  // Not at_key: it would stop at the first member of that key too, but it is written for keys
  // with escapes and compares more than once per member.
  const simdjson::dom::object object = element_.get_object().value_unsafe();
  for (const auto field : object) {
    if (field.key == key) return json_ref(field.value);
  }
  return {};
}

json_ref::iterator json_ref::begin() const {
  return is_array() ? iterator(element_.get_array().value_unsafe().begin()) : iterator();
}

json_ref::iterator json_ref::end() const {
  return is_array() ? iterator(element_.get_array().value_unsafe().end()) : iterator();
}

json_ref::member_range json_ref::members() const {
  if (!is_object()) return {};
  const auto object = element_.get_object().value_unsafe();
  return {member_iterator(object.begin()), member_iterator(object.end())};
}

json_ref member(const json_ref& object, std::string_view key) {
  auto value = object.find(key);
  return value.is_null() ? json_ref() : value;
}

std::optional<std::string_view> string_member(const json_ref& object, std::string_view key) {
  const auto value = object.find(key);
  if (!value.is_string()) return std::nullopt;
  return value.string();
}

std::string_view string_or_empty(const json_ref& object, std::string_view key) {
  return object.find(key).string();
}

namespace {

bool same_number(const json_ref& value, const json& wanted) {
  const auto e = value.element();
  switch (e.type()) {
    case element_type::INT64: {
      const auto n = e.get_int64().value_unsafe();
      // Held as nlohmann holds it: unsigned from 0 up.
      return n >= 0 ? json(static_cast<std::uint64_t>(n)) == wanted : json(n) == wanted;
    }
    case element_type::UINT64:
      return json(e.get_uint64().value_unsafe()) == wanted;
    case element_type::DOUBLE:
      return json(e.get_double().value_unsafe()) == wanted;
    default:
      return false;
  }
}

}  // namespace

bool same_value(const json_ref& value, const json& wanted) {
  if (!value || value.is_null()) return wanted.is_null();
  switch (value.type()) {
    case element_type::OBJECT: {
      if (!wanted.is_object() || wanted.size() != value.size()) return false;
      const auto members = value.members();
      return std::all_of(members.begin(), members.end(), [&](const json_ref::member_entry& m) {
        const auto it = wanted.find(m.key);
        return it != wanted.end() && same_value(m.value, *it);
      });
    }
    case element_type::ARRAY: {
      if (!wanted.is_array() || wanted.size() != value.size()) return false;
      std::size_t i = 0;
      for (const auto item : value) {
        if (!same_value(item, wanted[i++])) return false;
      }
      return true;
    }
    case element_type::STRING:
      return wanted.is_string() && wanted.get_ref<const std::string&>() == value.string();
    case element_type::BOOL:
      return wanted.is_boolean() && wanted.get<bool>() == value.is_true();
    case element_type::NULL_VALUE:
      return wanted.is_null();
    default:
      return same_number(value, wanted);
  }
}

json to_json(const json_ref& value) {
  if (!value) return nullptr;
  const auto e = value.element();
  switch (e.type()) {
    case element_type::OBJECT: {
      json out = json::object();
      auto& members = out.get_ref<json::object_t&>();
      // The document has no key twice (parse_read_only); at the end first, as the apiserver
      // writes an object's members in key order.
      for (const auto [key, item] : value.members())
        members.emplace_hint(members.end(), std::string(key), to_json(item));
      return out;
    }
    case element_type::ARRAY: {
      json out = json::array();
      for (const auto item : value) out.push_back(to_json(item));
      return out;
    }
    case element_type::STRING:
      return std::string(value.string());
    case element_type::INT64: {
      const auto n = e.get_int64().value_unsafe();
      return n >= 0 ? json(static_cast<std::uint64_t>(n)) : json(n);
    }
    case element_type::UINT64:
      return e.get_uint64().value_unsafe();
    case element_type::DOUBLE:
      return e.get_double().value_unsafe();
    case element_type::BOOL:
      return value.is_true();
    case element_type::NULL_VALUE:
      break;
  }
  return nullptr;
}

void append_json(std::string& out, const json_ref& value) {
  append_json(out, to_json(value));
}

string_map read_string_map(const json_ref& at) {
  if (!at || at.is_null()) return {};
  if (!at.is_object()) return string_map(string_map::shape::not_object);
  std::size_t members = 0;
  std::size_t bytes = 0;
  for (const auto [key, value] : at.members()) {
    ++members;
    bytes += key.size() + value.string().size();
  }
  string_map::writer w(members, bytes);
  for (const auto [key, value] : at.members()) {
    const auto text = value.string();
    w.add(key, value.is_string() ? &text : nullptr);
  }
  return std::move(w).finish();
}

read_only_json::read_only_json(std::unique_ptr<simdjson::dom::document> document)
    : document_(std::move(document)), root_(document_->root()) {}

}  // namespace trainenv::core
