#include "trainenv/core/policy/template.hpp"

#include <algorithm>
#include <limits>

#include "trainenv/core/text/names.hpp"

namespace trainenv::core {
namespace {

// Arithmetic stays far from int64 overflow: the inputs are small counts.
constexpr std::int64_t max_magnitude = std::int64_t{1} << 40;

void collect_strings(const nlohmann::json& value, nlohmann::json::json_pointer& at,
                     std::vector<std::pair<nlohmann::json::json_pointer, std::string>>& out) {
  if (value.is_string()) {
    out.emplace_back(at, value.get<std::string>());
  } else if (value.is_object()) {
    for (const auto& [key, child] : value.items()) {
      at.push_back(key);
      collect_strings(child, at, out);
      at.pop_back();
    }
  } else if (value.is_array()) {
    for (std::size_t i = 0; i < value.size(); ++i) {
      at.push_back(std::to_string(i));
      collect_strings(value[i], at, out);
      at.pop_back();
    }
  }
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

}  // namespace

// Recursive descent over a few dozen characters; emits postfix ops.
class expression_parser {
 public:
  expression_parser(std::string_view text, expression& out) : text_(text), out_(out) {}

  std::string parse() {
    skip_space();
    // A text variable stands alone: "${job}" but never "${job + 1}".
    const auto start = pos_;
    const auto name = read_name();
    skip_space();
    if (!name.empty() && pos_ == text_.size()) {
      const auto var = variable_from_name(name);
      if (!var) return unknown(name);
      out_.used_ |= variable_bit(*var);
      if (!is_integer_variable(*var)) {
        out_.text_variable_ = var;
        return {};
      }
      out_.program_.push_back({expression::op_kind::load, 0, *var});
      return {};
    }
    pos_ = start;
    if (auto problem = sum(); !problem.empty()) return problem;
    skip_space();
    if (pos_ != text_.size()) return "unexpected \"" + std::string(text_.substr(pos_)) + "\"";
    return {};
  }

 private:
  std::string sum() {
    if (auto problem = product(); !problem.empty()) return problem;
    for (;;) {
      skip_space();
      if (pos_ >= text_.size() || (text_[pos_] != '+' && text_[pos_] != '-')) return {};
      const char op = text_[pos_++];
      if (auto problem = product(); !problem.empty()) return problem;
      out_.program_.push_back(
          {op == '+' ? expression::op_kind::add : expression::op_kind::subtract});
    }
  }

  std::string product() {
    if (auto problem = factor(); !problem.empty()) return problem;
    for (;;) {
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != '*') return {};
      ++pos_;
      if (auto problem = factor(); !problem.empty()) return problem;
      out_.program_.push_back({expression::op_kind::multiply});
    }
  }

  std::string factor() {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const auto start = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      const auto n = parse_decimal(text_.substr(start, pos_ - start), max_magnitude);
      if (!n) return "number too large";
      out_.program_.push_back({expression::op_kind::constant, *n});
      return {};
    }
    const auto name = read_name();
    if (name.empty())
      return pos_ < text_.size() ? "unexpected \"" + std::string(1, text_[pos_]) + "\""
                                 : "missing a value";
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == '(') {
      ++pos_;
      if (name == "replicas") {
        // The argument is a role name, which may hold '-': read up to ')'.
        const auto close = text_.find(')', pos_);
        if (close == std::string_view::npos) return "missing ')'";
        auto role = text_.substr(pos_, close - pos_);
        while (!role.empty() && role.front() == ' ') role.remove_prefix(1);
        while (!role.empty() && role.back() == ' ') role.remove_suffix(1);
        if (!is_dns_label(role))
          return "write replicas(<role>) with a role name, e.g. replicas(master)";
        pos_ = close + 1;
        out_.used_ |= replicas_bit;
        out_.program_.push_back(
            {expression::op_kind::load_replicas, 0, variable::job, std::string(role)});
        return {};
      }
      if (name != "max" && name != "min") {
        return "unknown function " + std::string(name) + "(); use max(), min() or replicas()";
      }
      std::int64_t count = 0;
      for (;;) {
        if (auto problem = sum(); !problem.empty()) return problem;
        ++count;
        skip_space();
        if (pos_ < text_.size() && text_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (pos_ < text_.size() && text_[pos_] == ')') {
          ++pos_;
          break;
        }
        return "missing ')'";
      }
      out_.program_.push_back(
          {name == "max" ? expression::op_kind::max : expression::op_kind::min, count});
      return {};
    }
    const auto var = variable_from_name(name);
    if (!var) return unknown(name);
    if (!is_integer_variable(*var))
      return "${" + std::string(name) + "} is text; it cannot take part in arithmetic";
    out_.used_ |= variable_bit(*var);
    out_.program_.push_back({expression::op_kind::load, 0, *var});
    return {};
  }

  std::string_view read_name() {
    const auto start = pos_;
    while (pos_ < text_.size() && is_name_char(text_[pos_]) &&
           !(pos_ == start && text_[pos_] >= '0' && text_[pos_] <= '9')) {
      ++pos_;
    }
    return text_.substr(start, pos_ - start);
  }

