// Kubernetes' name and number rules (names.hpp), with nothing of the core above them.
#include "trainenv/core/text/names.hpp"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <utility>
#include <vector>

namespace trainenv::core {
namespace {

bool is_lower_or_digit(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool is_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

}  // namespace

bool is_dns_label(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  const auto ok = [](char c) { return is_lower_or_digit(c) || c == '-'; };
  return std::all_of(s.begin(), s.end(), ok) && s.front() != '-' && s.back() != '-';
}

bool is_dns_subdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  std::size_t start = 0;
  while (true) {
    const auto dot = s.find('.', start);
    if (!is_dns_label(s.substr(start, dot - start))) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

bool is_env_name(std::string_view s) {
  if (s.empty()) return false;
  const auto ok_first = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-' || c == '.';
  };
  if (!ok_first(s[0])) return false;
  return std::all_of(s.begin() + 1, s.end(),
                     [&](char c) { return ok_first(c) || (c >= '0' && c <= '9'); });
}

bool is_port_name(std::string_view s) {
  if (s.empty() || s.size() > 15 || s.front() == '-' || s.back() == '-') return false;
  if (s.find("--") != std::string_view::npos) return false;
  bool has_letter = false;
  for (char c : s) {
    const bool letter = c >= 'a' && c <= 'z';
    has_letter = has_letter || letter;
    if (!is_lower_or_digit(c) && c != '-') return false;
  }
  return has_letter;
}

bool is_port_protocol(std::string_view s) {
  return s == "TCP" || s == "UDP" || s == "SCTP";
}

bool is_annotation_key(std::string_view key) {
  const auto slash = key.find('/');
  const auto name = slash == std::string_view::npos ? key : key.substr(slash + 1);
  if (slash != std::string_view::npos) {
    auto prefix = key.substr(0, slash);
    if (prefix.empty() || prefix.size() > 253) return false;
    while (!prefix.empty()) {
      const auto dot = prefix.find('.');
      if (!is_dns_label(prefix.substr(0, dot))) return false;
      if (dot == std::string_view::npos) break;
      prefix.remove_prefix(dot + 1);
      if (prefix.empty()) return false;
    }
  }
  if (name.empty() || name.size() > 63 || !is_alnum(name.front()) || !is_alnum(name.back()))
    return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return is_alnum(c) || c == '-' || c == '_' || c == '.'; });
}

std::optional<std::int64_t> parse_decimal(std::string_view s, std::int64_t max) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  std::int64_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  if (n > max) return std::nullopt;
  return n;
}

std::optional<std::int64_t> parse_duration_seconds(std::string_view s, std::int64_t max) {
  if (auto plain = parse_decimal(s, max)) {
    if (*plain < 1) return std::nullopt;
    return plain;
  }
  // Go's units as time.ParseDuration writes them, each at most once and larger first.
  constexpr std::pair<char, std::int64_t> units[] = {{'h', 3600}, {'m', 60}, {'s', 1}};
  std::int64_t total = 0;
  std::size_t next_unit = 0;
  while (!s.empty()) {
    std::size_t digits = 0;
    while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
    if (digits == 0 || digits == s.size()) return std::nullopt;
    const auto n = parse_decimal(s.substr(0, digits), max);
    while (next_unit < std::size(units) && units[next_unit].first != s[digits]) ++next_unit;
    if (!n || next_unit == std::size(units)) return std::nullopt;
    total += *n * units[next_unit].second;
    if (total > max) return std::nullopt;
    ++next_unit;
    s.remove_prefix(digits + 1);
  }
  if (total < 1) return std::nullopt;
  return total;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) s.remove_suffix(1);
  return s;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace trainenv::core
