// NCCL communicator management: ncclCommSplit, init errors (duplicate devices, bad arguments),
// use after ncclCommAbort/Destroy, unknown handles, ncclCommDestroy with operations in flight.
#include <cstdlib>
#include <future>
#include <vector>

#include "nccl/nccl_test_util.h"

namespace {

using namespace nccl_test;

TEST(NcclComm, SplitFormsOneCommunicatorPerColourOrderedByKey) {
  Watchdog watchdog;
  const int n = 4;
  with_ranks(n, [&](Rank& k) {
    // Colours 0 (ranks 0, 2) and 1 (ranks 1, 3); keys reverse the order within each colour.
    ncclComm_t sub = nullptr;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;  // accepted (and ignored), as NULL is
    ASSERT_EQ(ncclCommSplit(k.comm, k.rank % 2, -k.rank, &sub, k.rank == 0 ? &config : nullptr), ncclSuccess);
    ASSERT_NE(sub, nullptr);
    int rank = -1, count = -1, dev = -1;
    EXPECT_EQ(ncclCommUserRank(sub, &rank), ncclSuccess);
    EXPECT_EQ(ncclCommCount(sub, &count), ncclSuccess);
    EXPECT_EQ(ncclCommCuDevice(sub, &dev), ncclSuccess);
    EXPECT_EQ(count, 2);
    EXPECT_EQ(rank, k.rank < 2 ? 1 : 0);
    EXPECT_EQ(dev, k.device);
    // The new communicator works and spans exactly its colour.
    int32_t* x = device_copy(std::vector<int32_t>{1 << k.rank});
    ASSERT_EQ(ncclAllReduce(x, x, 1, ncclInt32, ncclSum, sub, k.stream), ncclSuccess);
    ASSERT_EQ(cudaStreamSynchronize(k.stream), cudaSuccess);
    EXPECT_EQ(host_copy(x, 1)[0], k.rank % 2 == 0 ? (1 | 4) : (2 | 8));
    EXPECT_EQ(ncclCommDestroy(sub), ncclSuccess);

    // NCCL_SPLIT_NOCOLOR: rank 3 joins nothing and gets NULL.
    ncclComm_t sub2 = reinterpret_cast<ncclComm_t>(0x1);
    ASSERT_EQ(ncclCommSplit(k.comm, k.rank == 3 ? NCCL_SPLIT_NOCOLOR : 5, 0, &sub2, nullptr), ncclSuccess);
    if (k.rank == 3) {
      EXPECT_EQ(sub2, nullptr);
    } else {
      ASSERT_NE(sub2, nullptr);
      EXPECT_EQ(ncclCommCount(sub2, &count), ncclSuccess);
      EXPECT_EQ(count, 3);
      EXPECT_EQ(ncclCommUserRank(sub2, &rank), ncclSuccess);
      EXPECT_EQ(rank, k.rank);  // equal keys keep the parent's order
      EXPECT_EQ(ncclCommDestroy(sub2), ncclSuccess);
    }
    cudaFree(x);
  });
}

TEST(NcclComm, TwoRanksOnOneDeviceAreInvalidUsage) {
  Watchdog watchdog;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<ncclResult_t> result(2, ncclSuccess);
  std::vector<std::string> text(2);
  std::vector<ncclComm_t> comm(2, reinterpret_cast<ncclComm_t>(0x1));
  on_threads(2, [&](int r) {
    cudaSetDevice(0);  // both ranks on device 0
    result[size_t(r)] = ncclCommInitRank(&comm[size_t(r)], 2, id, r);
    text[size_t(r)] = ncclGetLastError(nullptr);
  });
  EXPECT_EQ(result[0], ncclInvalidUsage);
  EXPECT_EQ(result[1], ncclInvalidUsage);
  EXPECT_EQ(text[1], "Duplicate GPU detected: rank 1 and rank 0 both on CUDA device 0");
  EXPECT_EQ(text[0], "Duplicate GPU detected: rank 0 and rank 1 both on CUDA device 0");
  EXPECT_EQ(comm[0], nullptr);
  EXPECT_EQ(comm[1], nullptr);

  std::vector<ncclComm_t> all(3);
  const int devs[] = {0, 2, 2};
  EXPECT_EQ(ncclCommInitAll(all.data(), 3, devs), ncclInvalidUsage);
  EXPECT_NE(
      std::string(ncclGetLastError(nullptr)).find("Duplicate GPU detected: rank 1 and rank 2 both on CUDA device 2"),
      std::string::npos);
}

TEST(NcclComm, BadRankOrRankCountIsInvalidArgument) {
  Watchdog watchdog;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t c = nullptr;
  EXPECT_EQ(ncclCommInitRank(&c, 0, id, 0), ncclInvalidArgument);
  EXPECT_EQ(ncclCommInitRank(&c, 2, id, 2), ncclInvalidArgument);
  EXPECT_EQ(ncclCommInitRank(&c, 2, id, -1), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("rank -1"), std::string::npos);
  EXPECT_EQ(ncclCommInitAll(&c, 0, nullptr), ncclInvalidArgument);
  const int bad[] = {0, 1000};
  std::vector<ncclComm_t> two(2);
  EXPECT_EQ(ncclCommInitAll(two.data(), 2, bad), ncclInvalidArgument);
}

TEST(NcclComm, OneRankCommunicatorFromInitRank) {
  Watchdog watchdog;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t c = nullptr;
  ASSERT_EQ(ncclCommInitRank(&c, 1, id, 0), ncclSuccess);
  float* x = device_copy(std::vector<float>{4, 5});
  float* y = device_copy(std::vector<float>{0, 0});
  ASSERT_EQ(ncclAllGather(x, y, 2, ncclFloat32, c, nullptr), ncclSuccess);
  EXPECT_EQ(host_copy(y, 2), (std::vector<float>{4, 5}));
  EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
  cudaFree(x);
  cudaFree(y);
}

// NCCL: ncclCommInitRank "must be called by different threads/processes or used within
// ncclGroupStart/ncclGroupEnd": one thread makes both ranks inside a group.
TEST(NcclComm, OneThreadInitialisesSeveralRanksInsideAGroup) {
  Watchdog watchdog;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t c[2] = {nullptr, nullptr};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(cudaSetDevice(r + 2), cudaSuccess);
    ASSERT_EQ(ncclCommInitRank(&c[r], 2, id, r), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  cudaSetDevice(0);
  for (int r = 0; r < 2; ++r) {
    ASSERT_NE(c[r], nullptr);
    int rank = -1, dev = -1;
    EXPECT_EQ(ncclCommUserRank(c[r], &rank), ncclSuccess);
    EXPECT_EQ(ncclCommCuDevice(c[r], &dev), ncclSuccess);
    EXPECT_EQ(rank, r);
    EXPECT_EQ(dev, r + 2);
    EXPECT_EQ(ncclCommDestroy(c[r]), ncclSuccess);
  }
}

TEST(NcclComm, EveryUseAfterAbortIsReported) {
  Watchdog watchdog;
  ncclComm_t c = nullptr;
  const int dev = 0;
  ASSERT_EQ(ncclCommInitAll(&c, 1, &dev), ncclSuccess);
  ASSERT_EQ(ncclCommAbort(c), ncclSuccess);
  float* x = device_copy(std::vector<float>{1});
  vgpu::CaptureViolations cap;
  int count = 0;
  ncclResult_t async = ncclSuccess;
  EXPECT_EQ(ncclCommCount(c, &count), ncclInvalidArgument);
  EXPECT_EQ(ncclCommGetAsyncError(c, &async), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(x, x, 1, ncclFloat32, ncclSum, c, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommDestroy(c), ncclInvalidArgument);
  EXPECT_EQ(ncclCommAbort(c), ncclInvalidArgument);
  const auto m = cap.messages();
  ASSERT_EQ(m.size(), 5u) << joined(m);
  EXPECT_TRUE(any_contains(m, {"use after free", "ncclCommCount on a communicator freed by ncclCommAbort at "}));
  EXPECT_TRUE(any_contains(m, {"ncclCommGetAsyncError on a communicator freed by ncclCommAbort"}));
  EXPECT_TRUE(any_contains(m, {"ncclAllReduce on a communicator freed by ncclCommAbort"}));
  EXPECT_TRUE(any_contains(m, {"ncclCommDestroy on a communicator freed by ncclCommAbort"}));
  EXPECT_TRUE(any_contains(m, {"ncclCommAbort on a communicator freed by ncclCommAbort"}));
  cudaFree(x);
}

TEST(NcclComm, UseAfterDestroyAndUnknownHandlesAreReported) {
  Watchdog watchdog;
  ncclComm_t c = nullptr;
  const int dev = 1;
  ASSERT_EQ(ncclCommInitAll(&c, 1, &dev), ncclSuccess);
  ASSERT_EQ(ncclCommDestroy(c), ncclSuccess);
  vgpu::CaptureViolations cap;
  int rank = -1;
  EXPECT_EQ(ncclCommUserRank(c, &rank), ncclInvalidArgument);
  int not_a_comm = 0;
  EXPECT_EQ(ncclCommUserRank(reinterpret_cast<ncclComm_t>(&not_a_comm), &rank), ncclInvalidArgument);
  EXPECT_EQ(ncclCommUserRank(nullptr, &rank), ncclInvalidArgument);  // an API error, no violation
  const auto m = cap.messages();
  ASSERT_EQ(m.size(), 2u) << joined(m);
  EXPECT_TRUE(any_contains(m, {"use after free", "ncclCommUserRank on a communicator freed by ncclCommDestroy"}));
  EXPECT_TRUE(any_contains(m, {"invalid handle", "which no ncclCommInitRank"}));
  EXPECT_EQ(ncclCommAbort(nullptr), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(nullptr), ncclSuccess);
}

TEST(NcclComm, DestroyWaitsForOperationsThatStillComplete) {
  Watchdog watchdog;
  std::vector<ncclComm_t> comms(2);
  const int devs[] = {0, 1};
  ASSERT_EQ(ncclCommInitAll(comms.data(), 2, devs), ncclSuccess);
  std::vector<float*> x(2);
  for (int r = 0; r < 2; ++r) {
    cudaSetDevice(r);
    x[size_t(r)] = device_copy(std::vector<float>{float(r + 1)});
  }
  cudaSetDevice(0);
  ASSERT_EQ(ncclAllReduce(x[0], x[0], 1, ncclFloat32, ncclSum, comms[0], nullptr), ncclSuccess);
  // Rank 1 arrives while rank 0 already waits in ncclCommDestroy.
  auto late = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(50ms);
    cudaSetDevice(1);
    EXPECT_EQ(ncclAllReduce(x[1], x[1], 1, ncclFloat32, ncclSum, comms[1], nullptr), ncclSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  });
  setenv("VGPU_NCCL_DESTROY_GRACE_S", "30", 1);
  EXPECT_EQ(ncclCommDestroy(comms[0]), ncclSuccess);
  unsetenv("VGPU_NCCL_DESTROY_GRACE_S");
  ASSERT_EQ(late.wait_for(30s), std::future_status::ready);
  EXPECT_EQ(host_copy(x[0], 1)[0], 3.0f);
  EXPECT_EQ(ncclCommDestroy(comms[1]), ncclSuccess);
  cudaFree(x[0]);
  cudaFree(x[1]);
}

TEST(NcclComm, DestroyWithOperationsThatCannotCompleteIsReported) {
  Watchdog watchdog;
  std::vector<ncclComm_t> comms(2);
  const int devs[] = {0, 1};
  ASSERT_EQ(ncclCommInitAll(comms.data(), 2, devs), ncclSuccess);
  cudaSetDevice(0);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  float* x = device_copy(std::vector<float>{1});
  ASSERT_EQ(ncclAllReduce(x, x, 1, ncclFloat32, ncclSum, comms[0], s), ncclSuccess);  // rank 1 never joins
  vgpu::CaptureViolations cap;
  setenv("VGPU_NCCL_DESTROY_GRACE_S", "0.2", 1);
  EXPECT_EQ(ncclCommDestroy(comms[0]), ncclInvalidUsage);
  unsetenv("VGPU_NCCL_DESTROY_GRACE_S");
  const auto m = cap.messages();
  EXPECT_TRUE(any_contains(m, {"nccl destroy in flight",
                               "ncclCommDestroy with 1 operations in flight that cannot complete: use "
                               "ncclCommAbort after a failure (rank 0 of 2, device 0)"}))
      << joined(m);
  cudaEvent_t ev;
  ASSERT_EQ(cudaEventCreate(&ev), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(ev, s), cudaSuccess);
  EXPECT_TRUE(wait_event(ev, 20000ms));  // the stuck operation was aborted: the stream drains
  EXPECT_EQ(ncclCommAbort(comms[1]), ncclSuccess);
  cudaEventDestroy(ev);
  cudaStreamDestroy(s);
  cudaFree(x);
}

}  // namespace
