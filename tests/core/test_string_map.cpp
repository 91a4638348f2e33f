// string_map (core/text/string_map.hpp): an object of strings held flat, entries in key order;
// of a key added twice the first value.
#include <catch2/catch.hpp>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainenv/core/text/json_ref.hpp"
#include "trainenv/core/text/string_map.hpp"

namespace string_map_tests {

using nlohmann::json;
using trainenv::core::read_string_map;
using trainenv::core::string_map;

// A member to add: a string value, or (nullopt) a value that is not a string.
struct member_text {
  std::string key;
  std::optional<std::string> value;
};

// The map written member by member, as read_string_map writes one.
string_map written(const std::vector<member_text>& members) {
  std::size_t bytes = 0;
  for (const auto& m : members) bytes += m.key.size() + (m.value ? m.value->size() : 0);
  string_map::writer w(members.size(), bytes);
  for (const auto& m : members) {
    if (m.value) {
      const std::string_view text = *m.value;
      w.add(m.key, &text);
    } else {
      w.add(m.key, nullptr);
    }
  }
  return std::move(w).finish();
}

std::vector<std::string> keys_of(const string_map& map) {
  std::vector<std::string> out;
  for (const auto& e : map.entries()) out.emplace_back(e.key);
  return out;
}

std::string found(const string_map& map, std::string_view key) {
  const auto* value = map.find(key);
  return value != nullptr ? std::string(*value) : std::string("<none>");
}

TEST_CASE("string_map: entries come out in key order whatever the order added", "[string_map]") {
  const auto map = written({{"zeta", "26"},
                            {"alpha", "1"},
                            {"Zulu", "upper"},
                            {"a.b/c", "dotted"},
                            {"alpha2", "x"},
                            {"\xc3\xa9t\xc3\xa9", "bytes"}});
  CHECK(map.kind() == string_map::shape::object);
  // Byte order: upper case before lower, a prefix before what extends it, UTF-8 after ASCII.
  CHECK(keys_of(map) ==
        std::vector<std::string>{"Zulu", "a.b/c", "alpha", "alpha2", "zeta", "\xc3\xa9t\xc3\xa9"});
  CHECK(found(map, "zeta") == "26");
  CHECK(found(map, "alpha") == "1");
  CHECK(found(map, "alpha2") == "x");
  CHECK(found(map, "Zulu") == "upper");
  CHECK(found(map, "\xc3\xa9t\xc3\xa9") == "bytes");
}

TEST_CASE("string_map: lookups of absent keys, prefixes and values that are not strings",
          "[string_map]") {
  const auto map =
      written({{"app", "web"}, {"count", std::nullopt}, {"empty", ""}, {"", "blank key"}});
  CHECK(map.find("missing") == nullptr);
  CHECK(map.find("ap") == nullptr);    // a prefix of a key
  CHECK(map.find("apps") == nullptr);  // a key plus more
  CHECK(map.find("APP") == nullptr);   // case matters
  CHECK(map.find("zzz") == nullptr);   // past the last key
  // Present but not a string: listed, never found.
  CHECK(map.find("count") == nullptr);
  REQUIRE(map.entries().size() == 4);
  CHECK(map.entries()[2].key == "count");
  CHECK_FALSE(map.entries()[2].is_string);
  // An empty string is a string, and an empty key a key.
  REQUIRE(map.find("empty") != nullptr);
  CHECK(map.find("empty")->empty());
  CHECK(found(map, "") == "blank key");

  const string_map none;
  CHECK(none.kind() == string_map::shape::absent);
  CHECK(none.entries().empty());
  CHECK(none.find("") == nullptr);
  CHECK(none.find("app") == nullptr);
}

TEST_CASE("string_map: of a key added twice the first value is kept, and the repeat is told",
          "[string_map]") {
  const auto map = written({{"b", "first"}, {"a", "1"}, {"b", "second"}});
  CHECK(keys_of(map) == std::vector<std::string>{"a", "b"});
  CHECK(found(map, "b") == "first");

  // Two keys repeated: the earlier repetition, in the order added, is the one reported.
  const auto two = written({{"x", "0"}, {"y", "1"}, {"z", "2"}, {"y", "3"}, {"x", "4"}});
  CHECK(keys_of(two) == std::vector<std::string>{"x", "y", "z"});
  CHECK(found(two, "x") == "0");
  CHECK(found(two, "y") == "1");

  // A repeat right after, in order (nothing to sort but the repeat itself).
  const auto adjacent = written({{"a", "1"}, {"a", "2"}, {"b", "3"}});
  CHECK(found(adjacent, "a") == "1");
  CHECK(adjacent.entries().size() == 2);

  // Three times: the first value, the second addition reported.
  const auto three = written({{"k", "v0"}, {"j", "-"}, {"k", "v1"}, {"k", "v2"}});
  CHECK(found(three, "k") == "v0");

  // The first value is kept even when it is not a string: the key then finds nothing.
  const auto shadowed = written({{"k", std::nullopt}, {"k", "text"}});
  CHECK(shadowed.find("k") == nullptr);
}

TEST_CASE("read_string_map reads a JSON object, and tells null, absent and other values apart",
          "[string_map]") {
  const auto doc = trainenv::core::parse_read_only(
      R"({"labels": {"team": "ml", "tier": 3, "app": "trainer", "none": null},
          "others": [["a"], "text", 1, true, null], "empty": {}})");
  REQUIRE(doc.ok());
  const auto root = doc->root();
  const auto map = read_string_map(root.find("labels"));
  CHECK(map.kind() == string_map::shape::object);
  CHECK(keys_of(map) == std::vector<std::string>{"app", "none", "team", "tier"});
  CHECK(found(map, "team") == "ml");
  CHECK(map.find("tier") == nullptr);
  CHECK(map.find("none") == nullptr);

