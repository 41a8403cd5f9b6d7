// Every field of a RunConfig as (flag, value text), in a fixed order, values printed exactly
// (doubles to 17 significant digits): what the ranks of an MPI job compare at start, since each
// process parses its own command line (an MPMD launch can give ranks different flags).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/config/run_config.h"

namespace ptdp {

std::vector<std::pair<std::string, std::string>> run_config_fields(const RunConfig& c);

}  // namespace ptdp
