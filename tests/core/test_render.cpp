// Where a policy's `args.after` flags go in a container's command line (core/render.hpp).
#include <catch2/catch.hpp>

#include "trainenv/core/decide/render.hpp"

using nlohmann::json;
using trainenv::core::args_site;
using trainenv::core::args_site_after;
using trainenv::core::parse_read_only;

namespace {

const std::vector<std::string> tune_run = {"tune", "run"};

json container(json command, json args = nullptr) {
  json c = {{"name", "node"}, {"command", std::move(command)}};
  if (!args.is_null()) c["args"] = std::move(args);
  return c;
}

// The site after tune_run in `c`, read as a pod's container is: in place, from its text.
std::optional<args_site> site_after(const json& c) {
  const auto doc = parse_read_only(c.dump());
  REQUIRE(doc.ok());
  return args_site_after(doc->root(), tune_run);
}

}  // namespace

TEST_CASE("the site follows the prefix into command or args", "[render][args]") {
  struct row {
    const char* shape;
    json container;
    std::string list;
    std::size_t at;
    std::size_t flags_end;  // in command + args
  };
  const std::vector<row> rows = {
      // Kubeflow Trainer's torchtune runtimes: the whole line in command.
      {"all in command",
       container({"tune", "run", "--rdzv_endpoint=localhost:29500", "full_finetune_distributed",
                  "--config", "llama3_2/1B_full"}),
       "command", 2, 3},
      {"prefix in command, recipe in args",
       container({"tune", "run"}, {"full_finetune_distributed", "--config", "x"}), "args", 0, 2},
      {"prefix split across both",
       container({"tune"}, {"run", "--nproc-per-node", "4", "lora_finetune_distributed"}), "args",
       1, 4},
      {"prefix only", container({"tune", "run"}), "args", 0, 2},
      {"a switch takes no value",
       container({"tune", "run", "--standalone", "recipe", "--nnodes=9"}), "command", 2, 3},
      {"a flag followed by a flag takes no value",
       container({"tune", "run", "--max-restarts", "--nnodes=2", "recipe"}), "command", 2, 4},
  };
  for (const auto& r : rows) {
    INFO(r.shape);
    const auto site = site_after(r.container);
    REQUIRE(site);
    CHECK(site->list == r.list);
    CHECK(site->at == r.at);
    CHECK(site->flags_begin == 2);
    CHECK(site->flags_end == r.flags_end);
  }
}

TEST_CASE("no site when the line does not start with the prefix", "[render][args]") {
  CHECK_FALSE(site_after(container({"torchrun", "train.py"})));
  CHECK_FALSE(site_after(container({"tune"})));
  CHECK_FALSE(site_after(container({"run", "tune"})));
  CHECK_FALSE(site_after(container(json::array(), {"tune", 1})));
  CHECK_FALSE(site_after(json{{"name", "node"}}));
}

TEST_CASE("an env entry is written as its json object would be dumped", "[render]") {
  // The patch writes env entries straight from env_want; a reader compares them as json.
  using trainenv::core::env_want;
  const std::vector<std::string> texts = {"",
                                          "4",
                                          "a\"b\\c",
                                          "tab\there",
                                          "\xc3\xa9t\xc3\xa9",
                                          "llama-ft-node-0-0.llama-ft",
                                          std::string(40, 'x')};
  for (const auto& name : {std::string("RANK"), std::string("PET_NPROC_PER_NODE")}) {
    for (const auto& text : texts) {
      env_want literal{name, text, std::nullopt};
      env_want from{name, "", json{{"fieldRef", {{"fieldPath", text}}}}};
      for (const auto* e : {&literal, &from}) {
        std::string out = "[";
        e->append_json(out);
        json expected = {{"name", e->name}};
        if (e->value_from) {
          expected["valueFrom"] = *e->value_from;
        } else {
          expected["value"] = e->value;
        }
        CHECK(out == "[" + expected.dump());
      }
    }
  }
  env_want broken{"A", "\xff", std::nullopt};
  std::string out;
  CHECK_THROWS_AS(broken.append_json(out), json::type_error);  // as dump() throws
}
