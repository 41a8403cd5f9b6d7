// "Did you mean": the option names of a command closest to a flag it does not have (a typo, or
// another tool's name for it), for the one-line error of an unknown flag.
#pragma once
#include <string>

#include <CLI/CLI.hpp>

namespace ptdp {

// "; did you mean --tp?" (or "--a or --b") for the options of `cmd` within a small edit distance
// of `flag` (its "=value" ignored), or "" when none is close.
std::string did_you_mean(const CLI::App& cmd, const std::string& flag);

}  // namespace ptdp
