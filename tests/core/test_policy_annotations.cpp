// core/policy.hpp, annotations: a value, or lines over ${i}, with valid keys and variables.
#include <catch2/catch.hpp>

#include "test_policy_support.hpp"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using nlohmann::json;
using namespace trainenv::core;
using namespace policy_test;

// annotations

TEST_CASE("an annotation with a value renders the value", "[policy][annotations]") {
  const auto p = parse_ok(
      with_spec(R"({"annotations": [{"name": "trainenv.io/coordinator", "value": "${job}-0"}]})"));
  REQUIRE(p.annotations.size() == 1);
  CHECK(p.annotations[0].name == "trainenv.io/coordinator");
  REQUIRE(p.annotations[0].value.has_value());
  CHECK_FALSE(p.annotations[0].line.has_value());
  CHECK_FALSE(p.annotations[0].line_count.has_value());
  CHECK(render_ok(*p.annotations[0].value) == "j-0");
}

TEST_CASE("an annotation with lines keeps its count and per-line text", "[policy][annotations]") {
  const auto p = parse_ok(with_spec(R"({"annotations": [{"name": "trainenv.io/hostfile",
    "roles": ["launcher"],
    "lines": {"count": "${numNodes}", "text": "${job}-node-0-${i}.${job} slots=${slots}"}}]})"));
  REQUIRE(p.annotations.size() == 1);
  const auto& a = p.annotations[0];
  CHECK_FALSE(a.value.has_value());
  REQUIRE(a.line_count.has_value());
  REQUIRE(a.line.has_value());
  CHECK(render_ok(*a.line_count) == "3");
  CHECK(a.line->uses(variable::line));
  auto values = pod_values();
  values.set(variable::line, std::int64_t{2});
  CHECK(render_ok(*a.line, values) == "j-node-0-2.j slots=4");
}

TEST_CASE("an annotation's lines count may be an integer", "[policy][annotations]") {
  const auto p = parse_ok(
      with_spec(R"({"annotations": [{"name": "a", "lines": {"count": 2, "text": "h-${i}"}}]})"));
  REQUIRE(p.annotations[0].line_count.has_value());
  CHECK(render_ok(*p.annotations[0].line_count) == "2");
}

TEST_CASE("an annotation needs exactly one of value or lines", "[policy][annotations]") {
  for (const char* spec :
       {R"({"annotations": [{"name": "a"}]})",
        R"({"annotations": [{"name": "a", "value": "x", "lines": {"count": 1, "text": "y"}}]})"}) {
    INFO("spec: " << spec);
    const auto message = parse_error(with_spec(spec));
    CHECK_THAT(message, StartsWith(at("spec.annotations[0]")));
    CHECK_THAT(message, Contains("exactly one of value or lines"));
  }
}

TEST_CASE("an annotation needs a name", "[policy][annotations]") {
  CHECK_THAT(parse_error(with_spec(R"({"annotations": [{"value": "x"}]})")),
             StartsWith(at("spec.annotations[0].name") + "missing"));
  CHECK_THAT(parse_error(with_spec(R"({"annotations": [{"name": 1, "value": "x"}]})")),
             StartsWith(at("spec.annotations[0].name")));
}

TEST_CASE("valid annotation keys are accepted", "[policy][annotations]") {
  const std::vector<std::string> keys = {"hostfile", "trainenv.io/hostfile", "a.b-c/Name_1.x",
                                         std::string(63, 'a'), "x/" + std::string(63, 'B')};
  for (const auto& key : keys) {
    INFO("key: " << key);
    json doc = minimal_doc();
    doc["spec"]["annotations"] = json::array({{{"name", key}, {"value", "v"}}});
    CHECK(parse_ok(doc).annotations.size() == 1);
  }
}

TEST_CASE("an invalid annotation key is rejected", "[policy][annotations]") {
  const std::vector<std::string> keys = {"",
                                         "a b",
                                         "/x",
                                         "x/",
                                         "a/b/c",
                                         "Trainenv.io/x",
                                         "t_x.io/y",
                                         "a:b",
                                         std::string(64, 'a'),
                                         "x/" + std::string(64, 'a'),
                                         std::string(254, 'a') + "/x"};
  for (const auto& key : keys) {
    INFO("key: " << key);
    json doc = minimal_doc();
    doc["spec"]["annotations"] = json::array({{{"name", key}, {"value", "v"}}});
    const auto message = parse_error(doc);
    CHECK_THAT(message, StartsWith(at("spec.annotations[0].name")));
    CHECK_THAT(message, Contains("not a valid annotation key"));
  }
}

// Regression (fixed): Kubernetes' qualified names must begin and end with an alphanumeric character
// and the prefix must be a DNS subdomain; is_annotation_key checks only the character set, so the
// apiserver rejects every pod this policy mutates. Inputs: "trainenv.io/-x", "trainenv.io/x.",
// ".io/x", "a..b/x".
TEST_CASE("an annotation key Kubernetes would reject is rejected", "[policy][annotations]") {
  for (const char* key : {"trainenv.io/-x", "trainenv.io/x.", "-hostfile", ".io/x", "a..b/x"}) {
    INFO("key: " << key);
    json doc = minimal_doc();
    doc["spec"]["annotations"] = json::array({{{"name", key}, {"value", "v"}}});
    auto p = parse_policy(doc, source);
    CHECK_FALSE(p.ok());
  }
}

