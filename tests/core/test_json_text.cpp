// core/json_text.hpp: untrusted JSON text through simdjson into nlohmann values (docs/contract.md
// §6).
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "../test_support.hpp"
#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/json_text.hpp"

using Catch::Matchers::Contains;
using nlohmann::json;
using namespace trainenv::core;

namespace {

std::string json_parse_error(const std::string& text) {
  auto r = parse_json(text);
  INFO("text: " << text.substr(0, 200));
  REQUIRE_FALSE(r.ok());
  return r.message();
}

}  // namespace

TEST_CASE("parse_json builds the same values as nlohmann's own parser", "[json_text]") {
  const std::string text = R"({"s": "x\u00e9\"\n", "i": -3, "u": 29500, "big": 18446744073709551615,
      "f": 1.5e3, "t": true, "n": null, "a": [1, [2, {}], []], "o": {"k": {"deep": [false]}}})";
  const auto r = parse_json(text);
  REQUIRE(r.ok());
  CHECK(*r == json::parse(text));
  CHECK(r->dump() == json::parse(text).dump());
  // nlohmann types non-negative integers as unsigned; the reader keeps that, for equal dumps.
  CHECK((*r)["u"].is_number_unsigned());
  CHECK((*r)["i"].is_number_integer());
}

TEST_CASE("parse_json reports the byte offset of invalid JSON", "[json_text]") {
  CHECK_THAT(json_parse_error("[1, 2,"), Contains("not valid JSON (at byte"));
  CHECK_THAT(json_parse_error(R"({"a": ?})"), Contains("at byte 7"));
  CHECK_THAT(json_parse_error(""), Contains("not valid JSON"));
  CHECK_THAT(json_parse_error("{} {}"), Contains("not valid JSON"));
}

TEST_CASE("parse_json refuses a key given twice in one object", "[json_text]") {
  CHECK_THAT(json_parse_error(R"({"a": 1, "a": 2})"), Contains("duplicate key \"a\""));
  CHECK_THAT(json_parse_error(R"({"x": [{"env": [], "env": []}]})"),
             Contains("duplicate key \"env\""));
}

TEST_CASE("parse_json refuses nesting past the limit, at any depth, without recursing",
          "[json_text]") {
  const auto nested = [](int depth) {
    return std::string(static_cast<std::size_t>(depth), '[') +
           std::string(static_cast<std::size_t>(depth), ']');
  };
  CHECK(parse_json(nested(max_json_depth)).ok());
  CHECK_THAT(json_parse_error(nested(max_json_depth + 1)),
             Contains("nests deeper than 1000 levels"));
  CHECK_THAT(json_parse_error(nested(100'000)), Contains("nests deeper than 1000 levels"));
  CHECK_THAT(json_parse_error(std::string(1'000'000, '{')), Contains("nests deeper"));
}

TEST_CASE("parse_json refuses invalid UTF-8, raw control characters and numbers out of range",
          "[json_text]") {
  CHECK_THAT(json_parse_error("{\"a\": \"\xff\xfe\"}"), Contains("not valid JSON"));
  CHECK_THAT(json_parse_error("{\"a\": \"\xc3\"}"), Contains("not valid JSON"));
  CHECK_THAT(json_parse_error("{\"a\": \"line\nbreak\"}"), Contains("not valid JSON"));
  CHECK_THAT(json_parse_error(R"({"a": 1e400})"), Contains("not valid JSON"));
  // Beyond 64 bits: nlohmann would read a double; refusing keeps every integer exact.
  CHECK_THAT(json_parse_error(R"({"a": 123456789012345678901234567890})"),
             Contains("not valid JSON"));
}

TEST_CASE("parse_json reads bodies above the reused parser's size the same way", "[json_text]") {
  json big = json::object();
  for (int i = 0; i < 5000; ++i) big["key-" + std::to_string(i)] = std::string(40, 'v');
  const auto text = big.dump();
  REQUIRE(text.size() > 128 * 1024);
  for (int round = 0; round < 2; ++round) {
    const auto r = parse_json(text);
    REQUIRE(r.ok());
    CHECK(*r == big);
  }
  const auto small = parse_json(R"({"after": "big"})");
  REQUIRE(small.ok());
  CHECK((*small)["after"] == "big");
}

TEST_CASE("parse_json with a keep list builds only the members asked for", "[json_text]") {
  static constexpr json_keep meta[] = {{"labels"}};
  static constexpr json_keep keep[] = {{"metadata", meta}, {"kind"}};
  const auto r = parse_json(
      R"({"kind": "Pod", "status": {"x": 1}, "metadata": {"labels": {"a": "b"},
          "managedFields": [{"big": true}]}})",
      keep);
  REQUIRE(r.ok());
  CHECK(*r == json{{"kind", "Pod"}, {"metadata", {{"labels", {{"a", "b"}}}}}});
}

