// The ranks of a job compare the content of the data they read: a copy of --data that differs on
// one rank (the same size, other content) ends every rank naming the dataset and the rank.
#include "core/train/run_data.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/comm/agreement.h"
#include "core/comm/local/local_comm.h"

namespace ptdp {
namespace {

TEST(RunData, RanksReadingDifferentCopiesOfADatasetAreRefusedNamingTheRankAndTheFile) {
  std::vector<std::string> what(3);
  run_local_ranks(3, [&](int r, Communicator& w) {
    try {
      require_same_data(w, {{"data/a", std::string(64, 'a')}, {"data/b", std::string(64, r == 2 ? 'c' : 'b')}});
    } catch (const AgreedError& e) {
      what[r] = e.what();
    }
  });
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(what[r],
              "the ranks of this job disagree on the content of --data data/b (data/b.idx and data/b.bin): rank 0 has "
              "'SHA-256 bbbbbbbbbbbbbbbb', rank 2 has 'SHA-256 cccccccccccccccc'; every rank must read the same "
              "dataset: the copy of the ranks that differ is another file (copy it again)")
        << r;
}

TEST(RunData, RanksReadingTheSameDataGoOn) {
  run_local_ranks(2, [&](int, Communicator& w) { require_same_data(w, {{"data/a", std::string(64, 'a')}}); });
}

}  // namespace
}  // namespace ptdp
