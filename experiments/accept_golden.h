// The golden losses of `ptdp accept`'s train check (docs/ACCEPTANCE.md, "Golden losses"): the
// file (results/golden/*.csv, its flags as columns), the run it describes trained again in this
// process, and the check of those losses against the file's.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "experiments/accept_profile.h"

namespace ptdp {

// The run a golden file describes (its columns), and its losses by iteration.
struct GoldenRun {
  std::string model = "tiny", data = "synthetic";
  int micro_batch = 4, global_batch = 8, omp_threads = 1;
  uint64_t seed = 1234;
  double lr = 1e-3;
  std::vector<double> losses;  // iteration 1..n
};

// The file's rows, every rule it breaks a UsageError naming the file and the line.
GoldenRun read_golden(const std::string& path);
void write_golden(const std::string& path, const GoldenRun& g);

// Trains `g.model` through core/train/run.h as `ptdp train --model M
// --micro-batch b --global-batch B --seed S --lr X --iters N` does (one rank, synthetic data, f32)
// and returns its losses; on the CUDA backend (the first checked GPU) with `on_gpu`, as
// `--backend cuda` does.
std::vector<double> train_losses(const GoldenRun& g, int iters, bool on_gpu);

// The golden losses a profile's train check compares with, and its tolerance: the profile's
// file; for a GPU profile whose file does not exist yet, its CPU file and looser tolerance.
struct GoldenSource {
  std::string path, name;  // resolved, and as the profile writes it
  Threshold tolerance;
};
GoldenSource golden_source(const AcceptProfile& p);

// The train check: `got` (losses of g's run on `where`) against g's, the worst relative error at most
// the tolerance.
Check train_check(const AcceptProfile& p, const GoldenRun& g, const GoldenSource& src, const std::vector<double>& got,
                  const std::string& where);

}  // namespace ptdp
