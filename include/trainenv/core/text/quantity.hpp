// Kubernetes resource quantities ("2500m", "0.7", "1Gi", "1e3") parsed into exact numbers.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace trainenv::core {

// GCC's 128-bit integer; __extension__ keeps -Wpedantic quiet about it.
__extension__ using uint128 = unsigned __int128;

// An exact quantity: value = unscaled / 10^scale. Binary suffixes (Ki..Ei) are folded into
// `unscaled`, so every quantity Kubernetes accepts within 38 significant digits is exact.
struct quantity {
  bool negative = false;
  uint128 unscaled = 0;
  std::uint32_t scale = 0;

  // Smallest integer >= the value; nullopt when it does not fit in int64.
  [[nodiscard]] std::optional<std::int64_t> ceil() const;
  [[nodiscard]] bool is_zero() const { return unscaled == 0; }
};

// Parses Kubernetes quantity syntax: [+-]digits[.digits] followed by a binary SI suffix
// (Ki Mi Gi Ti Pi Ei), a decimal SI suffix (n u m "" k M G T P E) or a decimal exponent
// (e3, E-2). Returns nullopt for anything else, or for a value too large to hold exactly.
[[nodiscard]] std::optional<quantity> parse_quantity(std::string_view text);

}  // namespace trainenv::core