TEST_CASE("parse_json with a keep list keeps a value that is not an object whole", "[json_text]") {
  static constexpr json_keep meta[] = {{"labels"}};
  static constexpr json_keep keep[] = {{"metadata", meta}};
  // The reader must see the wrong shape to refuse it, so it is not dropped or reshaped.
  for (const char* shape : {R"("text")", "[1, 2]", "null", "7"}) {
    const auto r = parse_json(std::string(R"({"metadata": )") + shape + "}", keep);
    REQUIRE(r.ok());
    CHECK((*r)["metadata"] == json::parse(shape));
  }
  const auto root = parse_json("[1]", keep);
  REQUIRE(root.ok());
  CHECK(*root == json::array({1}));
}

TEST_CASE("parse_json with a keep list keeps those members of each object in an array",
          "[json_text]") {
  static constexpr json_keep item[] = {{"name"}, {"env"}};
  static constexpr json_keep keep[] = {{"containers", item, -1, true}};
  const auto r = parse_json(
      R"({"containers": [{"name": "a", "image": "x", "env": [{"name": "E", "image": 1}]},
                         "text", [{"image": "y"}], null, {"probe": {"x": 1}}]})",
      keep);
  REQUIRE(r.ok());
  // Objects lose the members not listed (those inside a kept member stay); other items, nested
  // arrays included, are kept whole.
  CHECK(*r == json::parse(R"({"containers": [{"name": "a", "env": [{"name": "E", "image": 1}]},
                                             "text", [{"image": "y"}], null, {}]})"));
  // A duplicate among the listed members is still refused; among the others it is not looked at.
  CHECK_FALSE(parse_json(R"({"containers": [{"name": "a", "name": "b"}]})", keep).ok());
  CHECK(parse_json(R"({"containers": [{"image": "a", "image": "b"}]})", keep).ok());
}

TEST_CASE("parse_json keeps a list whole where the keep list expects an object", "[json_text]") {
  // Without `each`, a list is not looked into: its items' labels never reach a map slot.
  static constexpr json_keep meta[] = {{"name"}, {"labels", {}, 0}};
  static constexpr json_keep keep[] = {{"metadata", meta}};
  std::array<string_map, 1> maps;
  const auto text = R"({"metadata": [{"name": "a", "labels": {"k": "v"}, "other": 1}]})";
  const auto r = parse_json(text, keep, maps);
  REQUIRE(r.ok());
  CHECK((*r)["metadata"] == json::parse(text)["metadata"]);
  CHECK(maps[0].kind() == string_map::shape::absent);
}

TEST_CASE("parse_json with a keep list still validates what it does not build", "[json_text]") {
  static constexpr json_keep keep[] = {{"kind"}};
  CHECK_FALSE(parse_json(R"({"kind": "Pod", "status": {"x": 01}})", keep).ok());
  CHECK_FALSE(parse_json("{\"kind\": \"Pod\", \"status\": \"\xff\"}", keep).ok());
  CHECK_FALSE(parse_json(R"({"kind": "Pod", "kind": "Node"})", keep).ok());
}

namespace {

// append_json's text, which must be dump()'s byte for byte.
std::string appended(const json& value) {
  std::string out = "prefix:";
  append_json(out, value);
  REQUIRE(out.rfind("prefix:", 0) == 0);
  return out.substr(7);
}

}  // namespace

TEST_CASE("append_json writes what dump writes", "[json_text]") {
  const std::vector<json> values = {
      json::parse(R"({"b": [1, -2, 3.5, 1e300, true, false, null], "a": {"": "", "x": []}})"),
      json::array(),
      json::object(),
      json(std::numeric_limits<std::uint64_t>::max()),
      json(std::numeric_limits<std::int64_t>::min()),
      json(0.1),
      json("plain"),
      json(R"(quote " and backslash \ and slash /)"),
      json("tab\there, newline\n, bell\a, escape\x1b, delete\x7f"),
      json("unicode: caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x9a\x80"),
      json({{"key \"quoted\"", "value\\"}, {"ke\ny", {{"n\x01", 1}}}}),
      json::parse(
          R"([{"op":"add","path":"/spec/containers/0/env/-","value":{"name":"PET_NNODES","value":"3"}}])"),
  };
  for (const auto& value : values) {
    INFO(value.dump());
    CHECK(appended(value) == value.dump());
  }
}

