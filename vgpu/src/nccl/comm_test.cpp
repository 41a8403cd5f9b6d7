// NCCL communicator management: ncclCommSplit, init errors (duplicate devices, bad arguments),
// use after ncclCommAbort/Destroy, unknown handles, ncclCommDestroy with operations in flight.
#include <cstdlib>
#include <future>
#include <string>
#include <vector>

#include "nccl/nccl_test_util.h"

namespace {

using namespace nccl_test;

// Sets (or, given null, unsets) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~ScopedEnv() { had_ ? setenv(name_, old_.c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// Two thread ranks of one communicator on device 0: each rank's result and last error text.
struct TwoOnOne {
  std::vector<ncclResult_t> result = std::vector<ncclResult_t>(2, ncclSuccess);
  std::vector<std::string> text = std::vector<std::string>(2);
  std::vector<ncclComm_t> comm = std::vector<ncclComm_t>(2, reinterpret_cast<ncclComm_t>(0x1));
};
TwoOnOne init_two_on_device0() {
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  TwoOnOne t;
  on_threads(2, [&](int r) {
    cudaSetDevice(0);
    t.result[size_t(r)] = ncclCommInitRank(&t.comm[size_t(r)], 2, id, r);
    t.text[size_t(r)] = ncclGetLastError(nullptr);
  });
  return t;
}

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
  ScopedEnv release("VGPU_NCCL_VERSION", nullptr), enable("NCCL_MULTI_RANK_GPU_ENABLE", "1");
  TwoOnOne t = init_two_on_device0();  // NCCL 2.28 refuses it whatever the variable says
  const auto& result = t.result;
  const auto& text = t.text;
  const auto& comm = t.comm;
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

// NCCL 2.30 (VGPU_NCCL_VERSION=2.30.7 here): two ranks may share a GPU once
// NCCL_MULTI_RANK_GPU_ENABLE=1 is set, and its refusal says so otherwise.
TEST(NcclComm, FromRelease230RanksShareADeviceWhenEnabled) {
  Watchdog watchdog;
  ScopedEnv release("VGPU_NCCL_VERSION", "2.30.7");
  int version = 0;
  ASSERT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version, 23007);
  {
    ScopedEnv off("NCCL_MULTI_RANK_GPU_ENABLE", nullptr);
    const TwoOnOne refused = init_two_on_device0();
    EXPECT_EQ(refused.result[0], ncclInvalidUsage);
    EXPECT_EQ(refused.text[0].rfind("Multiple Ranks are using the same GPU/Partition. Set NCCL_MULTI_RANK_GPU_ENABLE=1 "
                                    "to enable this configuration",
                                    0),
              0u)
        << refused.text[0];
  }
  ScopedEnv on("NCCL_MULTI_RANK_GPU_ENABLE", "1");
  TwoOnOne t = init_two_on_device0();
  ASSERT_EQ(t.result[0], ncclSuccess) << t.text[0];
  ASSERT_EQ(t.result[1], ncclSuccess) << t.text[1];
  // The buffers first: a copy on the legacy default stream waits for every blocking stream of the
  // device, the other rank's all-reduce among them, as on a GPU.
  cudaSetDevice(0);
  std::vector<int32_t*> x = {device_copy(std::vector<int32_t>{1}), device_copy(std::vector<int32_t>{2})};
  on_threads(2, [&](int r) {
    cudaSetDevice(0);
    cudaStream_t s = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(ncclAllReduce(x[size_t(r)], x[size_t(r)], 1, ncclInt32, ncclSum, t.comm[size_t(r)], s), ncclSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    cudaStreamDestroy(s);
  });
  for (int32_t* p : x) {
    EXPECT_EQ(host_copy(p, 1)[0], 3);
    cudaFree(p);
  }
  for (ncclComm_t c : t.comm) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
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
