// agree() and require_same_fields() between MPI processes (run by ptdp_mpi_tests under mpirun):
// a failure of the last rank reaches every rank at once, with its cause, though the world's
// timeout is 300 s.
#include <gtest/gtest.h>

#include <chrono>

#include <fmt/format.h>

#include "core/comm/agreement.h"
#include "core/common/error.h"

namespace ptdp {
Communicator& mpi_test_world();  // mpi_comm_mpitest.cpp
namespace {

TEST(MpiAgreement, TheLastRanksFailureEndsEveryRankAtOnceWithItsCause) {
  Communicator& w = mpi_test_world();
  const int n = w.size(), last = n - 1;
  const auto t0 = std::chrono::steady_clock::now();
  std::string what;
  int failing = -1;
  try {
    agree(w, [&] {
      if (w.rank() == last) usage_error("--load ck: shard of rank {} is missing", last);
    });
  } catch (const AgreedError& e) {
    what = e.what();
    failing = e.failing_rank();
    EXPECT_TRUE(e.usage());
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(failing, n > 1 ? last : 0);
  EXPECT_EQ(what, n > 1 ? fmt::format("--load ck: shard of rank {} is missing (rank {} of {})", last, last, n)
                        : fmt::format("--load ck: shard of rank 0 is missing"));
  agree(w, [] {});  // the world is usable afterwards; nothing fails
}

TEST(MpiAgreement, AFieldThatDiffersOnOneRankIsNamedOnEveryRank) {
  Communicator& w = mpi_test_world();
  if (w.size() < 2) GTEST_SKIP() << "needs 2 processes";
  const int last = w.size() - 1;
  std::string what;
  try {
    require_same_fields(w, {{"--hidden", w.rank() == last ? "128" : "64"}, {"--seed", "1"}}, "same flags");
  } catch (const AgreedError& e) {
    what = e.what();
  }
  EXPECT_EQ(what, fmt::format("the ranks of this job disagree on --hidden: rank 0 has '64', rank {} has '128'; same flags",
                              last));
  require_same_fields(w, {{"--hidden", "64"}}, "same flags");  // equal: returns
}

}  // namespace
}  // namespace ptdp
