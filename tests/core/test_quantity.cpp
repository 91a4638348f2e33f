// core/quantity.hpp: exact Kubernetes quantity parsing (docs/contract.md §2, processes per node
// from CPU).
#include <catch2/catch.hpp>

#include <string>

#include "trainenv/core/text/quantity.hpp"

using trainenv::core::parse_quantity;
using trainenv::core::quantity;
using trainenv::core::uint128;

namespace {

quantity parse_ok(const std::string& text) {
  INFO("quantity text: \"" << text << "\"");
  auto q = parse_quantity(text);
  REQUIRE(q.has_value());
  return *q;
}

std::int64_t ceil_of(const std::string& text) {
  INFO("quantity text: \"" << text << "\"");
  auto c = parse_ok(text).ceil();
  REQUIRE(c.has_value());
  return *c;
}

uint128 pow2(unsigned n) {
  return static_cast<uint128>(1) << n;
}

uint128 pow10(unsigned n) {
  uint128 r = 1;
  for (unsigned i = 0; i < n; ++i) r *= 10;
  return r;
}

// unscaled / 10^scale == expected_unscaled / 10^expected_scale, compared exactly.
bool same_value(const quantity& q, uint128 expected_unscaled, std::uint32_t expected_scale) {
  const std::uint32_t common = q.scale > expected_scale ? q.scale : expected_scale;
  return q.unscaled * pow10(common - q.scale) == expected_unscaled * pow10(common - expected_scale);
}

}  // namespace

TEST_CASE("cpu quantities from the spec round up to whole cpus", "[quantity]") {
  struct row {
    const char* text;
    std::int64_t ceil;
  };
  const row table[] = {
      {"4", 4}, {"2", 2}, {"3", 3}, {"2.5", 3}, {"0.7", 1}, {"2500m", 3}, {"3.7", 4},
  };
  for (const auto& r : table) {
    INFO("cpu " << r.text);
    CHECK(ceil_of(r.text) == r.ceil);
  }
}

TEST_CASE("a fraction far below the 64-bit double precision still rounds up", "[quantity]") {
  // As a double this would be exactly 1.0, and ceil would wrongly give 1.
  CHECK(ceil_of("1.0000000000000000001") == 2);
}

TEST_CASE("binary suffix Ki is 1024", "[quantity]") {
  const auto q = parse_ok("1Ki");
  CHECK(same_value(q, 1024, 0));
  CHECK(ceil_of("1Ki") == 1024);
}

TEST_CASE("binary suffixes Mi through Ei are powers of two", "[quantity]") {
  CHECK(same_value(parse_ok("1Mi"), pow2(20), 0));
  CHECK(same_value(parse_ok("1Gi"), pow2(30), 0));
  CHECK(same_value(parse_ok("1Ti"), pow2(40), 0));
  CHECK(same_value(parse_ok("1Pi"), pow2(50), 0));
  CHECK(same_value(parse_ok("1Ei"), pow2(60), 0));
  CHECK(ceil_of("1Ei") == (std::int64_t{1} << 60));
}

TEST_CASE("a fractional value with a binary suffix stays exact", "[quantity]") {
  CHECK(ceil_of("1.5Ki") == 1536);
  CHECK(ceil_of("0.5Ki") == 512);
}

TEST_CASE("decimal exponent e3 means times one thousand", "[quantity]") {
  CHECK(same_value(parse_ok("1e3"), 1000, 0));
  CHECK(ceil_of("1e3") == 1000);
  CHECK(ceil_of("1E3") == 1000);
  CHECK(ceil_of("1e+3") == 1000);
}

TEST_CASE("negative decimal exponent divides", "[quantity]") {
  CHECK(same_value(parse_ok("25e-1"), 25, 1));
  CHECK(ceil_of("25e-1") == 3);
  CHECK(ceil_of("1E-2") == 1);
}

TEST_CASE("suffix E alone is exa, ten to the eighteenth", "[quantity]") {
  CHECK(same_value(parse_ok("1E"), pow10(18), 0));
  CHECK(ceil_of("1E") == 1'000'000'000'000'000'000);
}

TEST_CASE("suffix Ei is binary exa, two to the sixtieth, not ten to the eighteenth", "[quantity]") {
  const auto q = parse_ok("1Ei");
  CHECK(same_value(q, pow2(60), 0));
  CHECK_FALSE(same_value(q, pow10(18), 0));
}

