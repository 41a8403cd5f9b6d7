// Test helper for checkpoint resumption through the ptdp command line: one run of `iters`
// iterations saving every `at` into DIR/ck, the checkpoint pointer set back to iteration `at`,
// and the same run resumed from it to `iters`, each writing its --loss-log.
#pragma once
#include <string>
#include <vector>

#include "experiments/testing/cli_runner.h"

namespace ptdp::testing {

struct ResumedRun {
  CliResult whole, rest;          // the uninterrupted run and the resumed one
  std::string whole_log, rest_log;  // their --loss-log files
};

// `train(extra)` runs ptdp with the run's own arguments and `extra` (the iteration, checkpoint and
// loss-log flags this adds).
template <class Train>
ResumedRun run_then_resume(const TempDir& dir, Train&& train, int iters, int at) {
  ResumedRun r;
  r.whole_log = dir.file("whole.csv");
  r.rest_log = dir.file("rest.csv");
  const std::string n = std::to_string(iters), k = std::to_string(at);
  r.whole = train(std::vector<std::string>{"--iters", n, "--save", dir.file("ck"), "--save-interval", k,
                                           "--loss-log", r.whole_log});
  if (r.whole.exit_code != 0) return r;
  const std::string pointer = k + "\n";
  write_file(dir.file("ck/latest_checkpointed_iteration.txt"), std::vector<uint8_t>(pointer.begin(), pointer.end()));
  r.rest = train(std::vector<std::string>{"--iters", n, "--load", dir.file("ck"), "--loss-log", r.rest_log});
  return r;
}

}  // namespace ptdp::testing
