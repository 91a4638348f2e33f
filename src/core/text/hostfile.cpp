#include "trainenv/core/text/hostfile.hpp"

#include <algorithm>
#include <unordered_set>

#include "trainenv/core/text/names.hpp"

namespace trainenv::core {

std::vector<std::string> hostfile_hosts(std::string_view text) {
  std::vector<std::string> hosts;
  std::unordered_set<std::string_view> seen;
  while (!text.empty()) {
    const auto end = std::min(text.find('\n'), text.size());
    auto line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    auto host = line.substr(0, line.find_first_of(" \t"));
    // Hydra's "host:slots"; a name has no ':' (an IPv6 address would, and has no slot count
    // after its last one unless given, which Hydra reads the same way).
    if (const auto colon = host.rfind(':'); colon != std::string_view::npos &&
                                            colon + 1 < host.size() &&
                                            parse_decimal(host.substr(colon + 1), max_count))
      host = host.substr(0, colon);
    if (seen.insert(host).second) hosts.emplace_back(host);
  }
  return hosts;
}

}  // namespace trainenv::core
