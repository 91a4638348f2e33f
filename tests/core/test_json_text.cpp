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
#include "trainenv/core/text/command_flags.hpp"
#include "trainenv/core/text/json_access.hpp"
#include "trainenv/core/text/json_ref.hpp"
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

TEST_CASE("parse_read_only reads in place what parse_json builds", "[json_text][json_ref]") {
  const auto text = R"({"kind": "Pod", "n": -3, "u": 18446744073709551615, "d": 2.5,
      "b": [true, false, null], "o": {"z": {}, "a": []}, "s": "\u00e9\n"})";
  const auto tree = parse_json(text);
  const auto doc = parse_read_only(text);
  REQUIRE(tree.ok());
  REQUIRE(doc.ok());
  const auto root = doc->root();
  CHECK(to_json(root) == *tree);
  CHECK(same_value(root, *tree));
  CHECK_FALSE(same_value(member(root, "o"), (*tree)["b"]));
  // As nlohmann compares numbers: by value across their types.
  CHECK(same_value(member(root, "n"), json(-3.0)));
  CHECK(same_value(member(root, "d"), json(2.5)));
  CHECK_FALSE(same_value(member(root, "d"), json(2)));
  // Absent and null members read as none; find sees a null that is there.
  CHECK(member(root, "absent") == nullptr);
  CHECK(root.find("b")[2].is_null());
  CHECK(root.find("b")[3] == nullptr);
  CHECK(string_member(root, "kind") == "Pod");
  CHECK_FALSE(string_member(root, "n"));
  CHECK(string_or_empty(root, "n").empty());
  CHECK(root.find("o").size() == 2);
  CHECK(root.find("kind").size() == 0);
  std::string written;
  append_json(written, root);
  CHECK(written == tree->dump());
}

TEST_CASE("parse_read_only refuses what parse_json refuses, with its message", "[json_text]") {
  for (const std::string text :
       {R"({"kind": "Pod", "status": {"x": 01}})", "{\"kind\": \"Pod\", \"status\": \"\xff\"}",
        R"({"kind": "Pod", "kind": "Node"})", R"({"a": {"b": 1, "b": 2}, "a": 3})",
        R"([{"x": 1}, {"y": [{"z": 1, "z": 1}]}])", "", "[1,]"}) {
    INFO(text);
    const auto tree = parse_json(text);
    const auto doc = parse_read_only(text);
    REQUIRE_FALSE(tree.ok());
    REQUIRE_FALSE(doc.ok());
    CHECK(doc.message() == tree.message());
  }
  // An object too large to search pairwise: the first problem in the text's order still wins.
  std::string big = "{";
  for (int i = 0; i < 200; ++i) big += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ",";
  big += R"("inner": {"q": 1, "q": 2}, "k7": 0})";
  const auto tree = parse_json(big);
  const auto doc = parse_read_only(big);
  REQUIRE_FALSE(doc.ok());
  CHECK(doc.message() == tree.message());
  CHECK_THAT(doc.message(), Contains("\"q\""));
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

TEST_CASE(
    "parse_read_only refuses what parse_json refuses, and a map read from it holds what "
    "the tree holds",
    "[json_text][string_map]") {
  // Generated metadata, now and then with a key twice: both parsers must accept and refuse the
  // same texts with the same message (the first problem in the text's order), and the labels
  // and annotations read flat must hold the tree's strings.
  std::mt19937 rng(4242);
  int refused = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string text = R"({"metadata":)" + generated_metadata(rng);
    if (round % 40 == 0) text += R"(,"metadata":)" + generated_metadata(rng);
    text += "}";
    INFO(text);
    const auto tree = parse_json(text);
    const auto doc = parse_read_only(text);
    REQUIRE(tree.ok() == doc.ok());
    if (!tree.ok()) {
      ++refused;
      CHECK(doc.message() == tree.message());
      continue;
    }
    CHECK(to_json(doc->root()) == *tree);
    for (const char* key : {"labels", "annotations"}) {
      INFO(key);
      const auto map = read_string_map(member(member(doc->root(), "metadata"), key));
      const auto* values = member((*tree)["metadata"], key);
      if (values == nullptr) {
        CHECK(map.kind() == string_map::shape::absent);
        continue;
      }
      if (!values->is_object()) {
        CHECK(map.kind() == string_map::shape::not_object);
        continue;
      }
      CHECK(map.kind() == string_map::shape::object);
      CHECK(map.entries().size() == values->size());
      for (const auto& [name, value] : values->items()) {
        const auto* found = map.find(name);
        CHECK((found != nullptr) == value.is_string());
        if (found != nullptr) CHECK(*found == value.get_ref<const std::string&>());
      }
    }
  }
  // Both kinds of text came up often enough to mean something.
  CHECK(refused > 300);
  CHECK(refused < 2700);
}

TEST_CASE("a copied string_map holds its own bytes", "[string_map]") {
  const auto labels =
      parse_read_only(R"({"app.kubernetes.io/name": "trainer-of-a-long-name", "n": 3, "e": ""})");
  REQUIRE(labels.ok());
  std::optional<string_map> original = read_string_map(labels->root());
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
  const auto other = parse_read_only(R"(["labels", null])");
  REQUIRE(other.ok());
  CHECK(read_string_map(other->root()[0]).kind() == string_map::shape::not_object);
  CHECK(read_string_map(other->root()[1]).kind() == string_map::shape::absent);
  CHECK(read_string_map(json_ref()).kind() == string_map::shape::absent);
}

TEST_CASE("flag_value reads a flag as Go's flag package does: joined or next, the last wins",
          "[json_text]") {
  using trainenv::core::flag_value;
  const auto args = json::parse(
      R"(["--master=launcher", "--port", "2222", "--worker=a", 7, "--worker=b", "--empty="])");
  CHECK(flag_value(args, "--master") == std::optional<std::string>("launcher"));
  CHECK(flag_value(args, "--port") == std::optional<std::string>("2222"));
  CHECK(flag_value(args, "--worker") == std::optional<std::string>("b"));
  CHECK_FALSE(flag_value(args, "--empty").has_value());
  CHECK_FALSE(flag_value(args, "--missing").has_value());
  CHECK_FALSE(flag_value(args, "--mast").has_value());  // a prefix is not the flag
  CHECK_FALSE(flag_value(json::parse(R"(["--port"])"), "--port").has_value());
  CHECK_FALSE(flag_value(json::parse(R"({"--port": "1"})"), "--port").has_value());
}
