// One strict rule for every numeric flag of every command: an empty value, a number out of the
// 64-bit range, or text that is not a number is refused naming the flag (CLI11 alone reads ''
// as 0 and saturates an overflowing integer).
#pragma once
#include <string>

#include <CLI/CLI.hpp>

namespace ptdp {

// "" when `text` is acceptable for an option of CLI11 type `type` (INT, UINT, FLOAT, ...), else
// the reason.
std::string strict_number_error(const std::string& text, const std::string& type);

// Adds the check to every numeric option of `app` and of its subcommands, recursively.
void require_strict_numbers(CLI::App& app);

}  // namespace ptdp