  void skip_space() {
    while (pos_ < text_.size() && text_[pos_] == ' ') ++pos_;
  }

  static std::string unknown(std::string_view name) {
    return "unknown variable " + std::string(name) + "; use one of " + variable_names();
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  expression& out_;
};

result<expression> expression::compile(std::string_view text) {
  expression out;
  expression_parser parser(text, out);
  if (auto problem = parser.parse(); !problem.empty()) {
    return error{"in ${" + std::string(text) + "}: " + problem};
  }
  return out;
}

result<std::int64_t> expression::evaluate(const variable_values& values) const {
  if (text_variable_)
    return error{"${" + std::string(variable_name(*text_variable_)) + "} is not a number"};
  std::vector<std::int64_t> stack;
  stack.reserve(program_.size());
  for (const auto& op : program_) {
    switch (op.kind) {
      case op_kind::constant:
        stack.push_back(op.number);
        break;
      case op_kind::load: {
        const auto n = values.number(op.var);
        if (!n) return error{values.unavailable_reason(op.var)};
        stack.push_back(*n);
        break;
      }
      case op_kind::load_replicas:
        stack.push_back(values.replicas(op.role));
        break;
      case op_kind::add:
      case op_kind::subtract:
      case op_kind::multiply: {
        const auto b = stack.back();
        stack.pop_back();
        auto& a = stack.back();
        std::int64_t r = 0;
        const bool overflow = op.kind == op_kind::add        ? __builtin_add_overflow(a, b, &r)
                              : op.kind == op_kind::subtract ? __builtin_sub_overflow(a, b, &r)
                                                             : __builtin_mul_overflow(a, b, &r);
        if (overflow || r > max_magnitude || r < -max_magnitude)
          return error{"arithmetic result out of range"};
        a = r;
        break;
      }
      case op_kind::max:
      case op_kind::min: {
        const auto count = static_cast<std::size_t>(op.number);
        const auto first = stack.end() - static_cast<std::ptrdiff_t>(count);
        const auto picked = op.kind == op_kind::max ? *std::max_element(first, stack.end())
                                                    : *std::min_element(first, stack.end());
        stack.resize(stack.size() - count);
        stack.push_back(picked);
        break;
      }
    }
  }
  return stack.back();
}

result<std::string> expression::render(const variable_values& values) const {
  if (text_variable_) {
    const auto* text = values.text(*text_variable_);
    if (text == nullptr) return error{values.unavailable_reason(*text_variable_)};
    return *text;
  }
  auto n = evaluate(values);
  if (!n) return std::move(n).take_error();
  return std::to_string(*n);
}

std::optional<variable> expression::bare_variable() const {
  if (text_variable_) return text_variable_;
  if (program_.size() == 1 && program_[0].kind == op_kind::load) return program_[0].var;
  return std::nullopt;
}

result<condition::comparison> condition::compile_one(std::string_view text,
                                                     std::string_view whole) {
  static constexpr std::array<std::string_view, 6> ops = {"==", "!=", "<=", ">=", "<", ">"};
  for (auto op : ops) {
    const auto at = text.find(op);
    if (at == std::string_view::npos) continue;
    auto lhs = expression::compile(text.substr(0, at));
    if (!lhs) return std::move(lhs).take_error();
    auto rhs = expression::compile(text.substr(at + op.size()));
    if (!rhs) return std::move(rhs).take_error();
    if (!lhs->is_integer() || !rhs->is_integer()) {
      return error{"\"" + std::string(whole) +
                   "\" compares text; conditions compare whole numbers"};
    }
    return comparison{std::move(*lhs), std::move(*rhs), std::string(op)};
  }
  return error{"\"" + std::string(whole) +
               "\" is not a comparison; write e.g. \"numNodes > 1\" (several joined by &&)"};
}

result<condition> condition::compile(std::string_view text) {
  condition out;
  std::size_t start = 0;
  while (true) {
    const auto and_at = text.find("&&", start);
    auto one = compile_one(text.substr(start, and_at - start), text);
    if (!one) return std::move(one).take_error();
    out.used_ |= one->lhs.used() | one->rhs.used();
    out.all_.push_back(std::move(*one));
    if (and_at == std::string_view::npos) return out;
    start = and_at + 2;
  }
}

result<bool> condition::evaluate(const variable_values& values) const {
  for (const auto& c : all_) {
    auto a = c.lhs.evaluate(values);
    if (!a) return std::move(a).take_error();
    auto b = c.rhs.evaluate(values);
    if (!b) return std::move(b).take_error();
    bool holds = *a > *b;
    if (c.op == "==") holds = *a == *b;
    if (c.op == "!=") holds = *a != *b;
    if (c.op == "<=") holds = *a <= *b;
    if (c.op == ">=") holds = *a >= *b;
    if (c.op == "<") holds = *a < *b;
    if (!holds) return false;  // the rest need not hold, nor be available
  }
  return true;
}

result<template_string> template_string::compile(std::string_view text) {
  template_string out;
  out.source_ = std::string(text);
  std::string literal;
  std::size_t i = 0;
  while (i < text.size()) {
    if (text.compare(i, 3, "$${") == 0) {
      literal += "${";
      i += 3;
      continue;
    }
    if (text.compare(i, 2, "${") != 0) {
      literal += text[i++];
      continue;
    }
    const auto close = text.find('}', i + 2);
    if (close == std::string_view::npos) {
      return error{"unterminated \"${\" in \"" + std::string(text) +
                   "\": write ${name}, or $${ for a literal ${"};
    }
    auto value = expression::compile(text.substr(i + 2, close - i - 2));
    if (!value) return error{value.message() + " (in \"" + std::string(text) + "\")"};
    out.used_ |= value->used();
    out.segments_.push_back({std::move(literal), std::move(*value)});
    out.has_expressions_ = true;
    literal.clear();
    i = close + 1;
  }
  if (!literal.empty() || out.segments_.empty()) out.segments_.push_back({std::move(literal), {}});
  if (!out.has_expressions_) {
    out.literal_number_ =
        parse_decimal(out.segments_.front().literal, std::numeric_limits<std::int64_t>::max());
  }
  return out;
}

bool template_string::is_integer() const {
  if (!has_expressions_) return literal_number_.has_value();
  return segments_.size() == 1 && segments_[0].literal.empty() && segments_[0].value->is_integer();
}

result<std::int64_t> template_string::evaluate(const variable_values& values) const {
  if (literal_number_) return *literal_number_;
  if (!is_integer()) return error{"\"" + source_ + "\" is not a whole number"};
  return segments_[0].value->evaluate(values);
}

result<std::string> template_string::render(const variable_values& values) const {
  std::string out;
  for (const auto& seg : segments_) {
    out += seg.literal;
    if (!seg.value) continue;
    auto rendered = seg.value->render(values);
    if (!rendered) return std::move(rendered).take_error();
    out += *rendered;
  }
  return out;
}

bool template_string::uses_once(variable v) const {
  std::size_t alone = 0;
  for (const auto& s : segments_) {
    if (!s.value || !s.value->uses(v)) continue;
    if (!s.value->is_variable(v)) return false;
    ++alone;
  }
  return alone == 1;
}

bool template_string::ends_with_variable(variable v) const {
  if (segments_.empty() || !segments_.back().value || !segments_.back().value->is_variable(v))
    return false;
  return std::none_of(segments_.begin(), segments_.end() - 1,
                      [v](const segment& s) { return s.value && s.value->uses(v); });
}

result<std::string> template_string::render_marked(const variable_values& values,
                                                   variable_mask marked, char marker) const {
  std::string out;
  for (const auto& seg : segments_) {
    out += seg.literal;
    if (!seg.value) continue;
    if (const auto bare = seg.value->bare_variable(); bare && (marked & variable_bit(*bare)) != 0) {
      out += marker;
      continue;
    }
    auto rendered = seg.value->render(values);
    if (!rendered) return std::move(rendered).take_error();
    out += *rendered;
  }
  return out;
}

result<template_json> template_json::compile(const nlohmann::json& value) {
  template_json out;
  out.value_ = value;
  std::vector<std::pair<nlohmann::json::json_pointer, std::string>> strings;
  nlohmann::json::json_pointer root;
  collect_strings(value, root, strings);
  for (auto& [at, text] : strings) {
    auto compiled = template_string::compile(text);
    if (!compiled) return std::move(compiled).take_error();
    const bool file_mode = is_file_mode_member(at);
    if (file_mode && !compiled->is_integer()) {
      return error{"\"" + at.back() + "\": \"" + text +
                   "\" must be a file mode, or one ${...} that computes one, e.g. "
                   "\"${sshKeyMode}\""};
    }
    // Escaped "$${" must be rendered too, or it would reach the pod verbatim.
    if (!compiled->is_literal() || text.find("$${") != std::string::npos) {
      out.used_ |= compiled->used();
      out.templated_strings_.push_back({at, std::move(*compiled), file_mode});
    }
  }
  return out;
}

bool template_json::is_file_mode_member(const nlohmann::json::json_pointer& at) {
  return !at.empty() && (at.back() == "mode" || at.back() == "defaultMode");
}

result<nlohmann::json> template_json::render(const variable_values& values) const {
  nlohmann::json out = value_;
  for (const auto& [at, text, file_mode] : templated_strings_) {
    if (file_mode) {
      auto mode = text.evaluate(values);
      if (!mode) return std::move(mode).take_error();
      if (*mode < 0 || *mode > 0777) {
        return error{"trainenv: " + at.back() + " \"" + text.source() + "\" is " +
                     std::to_string(*mode) + "; expected a file mode from 0 to 0777"};
      }
      out[at] = *mode;
      continue;
    }
    auto rendered = text.render(values);
    if (!rendered) return std::move(rendered).take_error();
    out[at] = std::move(*rendered);
  }
  return out;
}

}  // namespace trainenv::core