TEST_CASE("an annotation's lines need count and text", "[policy][annotations]") {
  CHECK_THAT(parse_error(with_spec(R"({"annotations": [{"name": "a", "lines": {"text": "x"}}]})")),
             StartsWith(at("spec.annotations[0].lines.count") + "missing"));
  CHECK_THAT(parse_error(with_spec(R"({"annotations": [{"name": "a", "lines": {"count": 1}}]})")),
             StartsWith(at("spec.annotations[0].lines.text") + "missing"));
  CHECK_THAT(
      parse_error(with_spec(
          R"({"annotations": [{"name": "a", "lines": {"count": 1, "text": "x", "sep": ","}}]})")),
      StartsWith(at("spec.annotations[0].lines") + "unknown field \"sep\""));
  CHECK_THAT(parse_error(with_spec(R"({"annotations": [{"name": "a", "lines": "x"}]})")),
             StartsWith(at("spec.annotations[0].lines")));
  CHECK_THAT(parse_error(with_spec(
                 R"({"annotations": [{"name": "a", "lines": {"count": -1, "text": "x"}}]})")),
             StartsWith(at("spec.annotations[0].lines.count")));
}

TEST_CASE("${i} in an annotation's lines count is rejected", "[policy][annotations]") {
  const auto message = parse_error(
      with_spec(R"({"annotations": [{"name": "a", "lines": {"count": "${i}", "text": "x"}}]})"));
  CHECK_THAT(message, StartsWith(at("spec.annotations[0].lines.count")));
  CHECK_THAT(message, Contains("may use only"));
}

TEST_CASE("${i} anywhere but an annotation's lines.text is rejected at that item",
          "[policy][annotations]") {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"env": [{"name": "A", "value": "host-${i}"}]})", "spec.env[0]"},
      {R"({"env": [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "x${i}"}}}]})",
       "spec.env[0]"},
      {R"({"env": [{"name": "A", "value": "1", "when": "i > 0"}]})", "spec.env[0]"},
      {R"({"ports": [{"containerPort": "${8000 + i}"}]})", "spec.ports[0]"},
      {R"({"args": {"items": [{"value": "--i=${i}"}]}})", "spec.args.items[0]"},
      {R"({"volumes": [{"name": "v", "secret": {"secretName": "s${i}"}}]})", "spec.volumes[0]"},
      {R"({"volumeMounts": [{"name": "v", "mountPath": "/x/${i}"}]})", "spec.volumeMounts[0]"},
      {R"({"annotations": [{"name": "a", "value": "${i}"}]})", "spec.annotations[0]"},
      {R"({"annotations": [{"name": "a", "lines": {"count": 2, "text": "${i}"},
                            "when": "i < 1"}]})",
       "spec.annotations[0]"}};
  for (const auto& [spec, field] : cases) {
    INFO("spec: " << spec);
    const auto message = parse_error(with_spec(spec));
    CHECK_THAT(message, StartsWith(at(field)));
    CHECK_THAT(message, Contains("${i}"));
  }
}

TEST_CASE("an annotation using rank must be scoped to training roles", "[policy][annotations]") {
  for (const char* spec :
       {R"({"annotations": [{"name": "a", "value": "${rank}"}]})",
        R"({"annotations": [{"name": "a", "lines": {"count": "${worldSize}", "text": "h${i}"}}]})",
        R"({"annotations": [{"name": "a", "lines": {"count": 1, "text": "${rank}-${i}"},
                              "roles": ["launcher"]}]})"}) {
    INFO("spec: " << spec);
    const auto message = parse_error(with_spec(spec));
    CHECK_THAT(message, StartsWith(at("spec.annotations[0]")));
    CHECK_THAT(message, Contains("roles: [training]"));
  }
  CHECK(parse_ok(with_spec(R"({"annotations": [{"name": "a", "roles": ["training"],
          "lines": {"count": "${worldSize}", "text": "${rank}-${i}"}}]})"))
            .annotations.size() == 1);
}

// Regression (fixed): lines.count must render to a whole number, yet a literal that is no number,
// or a text variable, is accepted at load and fails only at admission ("asks for \"abc\" lines").
// Inputs: lines: {count: "abc", text: "x"}; lines: {count: "${job}", text: "x"}.
TEST_CASE("an annotation's lines count that can never be a number is rejected at load",
          "[policy][annotations]") {
  for (const char* count : {"abc", "${job}"}) {
    INFO("count: " << count);
    json doc = minimal_doc();
    doc["spec"]["annotations"] =
        json::array({{{"name", "a"}, {"lines", {{"count", count}, {"text", "x"}}}}});
    auto p = parse_policy(doc, source);
    CHECK_FALSE(p.ok());
    if (!p.ok()) CHECK_THAT(p.message(), StartsWith(at("spec.annotations[0].lines.count")));
  }
}