TEST_CASE("append_json writes each fixture review as dump does", "[json_text]") {
  for (const auto* name : {"review-mpi-launcher.json", "review-torch-jobset-node3.json",
                           "review-volcano-worker1.json"}) {
    const auto review = trainenv::test::fixture(name);
    CHECK(appended(review) == review.dump());
  }
}

TEST_CASE("append_json refuses invalid UTF-8 as dump does", "[json_text]") {
  const json bad = {{"name", std::string("bad \xff byte")}};
  CHECK_THROWS_AS(bad.dump(), json::type_error);
  std::string out;
  CHECK_THROWS_AS(append_json(out, bad), json::type_error);
}

TEST_CASE("append_json_string writes what dump writes, replacing invalid UTF-8", "[json_text]") {
  for (const std::string text :
       {"", "plain",
        R"(quote " first, then \ and a non-ASCII byte: caf)"
        "\xc3\xa9",
        "cut mid-character \xe2\x9c", "tab\tand \"quote\"", "bad \xff byte after \\"}) {
    INFO(text);
    std::string out = "prefix:";
    append_json_string(out, text);
    CHECK(out == "prefix:" + json(text).dump(-1, ' ', false, json::error_handler_t::replace));
  }
}

TEST_CASE("append_json_string writes what dump writes for generated strings", "[json_text]") {
  // Mostly plain text, as Kubernetes strings are, with a byte of each other kind placed at every
  // offset of the eight-byte words the writer skips whole: controls, '"', '\\', DEL, valid and
  // broken UTF-8.
  const std::vector<std::string> specials = {
      std::string(1, '\0'), "\x01",         "\x1f", "\"",       "\\",  "\x7f", "\x20", "/",
      "\xc3\xa9",           "\xe2\x9c\x93", "\xff", "\xe2\x9c", "\x80"};
  std::mt19937 rng(20261125);
  std::uniform_int_distribution<int> letter('a', 'z');
  std::uniform_int_distribution<std::size_t> pick(0, specials.size() - 1);
  std::uniform_int_distribution<int> how_many(0, 3);
  for (int round = 0; round < 4000; ++round) {
    const std::size_t length = static_cast<std::size_t>(round) % 41;
    std::string text;
    for (std::size_t i = 0; i < length; ++i) text += static_cast<char>(letter(rng));
    for (int n = how_many(rng); n > 0 && !text.empty(); --n) {
      const auto at = std::uniform_int_distribution<std::size_t>(0, text.size())(rng);
      text.insert(at, specials[pick(rng)]);
    }
    INFO(json(text).dump(-1, ' ', true, json::error_handler_t::replace));
    std::string out = "prefix:";
    append_json_string(out, text);
    REQUIRE(out == "prefix:" + json(text).dump(-1, ' ', false, json::error_handler_t::replace));
  }
}

namespace {

// A generated metadata object's text: its labels (usually an object of strings) with repeated
// keys, escapes, values that are not strings (some holding repeated keys of their own), at times
// a second "labels" or another repeated member, or labels that are not an object.
std::string generated_metadata(std::mt19937& rng) {
  const std::vector<std::string> keys = {R"("a")",    R"("b")",      R"("app.kubernetes.io/name")",
                                         R"("q\"x")", R"("\u00e9")", R"("")",
                                         R"("z~/1")"};
  const std::vector<std::string> values = {
      R"("v")", R"("")",      R"("line\nbreak")", R"("\u00e9t\u00e9")", "7", "null", "true",
      "[1,2]",  R"({"k":1})", R"({"k":1,"k":2})", R"([{"d":1,"d":2}])"};
  const auto pick = [&](const std::vector<std::string>& from) {
    return from[std::uniform_int_distribution<std::size_t>(0, from.size() - 1)(rng)];
  };
  const auto chance = [&](int percent) {
    return std::uniform_int_distribution<int>(0, 99)(rng) < percent;
  };
  const auto labels = [&] {
    if (chance(8)) return pick({R"("text")", "[1]", "null", "3", R"([{"x":1,"x":2}])"});
    std::string out = "{";
    const int members = std::uniform_int_distribution<int>(0, 8)(rng);
    for (int i = 0; i < members; ++i) {
      if (i > 0) out += ',';
      out += pick(keys) + ":" + (chance(75) ? pick({R"("v")", R"("w")", R"("")"}) : pick(values));
    }
    return out + "}";
  };
  std::vector<std::string> members = {R"("name":"p")", R"("labels":)" + labels()};
  if (chance(60)) members.push_back(R"("annotations":)" + labels());
  if (chance(10)) members.push_back(R"("labels":)" + labels());
  if (chance(5)) members.push_back(R"("annotations":)" + labels());
  if (chance(10)) members.push_back(R"("name":"again")");
  if (chance(10)) members.push_back(R"("other":{"o":1,"o":2})");
  std::shuffle(members.begin(), members.end(), rng);
  std::string out = "{";
  for (std::size_t i = 0; i < members.size(); ++i) out += (i > 0 ? "," : "") + members[i];
  return out + "}";
}

}  // namespace

