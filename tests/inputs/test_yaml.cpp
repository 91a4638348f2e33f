// app/yaml.hpp: YAML or JSON text into JSON documents, typed by the YAML 1.2 core schema.
#include <catch2/catch.hpp>

#include "../test_support.hpp"

#include <algorithm>
#include <csignal>
#include <random>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include "trainenv/inputs/yaml.hpp"

using Catch::Matchers::Contains;
using nlohmann::json;
using trainenv::inputs::parse_document;
using trainenv::inputs::parse_documents;

namespace {

json parse_one(const std::string& text) {
  auto doc = parse_document(text);
  INFO("text:\n" << text);
  if (!doc.ok()) FAIL("unexpected error: " << doc.message());
  return std::move(doc).value();
}

std::string parse_error(const std::string& text) {
  auto docs = parse_documents(text);
  INFO("text:\n" << text);
  REQUIRE_FALSE(docs.ok());
  return docs.message();
}

// Runs `body` in a child process, so a stack overflow fails the test instead of the run.
// Returns the child's exit code, or -1 when it died from a signal.
template <class F>
int exit_code_in_child(F body) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // Catch's fatal-signal handlers would report from the child; let it just die.
    for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) std::signal(sig, SIG_DFL);
    _exit(body());
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string nested_flow_sequence(int depth) {
  return std::string(static_cast<std::size_t>(depth), '[') +
         std::string(static_cast<std::size_t>(depth), ']');
}

}  // namespace

TEST_CASE("plain integer scalars become JSON integers", "[yaml]") {
  const json doc = parse_one("a: 4\nb: -12\nc: +7\nd: 0\n");
  CHECK(doc["a"] == 4);
  CHECK(doc["a"].is_number_integer());
  CHECK(doc["b"] == -12);
  CHECK(doc["c"] == 7);
  CHECK(doc["d"] == 0);
  CHECK(doc["d"].is_number_integer());
}

TEST_CASE("plain booleans become JSON booleans", "[yaml]") {
  const json doc = parse_one("a: true\nb: false\nc: True\nd: FALSE\n");
  CHECK(doc["a"] == true);
  CHECK(doc["b"] == false);
  CHECK(doc["c"] == true);
  CHECK(doc["d"] == false);
  CHECK(doc["a"].is_boolean());
}

TEST_CASE("YAML 1.1 words yes, no, on and off stay strings", "[yaml]") {
  const json doc = parse_one("a: yes\nb: no\nc: on\nd: off\n");
  CHECK(doc["a"] == "yes");
  CHECK(doc["b"] == "no");
  CHECK(doc["c"] == "on");
  CHECK(doc["d"] == "off");
}

TEST_CASE("plain null forms and empty values become JSON null", "[yaml]") {
  const json doc = parse_one("a: null\nb: ~\nc:\nd: Null\n");
  CHECK(doc["a"].is_null());
  CHECK(doc["b"].is_null());
  CHECK(doc["c"].is_null());
  CHECK(doc["d"].is_null());
  CHECK(doc.size() == 4);
}

TEST_CASE("plain floats become JSON floating-point numbers", "[yaml]") {
  const json doc = parse_one("a: 2.5\nb: 1e3\nc: .5\nd: -0.25\n");
  CHECK(doc["a"].is_number_float());
  CHECK(doc["a"] == 2.5);
  CHECK(doc["b"].is_number_float());
  CHECK(doc["b"] == 1000.0);
  CHECK(doc["c"] == 0.5);
  CHECK(doc["d"] == -0.25);
}

// Regression (fixed): a plain float outside double's range reaches std::stod, which throws
// std::out_of_range out of parse_documents (declared to return errors as values). `trainenv
// check-policies` on a policy with `masterPort: 1e999` aborts ("terminate called after throwing ...
// stod"); POST /preview answers 500 instead of 400. Inputs: "a: 1e999", "a: 1e-400".
TEST_CASE("a plain float outside the double range does not throw", "[yaml]") {
  for (const char* text : {"a: 1e999\n", "a: -1e999\n", "a: 1e-400\n"}) {
    INFO("text: " << text);
    CHECK_NOTHROW([&] { (void)parse_documents(text); }());
  }
}

