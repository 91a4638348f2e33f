#include "trainenv/core/model/admission.hpp"

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>

#include "trainenv/core/model/pod_view.hpp"
#include "trainenv/core/text/json_text.hpp"

namespace trainenv::core {
namespace {

using nlohmann::json;

constexpr std::string_view v1 = "admission.k8s.io/v1";
constexpr std::string_view v1beta1 = "admission.k8s.io/v1beta1";
constexpr std::string_view alphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
// The two characters of every 12 bits, in order: an 8 KiB table, two lookups per three bytes.
constexpr auto base64_pairs = [] {
  std::array<std::array<char, 2>, 4096> table{};
  for (std::size_t n = 0; n < table.size(); ++n) table[n] = {alphabet[n >> 6], alphabet[n & 63]};
  return table;
}();

}  // namespace

bool admission_request::is_pod_create() const {
  return group.empty() && version == "v1" && resource == "pods" && sub_resource.empty() &&
         operation == "CREATE";
}

result<admission_request> decode_review(std::string_view body) {
  auto parsed = parse_read_only(body);
  if (!parsed) return std::move(parsed).take_error();
  const auto document = parsed->root();
  if (!document.is_object()) return error{"body is not an AdmissionReview: expected a JSON object"};
  admission_request out;
  out.api_version = string_or_empty(document, "apiVersion");
  if (string_or_empty(document, "kind") != "AdmissionReview") {
    return error{"body is not an AdmissionReview: kind must be \"AdmissionReview\""};
  }
  if (out.api_version != v1 && out.api_version != v1beta1) {
    return error{"unsupported AdmissionReview apiVersion \"" + out.api_version.substr(0, 64) +
                 "\": expected admission.k8s.io/v1 or admission.k8s.io/v1beta1"};
  }
  const auto request = document.find("request");
  if (!request.is_object()) return error{"AdmissionReview has no request object"};
  out.uid = string_or_empty(request, "uid");
  if (out.uid.empty()) return error{"AdmissionReview request.uid is missing"};
  if (const auto resource = member(request, "resource")) {
    out.group = string_or_empty(resource, "group");
    out.version = string_or_empty(resource, "version");
    out.resource = string_or_empty(resource, "resource");
  }
  out.sub_resource = string_or_empty(request, "subResource");
  out.operation = string_or_empty(request, "operation");
  out.namespace_name = string_or_empty(request, "namespace");
  out.name = string_or_empty(request, "name");
  if (const auto dry_run = member(request, "dryRun"); dry_run.is_boolean())
    out.dry_run = dry_run.is_true();
  const auto object = request.find("object");
  out.object = pod_view(std::move(*parsed), object, out.namespace_name);
  return out;
}

result<admission_request> decode_review_json(const json& document) {
  return decode_review(document.dump(-1, ' ', false, json::error_handler_t::replace));
}

std::string encode_response(const admission_request& request, const decision& d) {
  // Written as text around the values: the base64 patch, most of the response, needs no
  // escaping, and going through json values and their serializer tripled the cost of this step.
  std::string out;
  out.reserve(256 + d.message.size() + (d.patch_text.size() + 2) / 3 * 4);
  out += R"({"apiVersion":)";
  append_json_string(out, request.api_version);
  out += R"(,"kind":"AdmissionReview","response":{"uid":)";
  append_json_string(out, request.uid);
  out += d.allowed ? R"(,"allowed":true)" : R"(,"allowed":false)";
  if (!d.allowed) {
    out += R"(,"status":{"code":)";
    out += std::to_string(d.code);
    out += R"(,"message":)";
    append_json_string(out, d.message);
    out += '}';
  }
  if (d.mutated()) {
    out += R"(,"patchType":"JSONPatch","patch":")";
    out += base64_encode(d.patch_text);
    out += '"';
  }
  if (!d.warnings.empty()) {
    out += R"(,"warnings":[)";
    for (std::size_t i = 0; i < d.warnings.size(); ++i) {
      if (i > 0) out += ',';
      append_json_string(out, d.warnings[i]);
    }
    out += ']';
  }
  if (!d.policy.empty()) {
    // Keys without '/', at most 63 characters: the apiserver prefixes them with the webhook's
    // name. In key order, as a json object would write them.
    out += R"(,"auditAnnotations":{)";
    if (d.mutated()) {
      out += R"("injected":)";
      append_json_string(out, d.injected.describe());
      out += ',';
    }
    out += R"("policy":)";
    append_json_string(out, d.policy);
    out += '}';
  }
  out += "}}";
  return out;
}

std::string base64_encode(std::string_view bytes) {
  std::string out((bytes.size() + 2) / 3 * 4, '=');
  // Locals, not the globals: a store through char* may alias anything, and with the table and
  // the input read through globals the compiler reloads them after every character written.
  const char* const table = alphabet.data();
  const auto* const pairs = base64_pairs.data();
  const auto* in = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t whole = bytes.size() / 3 * 3;
  char* o = out.data();
  std::size_t i = 0;
  // Six bytes at a time, read in one eight-byte load while eight are there, and written as four
  // pairs: the patch is most of a response, and this loop was 4% of a small request's
  // instructions a character at a time.
  for (; i + 8 <= bytes.size(); i += 6, o += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, in + i, sizeof word);
    if constexpr (std::endian::native == std::endian::little) word = __builtin_bswap64(word);
    std::memcpy(o, pairs[(word >> 52) & 0xfff].data(), 2);
    std::memcpy(o + 2, pairs[(word >> 40) & 0xfff].data(), 2);
    std::memcpy(o + 4, pairs[(word >> 28) & 0xfff].data(), 2);
    std::memcpy(o + 6, pairs[(word >> 16) & 0xfff].data(), 2);
  }
  for (; i < whole; i += 3, o += 4) {
    const unsigned n = (unsigned{in[i]} << 16) | (unsigned{in[i + 1]} << 8) | in[i + 2];
    const char c0 = table[(n >> 18) & 63];
    const char c1 = table[(n >> 12) & 63];
    const char c2 = table[(n >> 6) & 63];
    const char c3 = table[n & 63];
    o[0] = c0;
    o[1] = c1;
    o[2] = c2;
    o[3] = c3;
  }
  if (const auto left = bytes.size() - whole; left > 0) {
    unsigned n = unsigned{in[whole]} << 16;
    if (left == 2) n |= unsigned{in[whole + 1]} << 8;
    o[0] = table[(n >> 18) & 63];
    o[1] = table[(n >> 12) & 63];
    if (left == 2) o[2] = table[(n >> 6) & 63];  // else the '=' already there
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::array<int, 256> value{};
  value.fill(-1);
  for (std::size_t i = 0; i < alphabet.size(); ++i)
    value[static_cast<unsigned char>(alphabet[i])] = static_cast<int>(i);
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    unsigned n = 0;
    int padding = 0;
    for (std::size_t j = 0; j < 4; ++j) {
      const char c = text[i + j];
      if (c == '=' && i + 4 == text.size() && j >= 2) {
        ++padding;
        n <<= 6;
        continue;
      }
      if (padding > 0 || value[static_cast<unsigned char>(c)] < 0) return std::nullopt;
      n = (n << 6) | static_cast<unsigned>(value[static_cast<unsigned char>(c)]);
    }
    out += static_cast<char>((n >> 16) & 255);
    if (padding < 2) out += static_cast<char>((n >> 8) & 255);
    if (padding < 1) out += static_cast<char>(n & 255);
  }
  return out;
}

}  // namespace trainenv::core
