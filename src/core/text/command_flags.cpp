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

std::optional<bool> bool_flag_value(const nlohmann::json& args, std::string_view flag) {
  if (!args.is_array() || flag.empty()) return std::nullopt;
  std::optional<bool> found;
  for (const auto& item : args) {
    if (!item.is_string()) continue;
    const std::string_view arg = item.get_ref<const std::string&>();
    if (arg == flag) {
      found = true;
    } else if (arg.size() > flag.size() && arg.substr(0, flag.size()) == flag &&
               arg[flag.size()] == '=') {
      // strconv.ParseBool's spellings.
      const auto value = arg.substr(flag.size() + 1);
      if (value == "1" || value == "t" || value == "T" || value == "true" || value == "TRUE" ||
          value == "True") {
        found = true;
      } else if (value == "0" || value == "f" || value == "F" || value == "false" ||
                 value == "FALSE" || value == "False") {
        found = false;
      } else {
        found = std::nullopt;
      }
    }
  }
  return found;
}

}  // namespace trainenv::core