TEST_CASE("quoted scalars stay strings", "[yaml]") {
  const json doc = parse_one("a: \"4\"\nb: '4'\nc: \"true\"\nd: 'null'\ne: \"2.5\"\n");
  CHECK(doc["a"] == "4");
  CHECK(doc["a"].is_string());
  CHECK(doc["b"] == "4");
  CHECK(doc["c"] == "true");
  CHECK(doc["d"] == "null");
  CHECK(doc["e"] == "2.5");
}

TEST_CASE("block scalars stay strings", "[yaml]") {
  const json doc = parse_one("a: |\n  4\nb: >\n  true\n");
  CHECK(doc["a"] == "4\n");
  CHECK(doc["b"] == "true\n");
}

// Regression (fixed): the explicit core-schema tag !!str is ignored for plain scalars: `a: !!str 4`
// comes back as the integer 4 instead of the string "4" (only "!"-tagged, i.e. quoted, scalars stay
// strings).
TEST_CASE("an explicit str tag keeps a plain scalar a string", "[yaml]") {
  const json doc = parse_one("a: !!str 4\nb: !!str true\n");
  CHECK(doc["a"] == "4");
  CHECK(doc["b"] == "true");
}

TEST_CASE("plain text scalars and template strings stay strings", "[yaml]") {
  // (0x10 was here; hex is now an integer, see the octal and hex tests below.)
  const json doc = parse_one("a: torch\nb: ${job}-node-0-0.${job}\nc: 0x1G\nd: 1.2.3\n");
  CHECK(doc["a"] == "torch");
  CHECK(doc["b"] == "${job}-node-0-0.${job}");
  CHECK(doc["c"] == "0x1G");
  CHECK(doc["d"] == "1.2.3");
}

TEST_CASE("nested mappings and sequences are converted", "[yaml]") {
  const json doc = parse_one(R"(
spec:
  frameworks: [torch, pytorch]
  env:
    - name: A
      value: "1"
    - name: B
      roles: [training]
)");
  CHECK(doc == json::parse(R"({"spec": {
    "frameworks": ["torch", "pytorch"],
    "env": [{"name": "A", "value": "1"}, {"name": "B", "roles": ["training"]}]
  }})"));
}

TEST_CASE("the shipped torch policy file parses to its structure", "[yaml]") {
  const json doc = parse_one(
      R"(apiVersion: trainenv.io/v1alpha1
kind: TrainingPolicy
metadata:
  name: torch
spec:
  frameworks: [torch, pytorch]
  default: true              # pods without a framework label get this policy
  defaults:
    masterPort: 29500
  ports:
    - containerPort: "${masterPort}"
)");
  CHECK(doc["spec"]["default"] == true);
  CHECK(doc["spec"]["defaults"]["masterPort"] == 29500);
  CHECK(doc["spec"]["ports"][0]["containerPort"] == "${masterPort}");
}

TEST_CASE("multi-document text yields every document in order", "[yaml]") {
  auto docs = parse_documents("a: 1\n---\nb: 2\n---\nc: [3]\n");
  REQUIRE(docs.ok());
  REQUIRE(docs->size() == 3);
  CHECK((*docs)[0] == json{{"a", 1}});
  CHECK((*docs)[1] == json{{"b", 2}});
  CHECK((*docs)[2] == json{{"c", {3}}});
}

TEST_CASE("empty documents between separators are skipped", "[yaml]") {
  auto docs = parse_documents("---\na: 1\n---\n---\n# only a comment\n---\nb: 2\n");
  REQUIRE(docs.ok());
  REQUIRE(docs->size() == 2);
  CHECK((*docs)[0] == json{{"a", 1}});
  CHECK((*docs)[1] == json{{"b", 2}});
}

TEST_CASE("JSON object text is parsed as JSON", "[yaml]") {
  const json doc = parse_one(R"(  {"a": "4", "b": 4, "c": [true, null], "d": 1.5})");
  CHECK(doc == json::parse(R"({"a": "4", "b": 4, "c": [true, null], "d": 1.5})"));
  CHECK(doc["a"].is_string());
}

TEST_CASE("JSON array text is parsed as one document", "[yaml]") {
  auto docs = parse_documents("\n[1, 2, 3]\n");
  REQUIRE(docs.ok());
  REQUIRE(docs->size() == 1);
  CHECK((*docs)[0] == json::array({1, 2, 3}));
}

