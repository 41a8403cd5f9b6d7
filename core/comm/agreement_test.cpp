// agree() and require_same_fields() on local ranks: every rank ends with the same error, naming
// the failing rank and its cause; nothing is thrown when no rank fails or all fields agree.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>

#include "core/comm/agreement.h"
#include "core/comm/local/local_comm.h"
#include "core/common/error.h"

namespace ptdp {
namespace {

// What each of n ranks caught from body(rank, comm): the AgreedError text, or "" for none.
struct Caught {
  std::vector<std::string> what;
  std::vector<int> failing;
  std::vector<int> usage;
};

Caught run(int n, const std::function<void(int, Communicator&)>& body) {
  Caught c{std::vector<std::string>(n), std::vector<int>(n, -1), std::vector<int>(n, -1)};
  run_local_ranks(n, [&](int r, Communicator& comm) {
    try {
      body(r, comm);
    } catch (const AgreedError& e) {
      c.what[r] = e.what();
      c.failing[r] = e.failing_rank();
      c.usage[r] = e.usage();
    }
  });
  return c;
}

TEST(Agreement, NoFailureReturnsOnEveryRank) {
  std::atomic<int> ran{0};
  Caught c = run(4, [&](int, Communicator& w) { agree(w, [&] { ++ran; }); });
  EXPECT_EQ(ran.load(), 4);
  for (const auto& w : c.what) EXPECT_EQ(w, "");
}

TEST(Agreement, OneFailingRankEndsEveryRankWithItsCause) {
  Caught c = run(4, [](int r, Communicator& w) {
    agree(w, [&] {
      if (r == 2) usage_error("--load x: shard y is missing");
    });
  });
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(c.what[r], "--load x: shard y is missing (rank 2 of 4)") << r;
    EXPECT_EQ(c.failing[r], 2);
    EXPECT_EQ(c.usage[r], 1);
  }
}

TEST(Agreement, TheFirstOfSeveralFailingRanksIsReportedAndTheOthersListed) {
  Caught c = run(4, [](int r, Communicator& w) {
    agree(w, [&] {
      if (r == 3) throw RuntimeError("disk full on rank 3");
      if (r == 1) throw RuntimeError("disk full on rank 1");
    });
  });
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(c.what[r], "disk full on rank 1 (ranks 1, 3 of 4)") << r;
    EXPECT_EQ(c.usage[r], 0);
  }
  Caught all = run(3, [](int, Communicator& w) { agree(w, [] { usage_error("--save d: not a directory"); }); });
  for (const auto& w : all.what) EXPECT_EQ(w, "--save d: not a directory (on all 3 ranks)");
}

TEST(Agreement, AFailureAlreadyCaughtIsAgreedOn) {
  Caught c = run(2, [](int r, Communicator& w) {
    std::exception_ptr e;
    if (r == 1) e = std::make_exception_ptr(std::runtime_error("x"));
    agree_on(w, e);
  });
  EXPECT_EQ(c.what[0], "x (rank 1 of 2)");
  EXPECT_EQ(c.what[1], "x (rank 1 of 2)");
}

TEST(Agreement, LongMessagesAreCutNotLost) {
  Caught c = run(2, [](int r, Communicator& w) {
    agree(w, [&] {
      if (r == 1) throw RuntimeError(std::string(10000, 'm'));
    });
  });
  EXPECT_EQ(c.what[0].substr(0, 4000), std::string(4000, 'm'));
  EXPECT_EQ(c.what[0], c.what[1]);
}

TEST(Agreement, SameFieldsPass) {
  Caught c = run(3, [](int, Communicator& w) {
    require_same_fields(w, {{"--hidden", "64"}, {"--seed", "1"}}, "hint");
  });
  for (const auto& w : c.what) EXPECT_EQ(w, "");
}

TEST(Agreement, DifferingFieldsNameTheFieldTheRanksAndTheValues) {
  Caught c = run(4, [](int r, Communicator& w) {
    require_same_fields(w,
                        {{"--hidden", r >= 2 ? "128" : "64"}, {"--iters", "5"}, {"--seed", r == 3 ? "9" : "1"}},
                        "start every rank with the same flags");
  });
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(c.what[r],
              "the ranks of this job disagree on --hidden: rank 0 has '64', rank 2 has '128' (ranks 2, 3 differ from "
              "rank 0); they differ on --seed too; start every rank with the same flags")
        << r;
    EXPECT_EQ(c.failing[r], 2);
    EXPECT_EQ(c.usage[r], 1);
  }
}

TEST(Agreement, ADifferentNumberOfFieldsIsADifferentBuild) {
  Caught c = run(2, [](int r, Communicator& w) {
    std::vector<std::pair<std::string, std::string>> f{{"--hidden", "64"}};
    if (r == 1) f.emplace_back("--zero", "0");
    require_same_fields(w, f, "hint");
  });
  EXPECT_NE(c.what[0].find("different ptdp builds"), std::string::npos) << c.what[0];
  EXPECT_EQ(c.what[0], c.what[1]);
}

TEST(Agreement, Fnv1a64MatchesTheReferenceVectors) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
}

}  // namespace
}  // namespace ptdp