  CHECK(read_string_map(root.find("absent")).kind() == string_map::shape::absent);
  std::size_t i = 0;
  for (const auto other : root.find("others")) {
    INFO(i++);
    const auto m = read_string_map(other);
    CHECK(m.kind() ==
          (other.is_null() ? string_map::shape::absent : string_map::shape::not_object));
    CHECK(m.entries().empty());
  }
  const auto e = read_string_map(root.find("empty"));
  CHECK(e.kind() == string_map::shape::object);
  CHECK(e.entries().empty());
}

TEST_CASE("string_map: a copy owns its bytes and outlives the original", "[string_map]") {
  auto original = std::make_unique<string_map>(
      written({{"k2", "second value"}, {"k1", "first value"}, {"n", std::nullopt}}));
  const string_map copy(*original);
  string_map assigned;
  assigned = *original;
  // The copies' views point into their own bytes, not the original's.
  const auto* at = original->find("k1");
  REQUIRE(at != nullptr);
  CHECK(copy.find("k1")->data() != at->data());
  CHECK(assigned.find("k1")->data() != at->data());
  original.reset();
  for (const string_map* m : {&copy, static_cast<const string_map*>(&assigned)}) {
    CHECK(m->kind() == string_map::shape::object);
    CHECK(keys_of(*m) == std::vector<std::string>{"k1", "k2", "n"});
    CHECK(found(*m, "k1") == "first value");
    CHECK(found(*m, "k2") == "second value");
    CHECK(m->find("n") == nullptr);
  }
  // Assigning a map to itself leaves it as it was.
  auto& self = assigned;
  assigned = self;
  CHECK(found(assigned, "k2") == "second value");

  // A shape without entries is copied too.
  const string_map other(string_map::shape::not_object);
  const string_map other_copy(other);  // NOLINT(performance-unnecessary-copy-initialization)
  CHECK(other_copy.kind() == string_map::shape::not_object);
}

TEST_CASE("string_map: a moved-from map is empty and absent, and safe to copy", "[string_map]") {
  string_map source = written({{"a", "1"}, {"b", "2"}});
  string_map moved(std::move(source));
  CHECK(found(moved, "b") == "2");
  // NOLINTBEGIN(bugprone-use-after-move): what a moved-from map is, is the point.
  CHECK(source.kind() == string_map::shape::absent);
  CHECK(source.entries().empty());
  CHECK(source.find("a") == nullptr);
  const string_map copy_of_empty(source);
  CHECK(copy_of_empty.entries().empty());
  CHECK(copy_of_empty.kind() == string_map::shape::absent);

  string_map target = written({{"old", "x"}});
  target = std::move(moved);
  CHECK(keys_of(target) == std::vector<std::string>{"a", "b"});
  CHECK(target.find("old") == nullptr);
  CHECK(moved.kind() == string_map::shape::absent);
  CHECK(moved.entries().empty());
  // NOLINTEND(bugprone-use-after-move)
}

}  // namespace string_map_tests
