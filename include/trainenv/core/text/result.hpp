// A value or an error message: GCC 12 has no std::expected, and the core never throws on
// the request path.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace trainenv::core {

struct error {
  std::string message;
  // The status code of a denial made of it (docs/contract.md §6): 400 the pod breaks the
  // contract; an owner that could not be read says whose fault it is (404, 500, 503).
  int code = 400;
};

// `s` in double quotes for a message, cut at `max` characters.
inline std::string quote(std::string_view s, std::size_t max = 64) {
  std::string out = "\"";
  // Control characters written as escapes: a value quoted in a message or a log line cannot
  // start a line of its own.
  for (const char c : s.substr(0, max)) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (u < 0x20 || u == 0x7f) {
      constexpr std::string_view hex = "0123456789abcdef";
      out += "\\x";
      out += hex[u >> 4U];
      out += hex[u & 0xfU];
    } else {
      out += c;
    }
  }
  if (s.size() > max) out += "...";
  return out + "\"";
}

template <class T>
class [[nodiscard]] result {
 public:
  result(T value) : v_(std::move(value)) {}          // NOLINT: implicit by design
  result(error failure) : v_(std::move(failure)) {}  // NOLINT: implicit by design

  [[nodiscard]] bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  [[nodiscard]] const std::string& message() const { return std::get<1>(v_).message; }
  [[nodiscard]] int code() const { return std::get<1>(v_).code; }
  [[nodiscard]] error take_error() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, error> v_;
};

}  // namespace trainenv::core
