// NCCL send/receive: a 1F1B pipeline with grouped paired exchanges completes; the same calls
// ungrouped deadlock (seen by polling an event with a deadline) until ncclCommAbort.
#include <vector>

#include "nccl/nccl_test_util.h"

namespace {

using namespace nccl_test;

// Megatron's 1F1B schedule over P stages and M microbatches with NCCL point-to-point calls: the
// exchanges in which two neighbours send to each other at once (send_forward_recv_backward /
// send_backward_recv_forward) are grouped, the others are single blocking calls.
TEST(NcclP2P, GroupedSendRecvIn1F1BPipelineCompletes) {
  Watchdog watchdog;
  const int P = 4, M = 6;
  const size_t C = 4;
  std::vector<std::vector<float>> grads_at_first(M);
  with_ranks(P, [&](Rank& k) {
    const int s = k.rank;
    float* act_in = device_copy(std::vector<float>(C, -1));
    float* act_out = device_copy(std::vector<float>(C, -1));
    float* grad_in = device_copy(std::vector<float>(C, -1));
    float* grad_out = device_copy(std::vector<float>(C, -1));
    auto sync = [&] { ASSERT_EQ(cudaStreamSynchronize(k.stream), cudaSuccess); };
    auto put = [&](float* d, float v) {
      ASSERT_EQ(cudaMemcpy(d, std::vector<float>(C, v).data(), C * 4, cudaMemcpyHostToDevice), cudaSuccess);
    };
    auto get = [&](float* d) { return host_copy(d, C)[0]; };
    int fwd = 0, bwd = 0;  // microbatches done
    float last_in = 0;
    // Forward of microbatch m: stage 0 starts from 100*m, every stage sends on what it got plus 1.
    auto forward = [&] {
      const float in = s == 0 ? float(100 * fwd) : get(act_in);
      EXPECT_EQ(in, float(100 * fwd + s)) << "stage " << s << " microbatch " << fwd;
      last_in = in;
      put(act_out, in + 1);
      ++fwd;
    };
    // Backward: the last stage seeds its input + 1000, every stage sends on what it got plus 1.
    auto backward = [&] {
      const float g = s == P - 1 ? last_in + 1000 : get(grad_in);
      if (s == 0) grads_at_first[size_t(bwd)] = host_copy(grad_in, C);
      put(grad_out, g + 1);
      ++bwd;
    };
    auto send_fwd = [&] {
      if (s < P - 1) {
        ASSERT_EQ(ncclSend(act_out, C, ncclFloat32, s + 1, k.comm, k.stream), ncclSuccess);
        sync();
      }
    };
    auto recv_fwd = [&] {
      if (s > 0) {
        ASSERT_EQ(ncclRecv(act_in, C, ncclFloat32, s - 1, k.comm, k.stream), ncclSuccess);
        sync();
      }
    };
    auto send_bwd = [&] {
      if (s > 0) {
        ASSERT_EQ(ncclSend(grad_out, C, ncclFloat32, s - 1, k.comm, k.stream), ncclSuccess);
        sync();
      }
    };
    auto recv_bwd = [&] {
      if (s < P - 1) {
        ASSERT_EQ(ncclRecv(grad_in, C, ncclFloat32, s + 1, k.comm, k.stream), ncclSuccess);
        sync();
      }
    };
    auto send_fwd_recv_bwd = [&] {
      if (s == P - 1) return;
      ASSERT_EQ(ncclGroupStart(), ncclSuccess);
      ASSERT_EQ(ncclSend(act_out, C, ncclFloat32, s + 1, k.comm, k.stream), ncclSuccess);
      ASSERT_EQ(ncclRecv(grad_in, C, ncclFloat32, s + 1, k.comm, k.stream), ncclSuccess);
      ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
      sync();
    };
    auto send_bwd_recv_fwd = [&] {
      if (s == 0) return;
      ASSERT_EQ(ncclGroupStart(), ncclSuccess);
      ASSERT_EQ(ncclSend(grad_out, C, ncclFloat32, s - 1, k.comm, k.stream), ncclSuccess);
      ASSERT_EQ(ncclRecv(act_in, C, ncclFloat32, s - 1, k.comm, k.stream), ncclSuccess);
      ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
      sync();
    };
    const int warmup = std::min(P - s - 1, M), remaining = M - warmup;
    for (int i = 0; i < warmup; ++i) {
      recv_fwd();
      forward();
      send_fwd();
    }
    if (remaining > 0) recv_fwd();
    for (int i = 0; i < remaining; ++i) {
      forward();
      send_fwd_recv_bwd();
      backward();
      if (i == remaining - 1)
        send_bwd();
      else
        send_bwd_recv_fwd();
    }
    for (int i = 0; i < warmup; ++i) {
      recv_bwd();
      backward();
      send_bwd();
    }
    EXPECT_EQ(fwd, M);
    EXPECT_EQ(bwd, M);
    for (float* p : {act_in, act_out, grad_in, grad_out}) cudaFree(p);
  });
  for (int m = 0; m < M; ++m)
    EXPECT_EQ(grads_at_first[size_t(m)], std::vector<float>(C, float(100 * m + (P - 1) + 1000 + (P - 1)))) << m;
}

}  // namespace

