// Reading a command line kept as a JSON array of strings: a Volcano job plugin's arguments, which
// the plugin parses with Go's flag package. A bottom header: includes nothing of the core.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace trainenv::core {

// The value `args` gives `flag`: "--port=2222", or "--port" then "2222"; the last one given wins,
// as Go's flag package has it. None when absent, empty, or `args` is not an array.
[[nodiscard]] std::optional<std::string> flag_value(const nlohmann::json& args,
                                                    std::string_view flag);

// A boolean flag as Go's flag package reads one: "--flag" alone is true, "--flag=false" (or 0, f,
// F, FALSE, False) false, "--flag=true" (1, t, T, TRUE, True) true; the last one given wins. None
// when absent or when its value is none of these.
[[nodiscard]] std::optional<bool> bool_flag_value(const nlohmann::json& args,
                                                  std::string_view flag);

}  // namespace trainenv::core
