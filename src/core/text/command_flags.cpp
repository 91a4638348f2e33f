#include "trainenv/core/text/command_flags.hpp"

namespace trainenv::core {

std::optional<std::string> flag_value(const nlohmann::json& args, std::string_view flag) {
  if (!args.is_array() || flag.empty()) return std::nullopt;
  std::optional<std::string> found;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (!args[i].is_string()) continue;
    const auto& arg = args[i].get_ref<const std::string&>();
    const auto eq = arg.find('=');
    if (std::string_view(arg).substr(0, eq) != flag) continue;
    if (eq != std::string::npos) {
      found = arg.substr(eq + 1);
    } else if (i + 1 < args.size() && args[i + 1].is_string()) {
      found = args[i + 1].get<std::string>();
    }
  }
  if (found && found->empty()) return std::nullopt;
  return found;
}

}  // namespace trainenv::core