TEST_CASE("invalid JSON text is an error naming JSON", "[yaml]") {
  // Unterminated: neither JSON nor YAML flow style, so the JSON error is the one reported.
  CHECK_THAT(parse_error(R"({"a": 1)"), Contains("JSON"));
}

// Regression (fixed): any text whose first non-blank character is "{" or "[" is parsed as JSON
// only, so a valid YAML flow-style document such as `{apiVersion: v1, kind: Pod}` or `[a, b]` is
// rejected with "not valid JSON" (e.g. `trainenv preview -f pod.yaml` on a flow-style file).
TEST_CASE("a YAML flow-style document starting with a brace is accepted", "[yaml]") {
  const json doc = parse_one("{apiVersion: v1, kind: Pod, spec: {containers: []}}\n");
  CHECK(doc == json::parse(R"({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": []}})"));
  const json list = parse_one("[a, b]\n");
  CHECK(list == json::array({"a", "b"}));
}

TEST_CASE("a YAML syntax error names the line", "[yaml]") {
  const auto message = parse_error("a: 1\nb: [1, 2\n");
  CHECK_THAT(message, Contains("not valid YAML"));
  CHECK_THAT(message, Contains("line "));
}

TEST_CASE("a YAML indentation error names its line and column", "[yaml]") {
  const auto message = parse_error("a:\n  - b\n - c\n");
  CHECK_THAT(message, Contains("line 3, column 2"));
}

TEST_CASE("a bad mapping value names its line", "[yaml]") {
  const auto message = parse_error("x: 1\n\n\nkey: : :\n");
  CHECK_THAT(message, Contains("line 4"));
}

// Regression (fixed): duplicate mapping keys (invalid YAML: keys must be unique) are accepted and
// the last one silently wins, so a policy file with two `env:` blocks loses the first one while
// check-policies reports it ok. Input: "a: 1\na: 2\n" parses to {"a": 2}.
TEST_CASE("a mapping with a duplicate key is an error", "[yaml]") {
  auto docs = parse_documents("a: 1\na: 2\n");
  CHECK_FALSE(docs.ok());
}

TEST_CASE("a mapping key that is not a scalar is an error", "[yaml]") {
  CHECK_THAT(parse_error("? [a, b]\n: 1\n"), Contains("mapping keys"));
}

TEST_CASE("parse_document rejects text with no document", "[yaml]") {
  for (const char* text : {"", "# just a comment\n", "---\n", "---\n---\n"}) {
    INFO("text: " << text);
    auto doc = parse_document(text);
    REQUIRE_FALSE(doc.ok());
    CHECK_THAT(doc.message(), Contains("found 0"));
  }
}

TEST_CASE("parse_document rejects text with two documents", "[yaml]") {
  auto doc = parse_document("a: 1\n---\nb: 2\n");
  REQUIRE_FALSE(doc.ok());
  CHECK_THAT(doc.message(), Contains("expected one document, found 2"));
}

TEST_CASE("parse_document passes a parse error through", "[yaml]") {
  auto doc = parse_document("a: [1\n");
  REQUIRE_FALSE(doc.ok());
  CHECK_THAT(doc.message(), Contains("not valid YAML"));
}

TEST_CASE("nesting up to the depth limit is accepted", "[yaml]") {
  auto docs = parse_documents("a: " + nested_flow_sequence(100) + "\n");
  REQUIRE(docs.ok());
  CHECK(docs->size() == 1);
}

TEST_CASE("a YAML document nested past the depth limit is refused", "[yaml]") {
  CHECK_THAT(parse_error("a: " + nested_flow_sequence(1100) + "\n"), Contains("deeper than 1000"));
  std::string block;
  for (int i = 0; i < 1100; ++i) block += std::string(static_cast<std::size_t>(i), ' ') + "k:\n";
  parse_error(block);  // refused, by yaml-cpp's own guard or the converter's
}

