// Exact Kubernetes quantity parsing; see k8s.io/apimachinery/pkg/api/resource for the grammar.
#include "trainenv/core/text/quantity.hpp"

#include <limits>

namespace trainenv::core {
namespace {

using u128 = uint128;

// 10^38 < 2^128; one more digit could overflow.
constexpr int max_significant_digits = 38;
constexpr std::uint32_t max_scale = 38;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool mul_checked(u128& value, u128 factor) {
  if (value != 0 && factor > std::numeric_limits<u128>::max() / value) return false;
  value *= factor;
  return true;
}

u128 pow10(std::uint32_t n) {
  u128 r = 1;
  for (std::uint32_t i = 0; i < n; ++i) r *= 10;
  return r;
}

// Applies value *= 10^exp10 by moving the decimal point, keeping the result exact.
bool apply_exp10(quantity& q, int exp10) {
  if (exp10 >= 0) {
    auto shift = static_cast<std::uint32_t>(exp10);
    std::uint32_t from_scale = shift < q.scale ? shift : q.scale;
    q.scale -= from_scale;
    shift -= from_scale;
    if (shift > max_scale) return q.unscaled == 0;
    return mul_checked(q.unscaled, pow10(shift));
  }
  auto add = static_cast<std::uint32_t>(-static_cast<long long>(exp10));
  if (q.scale + add > max_scale) return q.unscaled == 0 ? (q.scale = 0, true) : false;
  q.scale += add;
  return true;
}

struct suffix_factor {
  std::string_view suffix;
  int exp10;
  unsigned exp2;
};

constexpr suffix_factor suffixes[] = {
    {"Ki", 0, 10}, {"Mi", 0, 20}, {"Gi", 0, 30}, {"Ti", 0, 40}, {"Pi", 0, 50}, {"Ei", 0, 60},
    {"n", -9, 0},  {"u", -6, 0},  {"m", -3, 0},  {"", 0, 0},    {"k", 3, 0},   {"M", 6, 0},
    {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0},
};

}  // namespace

std::optional<std::int64_t> quantity::ceil() const {
  const u128 divisor = pow10(scale);
  u128 whole = unscaled / divisor;
  const bool has_fraction = unscaled % divisor != 0;
  constexpr auto int64_max = static_cast<u128>(std::numeric_limits<std::int64_t>::max());
  if (negative) {
    // ceil(-x) = -floor(x); -2^63 fits although 2^63 does not.
    if (whole > int64_max + 1) return std::nullopt;
    if (whole == int64_max + 1) return std::numeric_limits<std::int64_t>::min();
    return -static_cast<std::int64_t>(whole);
  }
  if (has_fraction) ++whole;
  if (whole > int64_max) return std::nullopt;
  return static_cast<std::int64_t>(whole);
}

namespace {

// Scales `q` by what follows its digits: a suffix ("m", "Ki", "G", ...) or a decimal exponent
// ("e3", "E-2": a signed integer of at most three digits). False when it is neither, or overflows.
bool apply_suffix(quantity& q, std::string_view rest) {
  for (const auto& s : suffixes) {
    if (s.suffix != rest) continue;
    if (!apply_exp10(q, s.exp10)) return false;
    return s.exp2 == 0 || mul_checked(q.unscaled, static_cast<u128>(1) << s.exp2);
  }
  if (rest.size() < 2 || (rest[0] != 'e' && rest[0] != 'E')) return false;
  std::size_t j = 1;
  bool exp_negative = false;
  if (rest[j] == '+' || rest[j] == '-') exp_negative = rest[j++] == '-';
  if (j >= rest.size() || rest.size() - j > 3) return false;
  int exp = 0;
  for (; j < rest.size(); ++j) {
    if (!is_digit(rest[j])) return false;
    exp = exp * 10 + (rest[j] - '0');
  }
  return apply_exp10(q, exp_negative ? -exp : exp);
}

}  // namespace

std::optional<quantity> parse_quantity(std::string_view text) {
  quantity q;
  std::size_t i = 0;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
    q.negative = text[i] == '-';
    ++i;
  }
  int significant = 0;
  bool any_digit = false;
  bool seen_point = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.') {
      if (seen_point) return std::nullopt;
      seen_point = true;
      continue;
    }
    if (!is_digit(c)) break;
    any_digit = true;
    if (q.unscaled != 0 || c != '0') ++significant;
    if (significant > max_significant_digits) return std::nullopt;
    q.unscaled = q.unscaled * 10 + static_cast<u128>(c - '0');
    if (seen_point) {
      if (++q.scale > max_scale) return std::nullopt;
    }
  }
  if (!any_digit) return std::nullopt;

  if (!apply_suffix(q, text.substr(i))) return std::nullopt;
  if (q.unscaled == 0) q.negative = false;
  return q;
}

}  // namespace trainenv::core
