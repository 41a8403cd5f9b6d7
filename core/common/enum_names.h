// An enumeration's names, declared once beside it (a specialisation of EnumNames), and what
// follows from them: parsing with one error naming the flag and the choices, printing (fmt), lists.
#pragma once
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "core/common/error.h"

namespace ptdp {

// Specialise with `static constexpr std::array values{std::pair{E::X, std::string_view("x")}, ...};`
template <class E>
struct EnumNames;

template <class E>
concept NamedEnum = std::is_enum_v<E> && requires { EnumNames<E>::values; };

template <NamedEnum E>
constexpr std::string_view enum_name(E e) {
  for (const auto& [v, n] : EnumNames<E>::values)
    if (v == e) return n;
  return "?";
}

template <NamedEnum E>
constexpr std::optional<E> find_enum(std::string_view text) {
  for (const auto& [v, n] : EnumNames<E>::values)
    if (n == text) return v;
  return std::nullopt;
}

// "a, b or c"; with `bar` "a | b | c" (as help texts list choices).
template <NamedEnum E>
std::string enum_choices(bool bar = false) {
  std::string s;
  const auto& vs = EnumNames<E>::values;
  for (size_t i = 0; i < vs.size(); ++i)
    s.append(i == 0 ? "" : bar ? " | " : (i + 1 == vs.size() ? " or " : ", ")).append(vs[i].second);
  return s;
}

// UsageError "FLAG 'text' must be a, b or c".
template <NamedEnum E>
E parse_enum(std::string_view text, std::string_view flag) {
  if (const auto v = find_enum<E>(text)) return *v;
  usage_error("{} '{}' must be {}", flag, text, enum_choices<E>());
}

}  // namespace ptdp

template <ptdp::NamedEnum E>
struct fmt::formatter<E> : fmt::formatter<std::string_view> {
  template <class Context>
  auto format(E e, Context& ctx) const {
    return fmt::formatter<std::string_view>::format(ptdp::enum_name(e), ctx);
  }
};