TEST_CASE("a very deep YAML document is refused without crashing", "[yaml]") {
  // Run in a child: yaml-cpp and the converter both recurse.
  const int code = exit_code_in_child([] {
    std::string block_sequence;
    for (int i = 0; i < 200'000; ++i) block_sequence += "- ";
    block_sequence += "x\n";
    const bool refused = !parse_documents("a: " + nested_flow_sequence(1'000'000) + "\n").ok() &&
                         !parse_documents(block_sequence).ok();
    return refused ? 0 : 1;
  });
  CHECK(code == 0);
}

// Regression (fixed): JSON text skips the depth limit, and parse_documents then copies the parsed
// document out of a braced initializer list (yaml.cpp: std::vector<json>{std::move(*doc)}), a
// recursive copy that overflows the stack: "[" x 1,000,000 + "]" x 1,000,000 (2 MB, under the 7 MiB
// body limit) kills the process. POST /preview reaches this through parse_document.
TEST_CASE("a very deep JSON document is refused without crashing", "[yaml]") {
  const int code = exit_code_in_child([] {
    const auto docs = parse_documents(nested_flow_sequence(1'000'000));
    return docs.ok() ? 1 : 0;
  });
  INFO("child exit code (-1: killed by a signal): " << code);
  CHECK(code == 0);
}

// --- octal and hex integers, as Kubernetes' YAML (YAML 1.1 via sigs.k8s.io/yaml) reads them ---

TEST_CASE("a leading-zero integer is octal, so mode 0400 is 256", "[yaml][octal]") {
  const json doc = parse_one("mode: 0400\nall: 0777\nx: 0644\nzero: 00\n");
  CHECK(doc["mode"] == 256);
  CHECK(doc["mode"].is_number_integer());
  CHECK(doc["all"] == 511);
  CHECK(doc["x"] == 420);
  CHECK(doc["zero"] == 0);
  CHECK(doc["zero"].is_number_integer());
}

TEST_CASE("a 0o-prefixed integer is octal", "[yaml][octal]") {
  const json doc = parse_one("mode: 0o644\nother: 0o0\n");
  CHECK(doc["mode"] == 420);
  CHECK(doc["mode"].is_number_integer());
  CHECK(doc["other"] == 0);
}

TEST_CASE("a 0x-prefixed integer is hexadecimal in either letter case", "[yaml][hex]") {
  const json doc = parse_one("a: 0x1F\nb: 0x1f\nc: 0x0\nd: 0xFFFF\n");
  CHECK(doc["a"] == 31);
  CHECK(doc["a"].is_number_integer());
  CHECK(doc["b"] == 31);
  CHECK(doc["c"] == 0);
  CHECK(doc["d"] == 65535);
}

TEST_CASE("a lone zero is the integer 0", "[yaml][octal]") {
  const json doc = parse_one("a: 0\n");
  CHECK(doc["a"] == 0);
  CHECK(doc["a"].is_number_integer());
}

TEST_CASE("08 and 09 are not octal and read as decimal integers", "[yaml][octal]") {
  // Kubernetes reads these as the float 8 (ParseInt fails, ParseFloat succeeds): the same value.
  const json doc = parse_one("a: 08\nb: 09\nc: 0778\n");
  CHECK(doc["a"] == 8);
  CHECK(doc["a"].is_number_integer());
  CHECK(doc["b"] == 9);
  CHECK(doc["c"] == 778);
}

TEST_CASE("a quoted leading-zero number stays the string", "[yaml][octal]") {
  const json doc = parse_one("a: \"0400\"\nb: '0o644'\nc: \"0x1F\"\nd: !!str 0400\n");
  CHECK(doc["a"] == "0400");
  CHECK(doc["b"] == "0o644");
  CHECK(doc["c"] == "0x1F");
  CHECK(doc["d"] == "0400");
}

TEST_CASE("octal and hex integers inside flow collections are read too", "[yaml][octal]") {
  const json doc = parse_one("items: [{key: k, path: p, mode: 0640}, 0x10]\n");
  CHECK(doc["items"][0]["mode"] == 416);
  CHECK(doc["items"][1] == 16);
}

TEST_CASE("prefixes without digits and malformed octal or hex stay strings", "[yaml][octal]") {
  const json doc = parse_one("a: 0x\nb: 0o\nc: 0o8\nd: 0xG1\ne: 0o1.5\n");
  CHECK(doc["a"] == "0x");
  CHECK(doc["b"] == "0o");
  CHECK(doc["c"] == "0o8");
  CHECK(doc["d"] == "0xG1");
  CHECK(doc["e"] == "0o1.5");
}

TEST_CASE("an octal or hex integer beyond int64 stays text without crashing", "[yaml][octal]") {
  const json doc = parse_one(
      "a: 0777777777777777777777777\nb: 0x10000000000000000\nc: 0o7777777777777777777777\n");
  CHECK(doc["a"] == "0777777777777777777777777");
  CHECK(doc["b"] == "0x10000000000000000");
  CHECK(doc["c"] == "0o7777777777777777777777");
}

TEST_CASE("the largest int64 in hex and octal is read", "[yaml][hex]") {
  const json doc = parse_one("a: 0x7FFFFFFFFFFFFFFF\nb: 0777777777777777777777\n");
  CHECK(doc["a"] == INT64_MAX);
  CHECK(doc["b"] == INT64_MAX);
}

TEST_CASE("brace text with a leading-zero number is read as YAML flow, so octal", "[yaml][octal]") {
  // Not JSON (no leading zeros there), so the YAML reader takes it.
  const json doc = parse_one(R"({"mode": 0400, "n": 256, "s": "0400"})");
  CHECK(doc["mode"] == 256);
  CHECK(doc["n"] == 256);
  CHECK(doc["s"] == "0400");
}

// Regression (fixed): Kubernetes' YAML (strconv.ParseInt with base 0) reads a signed octal "+0400"
// as 256 and
// "-0400" as -256, but plain_scalar's octal pattern has no sign, so they fall through to decimal:
// "defaultMode: +0400" silently becomes 400 (0620), a valid but different file mode.
TEST_CASE("a signed leading-zero integer is octal too", "[yaml][octal]") {
  const json doc = parse_one("a: +0400\nb: -0400\n");
  CHECK(doc["a"] == 256);
  CHECK(doc["b"] == -256);
}

// Regression (fixed, found by fuzz_policy): yaml-cpp 0.7 never returned from this 600-byte
// mangled policy, allocating as it looped; POST /preview and a policy file reached it. libyaml
// refuses it at once. The input is kept in tests/fuzz/regressions/fuzz_policy.
TEST_CASE("a mangled policy that hung yaml-cpp is refused at once", "[yaml]") {
  const auto text = trainenv::test::read_file(
      std::string(TRAINENV_SOURCE_DIR) + "/tests/fuzz/regressions/fuzz_policy/yaml-cpp-hang.yaml");
  CHECK_THAT(parse_error(text), Contains("not valid YAML: line "));
}

TEST_CASE("anchors, aliases and merge keys expand as kubectl apply takes them", "[yaml][alias]") {
  // The shape people write: one container's env and resources shared by two roles' templates.
  const json doc = parse_one(R"(
common: &common
  image: pytorch/pytorch:2.7.1
  env: &env
    - {name: NCCL_DEBUG, value: INFO}
  resources: {limits: {nvidia.com/gpu: 8}}
master:
  <<: *common
  name: master
worker:
  <<: *common
  name: worker
  resources: {limits: {nvidia.com/gpu: 4}}
sidecar: {name: s, env: *env}
)");
  CHECK(doc["master"] == json::parse(R"({"image": "pytorch/pytorch:2.7.1", "name": "master",
      "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
      "resources": {"limits": {"nvidia.com/gpu": 8}}})"));
  // A key the mapping sets itself wins over the merged one, wherever it is written.
  CHECK(doc["worker"]["resources"]["limits"]["nvidia.com/gpu"] == 4);
  CHECK(doc["sidecar"]["env"] == doc["master"]["env"]);
  CHECK_FALSE(doc["master"].contains("<<"));

  // A list of merged mappings: the first that sets a key wins; an explicit key before the merge
  // wins too.
  const json list = parse_one("a: &a {x: 1, y: 1}\nb: &b {y: 2, z: 2}\nc: {z: 3, <<: [*a, *b]}\n");
  CHECK(list["c"] == json::parse(R"({"x": 1, "y": 1, "z": 3})"));
  // A scalar anchor, and a later anchor of the same name shadows the first (YAML's rule).
  CHECK(parse_one("a: &x 1\nb: *x\nc: &x two\nd: *x\n") ==
        json::parse(R"({"a": 1, "b": 1, "c": "two", "d": "two"})"));
  // A quoted "<<" is an ordinary key.
  CHECK(parse_one("'<<': 1\n") == json{{"<<", 1}});
  // An anchor names a node of its own document only.
  CHECK_THAT(parse_error("a: &x 1\n---\nb: *x\n"), Contains("alias *x names no anchor before it"));
}

namespace {

// Random YAML with anchors, aliases and merge keys, written beside the value it must read as:
// an alias stands for its anchor's value, a merge adds the merged mapping's keys the mapping does
// not set itself.
class aliased_yaml {
 public:
  explicit aliased_yaml(std::uint64_t seed) : rng_(seed) {}

  // The text of one document and its value.
  std::pair<std::string, json> document() {
    anchors_.clear();
    std::string text;
    json value = node(0, text);
    return {std::move(text), std::move(value)};
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

  json node(int depth, std::string& text) {
    // An alias of an anchor already written, now and then.
    if (!anchors_.empty() && pick(4) == 0) {
      const auto& [name, value] =
          anchors_[static_cast<std::size_t>(pick(static_cast<int>(anchors_.size())))];
      text += "*" + name;
      return value;
    }
    std::string anchor;
    if (pick(3) == 0) {
      anchor = "a" + std::to_string(next_anchor_++);
      text += "&" + anchor + " ";
    }
    json value;
    const int shape = depth >= 4 ? 0 : pick(3);
    if (shape == 0) {
      if (pick(2) == 0) {
        value = pick(1000);
        text += std::to_string(value.get<int>());
      } else {
        value = "s" + std::to_string(pick(1000));
        text += value.get<std::string>();
      }
    } else if (shape == 1) {
      value = json::array();
      text += "[";
      for (int i = 0, n = pick(4); i < n; ++i) {
        if (i > 0) text += ", ";
        value.push_back(node(depth + 1, text));
      }
      text += "]";
    } else {
      value = json::object();
      text += "{";
      bool first = true;
      for (int i = 0, n = pick(4); i < n; ++i) {
        const std::string key = "k" + std::to_string(pick(8));
        if (value.contains(key)) continue;
        text += (first ? "" : ", ") + key + ": ";
        first = false;
        value[key] = node(depth + 1, text);
      }
      // A merge of a mapping anchored before: its keys the mapping does not set.
      std::vector<const json*> mappings;
      std::vector<std::string> names;
      for (const auto& [name, v] : anchors_) {
        if (v.is_object()) {
          mappings.push_back(&v);
          names.push_back(name);
        }
      }
      if (!mappings.empty() && pick(2) == 0) {
        const auto chosen = static_cast<std::size_t>(pick(static_cast<int>(mappings.size())));
        text += std::string(first ? "" : ", ") + "<<: *" + names[chosen];
        for (const auto& [k, v] : mappings[chosen]->items()) {
          if (!value.contains(k)) value[k] = v;
        }
      }
      text += "}";
    }
    if (!anchor.empty()) anchors_.emplace_back(anchor, value);
    return value;
  }

  std::mt19937_64 rng_;
  std::vector<std::pair<std::string, json>> anchors_;
  int next_anchor_ = 0;
};

}  // namespace

TEST_CASE("every generated document with anchors, aliases and merges reads as its value",
          "[yaml][alias][property]") {
  const auto seed = trainenv::test::property_seed();
  aliased_yaml generate(seed);
  int aliases = 0;
  for (int i = 0; i < 2'000; ++i) {
    const auto [text, value] = generate.document();
    INFO("seed " << seed << " (TRAINENV_PROPERTY_SEED repeats it), document " << i << ":\n"
                 << text);
    aliases += static_cast<int>(std::count(text.begin(), text.end(), '*'));
    const auto docs = parse_documents("doc: " + text + "\n");
    REQUIRE(docs.ok());
    CHECK((*docs)[0]["doc"] == value);
  }
  CHECK(aliases > 500);  // the generator really wrote aliases
}

TEST_CASE("aliases are bounded: a few bytes cannot stand for billions of values", "[yaml][alias]") {
  // Billion laughs: ten levels of ten (here five) aliases of the level below.
  std::string laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'j'; ++c) {
    const char prev = static_cast<char>(c - 1);
    laughs += std::string(1, c) + ": &" + c + " [*" + prev + ", *" + prev + ", *" + prev + ", *" +
              prev + ", *" + prev + "]\n";
  }
  CHECK_THAT(parse_error(laughs), Contains("aliases (*name) expand to more than 1 MiB"));
  // Many aliases of a tiny value: the count bound.
  std::string many = "a: &x 1\nb: [";
  for (int i = 0; i < 10'001; ++i) many += "*x, ";
  many += "]\n";
  CHECK_THAT(parse_error(many), Contains("more than 10000 aliases (*name) in one text"));
  // 10,000 are fine.
  many = "a: &x 1\nb: [";
  for (int i = 0; i < 10'000; ++i) many += "*x, ";
  many += "]\n";
  CHECK(parse_one(many)["b"].size() == 10'000);
  // Under 1 MiB in all is fine: 100 copies of 5 KB.
  const std::string five_kb(5'000, 'v');
  std::string copies = "a: &big " + five_kb + "\nb: [";
  for (int i = 0; i < 100; ++i) copies += "*big, ";
  copies += "]\n";
  CHECK(parse_one(copies)["b"][99] == five_kb);
  // An alias that would nest past the bound: a deep anchored node aliased deep again.
  std::string deep = "a: &d " + std::string(600, '[') + std::string(600, ']') + "\nb: ";
  deep += std::string(500, '[') + "*d" + std::string(500, ']') + "\n";
  CHECK_THAT(parse_error(deep), Contains("alias *d nests the document deeper than 1000 levels"));
  // An alias of a node still open (a cycle) names nothing yet; a merge takes only mappings.
  CHECK_THAT(parse_error("a: &a [1, *a]\n"), Contains("line 1, column 11: alias *a names no"));
  CHECK_THAT(parse_error("a: &s 1\nb: {<<: *s}\n"),
             Contains("the merge key << takes a mapping or a list of them"));
  CHECK_THAT(parse_error("a: &m {x: 1}\nb: {<<: *m, <<: *m}\n"), Contains("duplicate key \"<<\""));
  CHECK_THAT(parse_error("a: &k key\n*k : 1\n"),
             Contains("line 2, column 1: mapping keys must be plain strings, not aliases"));
  CHECK_THAT(parse_error("a: &k key\nb: {*k : 1}\n"), Contains("not aliases"));
}

TEST_CASE("a long plain scalar is typed without recursing per character", "[yaml]") {
  const std::string digits(200'000, '7');
  auto docs = parse_documents("a: " + digits + "\nb: 1." + digits + "\nc: 0" + digits + "\n");
  REQUIRE(docs.ok());
  CHECK((*docs)[0]["a"] == digits);  // beyond int64: kept as text
  CHECK((*docs)[0]["b"].is_number_float());
  CHECK((*docs)[0]["c"].is_string());
}

TEST_CASE("to_yaml: what it writes reads back as the same document", "[yaml]") {
  // Strings a plain scalar would retype (numbers, booleans, null, YAML 1.1's yes/no/on/off),
  // YAML's indicators, blank and multi-line text, keys alike.
  const json tricky = {
      {"strings",
       {"4",    "-1",  "0x1F", "0o17",  "1e3",    ".5",         "true",   "False", "null", "~",
        "",     "yes", "No",   "on",    "OFF",    "y",          "n",      ": x",   "- a",  "#x",
        "a: b", "[x]", "{x}",  "'q'",   "\"dq\"", "&a",         "*a",     "!t",    "|",    ">",
        "%x",   "@x",  "`x",   " lead", "trail ", "two\nlines", "tab\tx", "ünï ✓"}},
      {"4", "a number's text as a key"},
      {"true", nullptr},
      {"numbers", {0, -7, 1.5, 9007199254740993LL}},
      {"booleans", {true, false}},
      {"empty", {{"object", json::object()}, {"array", json::array()}}},
      {"nested", {{"list", {{{"name", "node"}, {"env", {{{"name", "RANK"}, {"value", "0"}}}}}}}}}};
  const auto text = trainenv::inputs::to_yaml(tricky);
  INFO(text);
  CHECK(text.rfind("---", 0) == 0);
  CHECK(parse_one(text) == tricky);

  // Generated strings over an alphabet of YAML's indicators: each reads back as written.
  std::mt19937 random(41);
  const std::string alphabet = "ab0129.-+:#&*!|>'\"%@`?,[]{} \t\nxyeEnoON~_";
  for (int round = 0; round < 500; ++round) {
    std::string s;
    const auto length = random() % 8;
    for (std::size_t i = 0; i < length; ++i) s += alphabet[random() % alphabet.size()];
    const json doc = {{"v", s}, {s.empty() ? "k" : s, round}};
    INFO("string: " << json(s).dump());
    REQUIRE(parse_one(trainenv::inputs::to_yaml(doc)) == doc);
  }
}
