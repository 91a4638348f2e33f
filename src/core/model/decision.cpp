#include "trainenv/core/model/decision.hpp"

namespace trainenv::core {

std::string_view outcome_name(outcome o) {
  switch (o) {
    case outcome::allowed:
      return "allowed";
    case outcome::patched:
      return "patched";
    case outcome::denied:
      break;
  }
  return "denied";
}

std::string_view no_wait_name(no_wait reason) {
  switch (reason) {
    case no_wait::none:
      return "none";
    case no_wait::no_policy_wait:
      return "no-policy-wait";
    case no_wait::switched_off:
      return "switched-off";
    case no_wait::nothing_to_dial:
      return "nothing-to-dial";
    case no_wait::waits_already:
      return "waits-already";
  }
  return "none";
}

bool injection_summary::empty() const {
  return env.empty() && ports.empty() && mounts.empty() && args.empty() && volumes.empty() &&
         annotations.empty() && init_containers.empty() && dns_searches.empty() &&
         removed_env.empty() && dns_policy.empty();
}

std::string injection_summary::describe(std::size_t max_length) const {
  std::string out;
  const auto add = [&out](std::string_view prefix, std::string_view item) {
    if (!out.empty()) out += ',';
    out += prefix;
    out += item;
  };
  for (const auto& name : env) add("", name);
  for (const auto port : ports) add("port ", std::to_string(port));
  for (const auto& path : mounts) add("mount ", path);
  for (const auto& arg : args) add("arg ", arg);
  for (const auto& name : volumes) add("volume ", name);
  for (const auto& key : annotations) add("annotation ", key);
  for (const auto& name : init_containers) add("initContainer ", name);
  for (const auto& domain : dns_searches) add("dnsSearch ", domain);
  for (const auto& name : removed_env) add("removed ", name);
  if (!dns_policy.empty()) add("dnsPolicy ", dns_policy);
  if (out.size() > max_length) out = out.substr(0, max_length - 3) + "...";
  return out;
}

nlohmann::json decision::patch() const {
  return patch_text.empty() ? nlohmann::json::array() : nlohmann::json::parse(patch_text);
}

}  // namespace trainenv::core
