// The quantity parser on arbitrary text. Checks, beyond the sanitizers: an accepted quantity's
// ceiling is at least its value rounded toward zero, and a plain integer reads as itself.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "trainenv/core/text/quantity.hpp"

using namespace trainenv;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto q = core::parse_quantity(text);
  if (!q) return 0;
  const auto ceiling = q->ceil();
  fuzz::require(!q->is_zero() || (ceiling && *ceiling == 0), "zero has ceiling 0",
                std::string(text));
  // Digits only, short enough for int64: the ceiling is the number itself.
  if (!text.empty() && text.size() < 18 &&
      text.find_first_not_of("0123456789") == std::string_view::npos) {
    fuzz::require(ceiling && *ceiling == std::stoll(std::string(text)),
                  "an integer's ceiling is itself", std::string(text));
  }
  if (ceiling && q->negative)
    fuzz::require(*ceiling <= 0, "a negative ceiling is not positive", std::string(text));
  if (ceiling && !q->negative && !q->is_zero())
    fuzz::require(*ceiling >= 1, "a positive quantity has a ceiling of at least 1",
                  std::string(text));
  return 0;
}
