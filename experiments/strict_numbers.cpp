#include "experiments/strict_numbers.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace ptdp {

namespace {
bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }
}  // namespace

std::string strict_number_error(const std::string& text, const std::string& type) {
  const bool is_int = starts_with(type, "INT"), is_uint = starts_with(type, "UINT");
  const bool is_float = starts_with(type, "FLOAT") || starts_with(type, "NUMBER");
  if (!is_int && !is_uint && !is_float) return "";
  if (text.empty()) return "needs a number, not an empty value";
  if (is_int || is_uint) {
    const char* b = text.data() + (text[0] == '+' ? 1 : 0);
    const char* e = text.data() + text.size();
    std::from_chars_result r{};
    if (is_uint) {
      uint64_t v = 0;
      r = std::from_chars(b, e, v);
    } else {
      int64_t v = 0;
      r = std::from_chars(b, e, v);
    }
    if (r.ec == std::errc::result_out_of_range) return "'" + text + "' is out of the 64-bit range";
    if (r.ec == std::errc() && r.ptr == e) return "";
    // Scientific notation of a whole number ("2e9") is accepted when it is one and in range.
  }
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0') return "'" + text + "' is not a number";
  if (errno == ERANGE && std::isinf(v)) return "'" + text + "' is out of range";
  if (is_int || is_uint) {
    if (std::isnan(v) || v != std::floor(v)) return "'" + text + "' is not a whole number";
    if (!(v >= (is_uint ? 0.0 : -9.2233720368547758e18) && v < 9.2233720368547758e18))
      return "'" + text + "' is out of the 64-bit range";
  }
  return "";
}

void require_strict_numbers(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    const std::string type = opt->get_type_name();
    if (strict_number_error("0", type).empty() && !strict_number_error("", type).empty())  // numeric
      opt->check(CLI::Validator(
          [type](std::string& text) { return strict_number_error(text, type); }, "", "strict number"));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) require_strict_numbers(*sub);
}

}  // namespace ptdp
