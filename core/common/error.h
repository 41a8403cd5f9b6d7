// Errors: UsageError (bad flags, configs or input files: one line, exit code 2) and
// PTDP_CHECK for internal invariants (names the condition, file and line).
#pragma once
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace ptdp {

// Bad user input. The message names the flag or file and the rule it broke.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A failure that is not the user's input (I/O error, broken invariant, library error).
class RuntimeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <class... Args>
[[noreturn]] void usage_error(fmt::format_string<Args...> f, Args&&... args) {
  throw UsageError(fmt::format(f, std::forward<Args>(args)...));
}

[[noreturn]] void check_failed(const char* cond, const char* file, int line, const std::string& msg);

}  // namespace ptdp

#define PTDP_CHECK(cond, ...)                                                        \
  do {                                                                               \
    if (!(cond)) ::ptdp::check_failed(#cond, __FILE__, __LINE__, fmt::format("" __VA_ARGS__)); \
  } while (0)