namespace {

TEST(NcclP2P, UngroupedSendsThenReceivesDeadlockUntilAborted) {
  Watchdog watchdog;
  std::vector<ncclComm_t> comms(2);
  const int devs[] = {0, 1};
  ASSERT_EQ(ncclCommInitAll(comms.data(), 2, devs), ncclSuccess);
  std::vector<cudaStream_t> streams(2);
  std::vector<float*> a(2), b(2);
  std::vector<cudaEvent_t> done(2);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&streams[size_t(r)], cudaStreamNonBlocking), cudaSuccess);
    a[size_t(r)] = device_copy(std::vector<float>(16, float(r)));
    b[size_t(r)] = device_copy(std::vector<float>(16, -1));
    ASSERT_EQ(cudaEventCreateWithFlags(&done[size_t(r)], cudaEventDisableTiming), cudaSuccess);
  }
  // Each rank: send to the other, then receive from it, as separate stream items. A send
  // completes only when the matching receive runs, so both streams wait forever: NCCL requires
  // such calls to be fused in a group.
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(ncclSend(a[size_t(r)], 16, ncclFloat32, 1 - r, comms[size_t(r)], streams[size_t(r)]), ncclSuccess);
    ASSERT_EQ(ncclRecv(b[size_t(r)], 16, ncclFloat32, 1 - r, comms[size_t(r)], streams[size_t(r)]), ncclSuccess);
    ASSERT_EQ(cudaEventRecord(done[size_t(r)], streams[size_t(r)]), cudaSuccess);
  }
  EXPECT_FALSE(wait_event(done[0], 300ms));
  EXPECT_FALSE(wait_event(done[1], 10ms));
  ncclResult_t async = ncclInternalError;
  EXPECT_EQ(ncclCommGetAsyncError(comms[0], &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess);  // a hang is no error: only a timeout can tell
  // ncclCommAbort of rank 0 releases its stream; rank 1 keeps waiting until it aborts too.
  ASSERT_EQ(ncclCommAbort(comms[0]), ncclSuccess);
  EXPECT_TRUE(wait_event(done[0], 20000ms));
  EXPECT_FALSE(wait_event(done[1], 50ms));
  ASSERT_EQ(ncclCommAbort(comms[1]), ncclSuccess);
  EXPECT_TRUE(wait_event(done[1], 20000ms));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(host_copy(b[size_t(r)], 16), std::vector<float>(16, -1));  // nothing was received
    cudaEventDestroy(done[size_t(r)]);
    cudaStreamDestroy(streams[size_t(r)]);
    cudaFree(a[size_t(r)]);
    cudaFree(b[size_t(r)]);
  }
  cudaSetDevice(0);
}

TEST(NcclP2P, TheSameCallsGroupedComplete) {
  Watchdog watchdog;
  with_ranks(2, [](Rank& k) {
    float* a = device_copy(std::vector<float>(16, float(k.rank)));
    float* b = device_copy(std::vector<float>(16, -1));
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclSend(a, 16, ncclFloat32, 1 - k.rank, k.comm, k.stream), ncclSuccess);
    ASSERT_EQ(ncclRecv(b, 16, ncclFloat32, 1 - k.rank, k.comm, k.stream), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    ASSERT_EQ(cudaStreamSynchronize(k.stream), cudaSuccess);
    EXPECT_EQ(host_copy(b, 16), std::vector<float>(16, float(1 - k.rank)));
    cudaFree(a);
    cudaFree(b);
  });
}

TEST(NcclP2P, NestedGroupsIssueAtTheOutermostEnd) {
  Watchdog watchdog;
  with_ranks(2, [](Rank& k) {
    float* a = device_copy(std::vector<float>(4, float(k.rank + 1)));
    float* b = device_copy(std::vector<float>(4, -1));
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclSend(a, 4, ncclFloat32, 1 - k.rank, k.comm, k.stream), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);  // inner end: nothing issued yet
    ASSERT_EQ(ncclRecv(b, 4, ncclFloat32, 1 - k.rank, k.comm, k.stream), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    ASSERT_EQ(cudaStreamSynchronize(k.stream), cudaSuccess);
    EXPECT_EQ(host_copy(b, 4), std::vector<float>(4, float(2 - k.rank)));
    cudaFree(a);
    cudaFree(b);
  });
}

}  // namespace