TEST_CASE("decimal SI suffixes scale by powers of ten", "[quantity]") {
  CHECK(same_value(parse_ok("1k"), 1000, 0));
  CHECK(same_value(parse_ok("1M"), pow10(6), 0));
  CHECK(same_value(parse_ok("1G"), pow10(9), 0));
  CHECK(same_value(parse_ok("1T"), pow10(12), 0));
  CHECK(same_value(parse_ok("1P"), pow10(15), 0));
  CHECK(same_value(parse_ok("1u"), 1, 6));
  CHECK(same_value(parse_ok("1m"), 1, 3));
}

TEST_CASE("nano suffix keeps the tiny value exact and rounds up to one", "[quantity]") {
  const auto q = parse_ok("100n");
  CHECK(same_value(q, 100, 9));
  CHECK_FALSE(q.negative);
  CHECK_FALSE(q.is_zero());
  CHECK(q.ceil() == 1);
}

TEST_CASE("a negative whole quantity has its own value as ceiling", "[quantity]") {
  const auto q = parse_ok("-1");
  CHECK(q.negative);
  CHECK(q.ceil() == -1);
}

TEST_CASE("ceiling of a negative fraction moves toward zero", "[quantity]") {
  CHECK(ceil_of("-1.5") == -1);
  CHECK(ceil_of("-0.5") == 0);
}

TEST_CASE("zero parses as zero with ceiling zero", "[quantity]") {
  const auto q = parse_ok("0");
  CHECK(q.is_zero());
  CHECK_FALSE(q.negative);
  CHECK(q.ceil() == 0);
}

TEST_CASE("negative zero is not negative", "[quantity]") {
  const auto q = parse_ok("-0");
  CHECK(q.is_zero());
  CHECK_FALSE(q.negative);
  CHECK(q.ceil() == 0);
}

TEST_CASE("an explicit plus sign is accepted", "[quantity]") {
  CHECK(ceil_of("+2.5") == 3);
}

TEST_CASE("a leading or trailing decimal point is accepted", "[quantity]") {
  CHECK(ceil_of(".5") == 1);
  CHECK(ceil_of("5.") == 5);
}

TEST_CASE("38 significant digits are held exactly", "[quantity]") {
  const std::string digits38(38, '9');
  const auto q = parse_ok(digits38);
  CHECK(q.unscaled == pow10(38) - 1);
  CHECK(q.scale == 0);
}

TEST_CASE("a value beyond int64 parses but has no ceiling", "[quantity]") {
  const auto q = parse_ok("9223372036854775808");  // INT64_MAX + 1
  CHECK_FALSE(q.ceil().has_value());
  CHECK(ceil_of("9223372036854775807") == INT64_MAX);
}

// Regression (fixed): ceil() checks the magnitude against INT64_MAX for negative values too, so the
// smallest int64 has no ceiling although it fits: "-9223372036854775808" (also "-8Ei") gives
// nullopt.
TEST_CASE("the most negative int64 has itself as ceiling", "[quantity]") {
  const auto q = parse_ok("-9223372036854775808");
  CHECK(q.ceil() == std::optional<std::int64_t>(INT64_MIN));
}

TEST_CASE("a negative value beyond int64 has no ceiling", "[quantity]") {
  CHECK_FALSE(parse_ok("-9223372036854775809").ceil().has_value());
}

TEST_CASE("text that is not a quantity is rejected", "[quantity]") {
  const char* rejects[] = {
      "",    "abc", "1.2.3", "1KiB",  "m",   "1e",     "1e1234", ".",   "+",  "-",  "1 ",  " 1",
      "1Kb", "1i",  "0x10",  "1e3.5", "1e-", "1.5.e3", "1,5",    "--1", "e3", "1K", "1ki",
  };
  for (const char* text : rejects) {
    INFO("text: \"" << text << "\"");
    CHECK_FALSE(parse_quantity(text).has_value());
  }
}

TEST_CASE("a 40-digit number is rejected as too large to hold exactly", "[quantity]") {
  const std::string forty_digits = "1" + std::string(39, '0');
  CHECK_FALSE(parse_quantity(forty_digits).has_value());
  CHECK_FALSE(parse_quantity(std::string(40, '9')).has_value());
  CHECK_FALSE(parse_quantity("0." + std::string(40, '9')).has_value());
}

TEST_CASE("an exponent beyond what can be held exactly is rejected", "[quantity]") {
  CHECK_FALSE(parse_quantity("1e999").has_value());
  CHECK_FALSE(parse_quantity("1e-999").has_value());
}

TEST_CASE("a binary suffix that overflows 128 bits is rejected", "[quantity]") {
  CHECK_FALSE(parse_quantity(std::string(30, '9') + "Ei").has_value());
}