TEST_CASE("parse_json reads a map slot as the tree holds the value, with the same problems",
          "[json_text][string_map]") {
  // The same text read twice: labels into the tree, and into a string_map. Both must accept and
  // refuse the same texts with the same message (the first problem in the text's order), and the
  // map must hold what the tree holds.
  static constexpr json_keep meta_tree[] = {{"name"}, {"labels"}, {"annotations"}};
  static constexpr json_keep keep_tree[] = {{"metadata", meta_tree}};
  static constexpr json_keep meta_map[] = {{"name"}, {"labels", {}, 0}, {"annotations", {}, 1}};
  static constexpr json_keep keep_map[] = {{"metadata", meta_map}};
  std::mt19937 rng(4242);
  int refused = 0;
  for (int round = 0; round < 3000; ++round) {
    // Now and then a second metadata object: its maps are read too, and the repeat is refused.
    std::string text = R"({"metadata":)" + generated_metadata(rng);
    if (round % 40 == 0) text += R"(,"metadata":)" + generated_metadata(rng);
    text += "}";
    INFO(text);
    std::array<string_map, 2> maps;
    const auto tree = parse_json(text, keep_tree);
    const auto flat = parse_json(text, keep_map, maps);
    REQUIRE(tree.ok() == flat.ok());
    if (!tree.ok()) {
      ++refused;
      CHECK(flat.message() == tree.message());
      continue;
    }
    json expected = *tree;
    for (std::size_t slot = 0; slot < maps.size(); ++slot) {
      const char* key = slot == 0 ? "labels" : "annotations";
      INFO(key);
      const auto* values = member(expected["metadata"], key);
      const auto map = string_map::of(values);
      CHECK(maps[slot].kind() == map.kind());
      CHECK(trainenv::test::as_json(maps[slot]) == trainenv::test::as_json(map));
      if (values != nullptr && values->is_object()) {
        for (const auto& [name, value] : values->items()) {
          const auto* found = maps[slot].find(name);
          CHECK((found != nullptr) == value.is_string());
          if (found != nullptr) CHECK(*found == value.get_ref<const std::string&>());
        }
      }
      expected["metadata"].erase(key);
    }
    CHECK(*flat == expected);
  }
  // Both kinds of text came up often enough to mean something.
  CHECK(refused > 300);
  CHECK(refused < 2700);
}

TEST_CASE("a copied string_map holds its own bytes", "[string_map]") {
  const json labels = {{"app.kubernetes.io/name", "trainer-of-a-long-name"}, {"n", 3}, {"e", ""}};
  std::optional<string_map> original = string_map::of(&labels);
  const string_map copy = *original;
  string_map assigned;
  assigned = copy;
  original.reset();
  for (const string_map* map : std::array<const string_map*, 2>{&copy, &assigned}) {
    REQUIRE(map->find("app.kubernetes.io/name") != nullptr);
    CHECK(*map->find("app.kubernetes.io/name") == "trainer-of-a-long-name");
    CHECK(map->find("n") == nullptr);  // not a string
    REQUIRE(map->find("e") != nullptr);
    CHECK(map->find("e")->empty());
    CHECK(map->find("absent") == nullptr);
    CHECK(map->entries().size() == 3);
  }
  // Moved from: empty and absent, and safe to copy.
  string_map moved = copy;
  const string_map taken = std::move(moved);
  CHECK(taken.entries().size() == 3);
  const string_map after = moved;  // NOLINT(bugprone-use-after-move): what this checks
  CHECK(after.entries().empty());
  CHECK(after.kind() == string_map::shape::absent);
  const json text = "labels";
  CHECK(string_map::of(&text).kind() == string_map::shape::not_object);
  const json null;
  CHECK(string_map::of(&null).kind() == string_map::shape::absent);
  CHECK(string_map::of(nullptr).kind() == string_map::shape::absent);
}
