#include "core/config/field.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <type_traits>

#include <fmt/format.h>

#include "core/common/error.h"
#include "core/common/one_line.h"

namespace ptdp {

namespace {

template <class F>
decltype(auto) visit_member(const FieldAccess& a, F&& f) {
  return std::visit(std::forward<F>(f), a);
}

// The value as exact text: integers in decimal, doubles to 17 significant digits, bools true|false.
template <class T>
std::string exact_text(const T& v) {
  if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
  else if constexpr (std::is_same_v<T, double>) return fmt::format("{:.17g}", v);
  else if constexpr (std::is_integral_v<T>) return std::to_string(v);
  else if constexpr (std::is_same_v<T, std::string>) return v;
  else return std::string(enum_name(v));
}

template <class T>
T parse_number(const std::string& text, const std::string& flag) {
  T v{};
  const char* end = text.data() + text.size();
  const auto r = std::from_chars(text.data(), end, v);
  if (text.empty() || r.ec != std::errc() || r.ptr != end)
    usage_error("{} '{}' must be {}", flag, one_line(text), std::is_integral_v<T> ? "a whole number" : "a number");
  return v;
}

}  // namespace

Field& Field::flags(std::string names) {
  flag_.clear();
  aliases_.clear();
  size_t start = 0;
  for (;;) {
    const size_t comma = names.find(',', start);
    std::string n = names.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    (flag_.empty() ? flag_ : aliases_.emplace_back()) = std::move(n);
    if (comma == std::string::npos) return *this;
    start = comma + 1;
  }
}

Field& Field::help(std::string text) {
  help_ = std::move(text);
  return *this;
}
Field& Field::no_default_in_help() {
  default_in_help_ = false;
  return *this;
}
Field& Field::negation(std::string flag) {
  negation_ = std::move(flag);
  return *this;
}
Field& Field::alias_flag(std::string flag, std::string value, std::string help) {
  alias_flags_.push_back({std::move(flag), std::move(value), std::move(help)});
  return *this;
}
Field& Field::bound_by_hand() {
  by_hand_ = true;
  return *this;
}
Field& Field::unset_is(std::string value) {
  unset_ = std::move(value);
  return *this;
}
Field& Field::rule(FieldRule r) {
  rules_.push_back(std::move(r));
  return *this;
}
Field& Field::positive(std::string note) {
  return rule({.lo = 0.0, .lo_open = true, .must = "must be positive" + note});
}
Field& Field::non_negative(std::string note) { return rule({.lo = 0.0, .must = "must not be negative" + note}); }
Field& Field::at_least(double v) { return rule({.lo = v, .must = fmt::format("must be at least {}", v)}); }
Field& Field::at_most(double v, std::string must) {
  return rule({.hi = v, .must = must.empty() ? fmt::format("must be at most {}", v) : std::move(must)});
}
Field& Field::finite() { return rule({.finite = true, .must = "must be a finite number"}); }
Field& Field::one_of(std::vector<double> values, std::string must) {
  return rule({.one_of = std::move(values), .must = std::move(must)});
}
Field& Field::column(RowUse use) {
  row_use_ = use;
  return *this;
}
Field& Field::column_text(std::function<std::string(const RunConfig&)> text) {
  column_text_ = std::move(text);
  return *this;
}
Field& Field::key(std::string old_default) {
  in_key_ = true;
  key_default_ = std::move(old_default);
  return *this;
}
Field& Field::not_key(std::string why) {
  not_key_ = std::move(why);
  return *this;
}
Field& Field::in_specs() {
  in_specs_ = true;
  return *this;
}
Field& Field::checkpoint(std::function<std::optional<std::string>(const RunConfig&)> text, std::string label) {
  checkpoint_ = true;
  checkpoint_text_ = std::move(text);
  checkpoint_label_ = std::move(label);
  return *this;
}

Field& Field::resume_check(ResumeCheck check) {
  resume_check_ = check;
  return *this;
}

std::optional<std::string> Field::checkpoint_text(const RunConfig& c) const {
  if (!checkpoint_) return std::nullopt;
  if (checkpoint_text_) return checkpoint_text_(c);
  // Numbers in their shortest exact form ("1e-05"), as a refusal prints them.
  return visit_member(access_, [&](const auto& m) { return fmt::format("{}", m.get(c)); });
}

std::string Field::flag_names() const {
  std::string s = flag_;
  for (const auto& a : aliases_) s += "," + a;
  return s;
}

std::string Field::type_name() const {
  return visit_member(access_, [](const auto& m) -> std::string {
    using T = typename std::decay_t<decltype(m)>::Type;
    if constexpr (std::is_same_v<T, bool>) return "bool";
    else if constexpr (std::is_same_v<T, int>) return "int";
    else if constexpr (std::is_same_v<T, int64_t>) return "int64";
    else if constexpr (std::is_same_v<T, uint64_t>) return "uint64";
    else if constexpr (std::is_same_v<T, double>) return "number";
    else if constexpr (std::is_same_v<T, std::string>) return "text";
    else return "choice";
  });
}

std::vector<std::string> Field::choices() const {
  return visit_member(access_, [](const auto& m) {
    using T = typename std::decay_t<decltype(m)>::Type;
    std::vector<std::string> names;
    if constexpr (NamedEnum<T>)
      for (const auto& [v, n] : EnumNames<T>::values) names.emplace_back(n);
    return names;
  });
}

std::string Field::text(const RunConfig& c) const {
  return visit_member(access_, [&](const auto& m) { return exact_text(m.get(c)); });
}

void Field::set_text(RunConfig& c, const std::string& text) const {
  visit_member(access_, [&](const auto& m) {
    using T = typename std::decay_t<decltype(m)>::Type;
    if constexpr (std::is_same_v<T, bool>) {
      if (text != "true" && text != "false") usage_error("{} '{}' must be true or false", flag(), one_line(text));
      m.ref(c) = text == "true";
    } else if constexpr (std::is_arithmetic_v<T>) {
      m.ref(c) = parse_number<T>(text, flag());
    } else if constexpr (std::is_same_v<T, std::string>) {
      m.ref(c) = text;
    } else {
      m.ref(c) = parse_enum<T>(text, flag());
    }
  });
}

void Field::copy(const RunConfig& from, RunConfig& to) const {
  visit_member(access_, [&](const auto& m) { m.ref(to) = m.get(from); });
}

std::string Field::cell(const RunConfig& c) const {
  if (column_text_) return column_text_(c);
  return visit_member(access_, [&](const auto& m) -> std::string {
    using T = typename std::decay_t<decltype(m)>::Type;
    const T& v = m.get(c);
    if constexpr (std::is_same_v<T, bool>) return v ? "1" : "0";
    else if constexpr (std::is_same_v<T, double>) return fmt::format("{:.6g}", v);
    else return exact_text(v);
  });
}

const FieldRule* Field::broken_rule(const RunConfig& c) const {
  return visit_member(access_, [&](const auto& m) -> const FieldRule* {
    using T = typename std::decay_t<decltype(m)>::Type;
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      const double x = static_cast<double>(m.get(c));
      for (const FieldRule& r : rules_) {
        const bool broken = (r.finite && !std::isfinite(x)) || (r.lo && !(r.lo_open ? x > *r.lo : x >= *r.lo)) ||
                            (r.hi && !(r.hi_open ? x < *r.hi : x <= *r.hi)) ||
                            (!r.one_of.empty() && std::find(r.one_of.begin(), r.one_of.end(), x) == r.one_of.end());
        if (broken) return &r;
      }
    }
    return nullptr;
  });
}

void Field::check(const RunConfig& c) const {
  if (const FieldRule* r = broken_rule(c)) {
    const std::string value = visit_member(access_, [&](const auto& m) { return fmt::format("{}", m.get(c)); });
    usage_error("{} {} {}", flag(), value, r->must);
  }
}

}  // namespace ptdp
