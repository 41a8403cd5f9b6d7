// The table a CUDA backend's op profile appends to PTDP_OP_PROFILE (op_profile.h), read back for
// tests: per op, the sums over every row that names it (one row per backend).
#pragma once
#include <map>
#include <string>

#include "core/results/csv_reader.h"

namespace ptdp::testing {

struct OpProfileRow {
  long calls = 0;
  double ms = 0, gflop = 0, gbyte = 0;
  int rows = 0;  // how many rows named the op
};

inline std::map<std::string, OpProfileRow> read_op_profile(const std::string& path) {
  const CsvTable t = CsvTable::read(path, {"op", "calls", "total_ms", "gflop", "gbyte"});
  std::map<std::string, OpProfileRow> out;
  for (size_t i = 0; i < t.size(); ++i) {
    OpProfileRow& r = out[t.text(i, "op")];
    r.calls += long(t.number(i, "calls"));
    r.ms += t.number(i, "total_ms");
    r.gflop += t.number(i, "gflop");
    r.gbyte += t.number(i, "gbyte");
    r.rows += 1;
  }
  return out;
}

}  // namespace ptdp::testing
