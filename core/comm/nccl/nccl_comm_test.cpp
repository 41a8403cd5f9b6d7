// The NCCL communicator: thread ranks, each driving a GPU through a CUDA backend (the virtual GPUs
// of the vgpu build, or a machine's GPUs), a GPU of its own or, where NCCL lets ranks share one
// (nccl_sharing.h), GPUs shared round-robin; skipped without enough GPUs otherwise. The tests named after a failure mode each reproduce a bug the communicator once had.
#include <gtest/gtest.h>

#ifdef PTDP_HAVE_NCCL
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/device_info.h"
#include "core/comm/device_comm.h"
#include "core/comm/local/local_comm.h"
#include "core/comm/nccl/nccl_comm.h"
#include "core/comm/nccl/nccl_sharing.h"
#include "core/testing/parallel_run.h"
#ifdef PTDP_VGPU
#include <vgpu/runtime.h>
#endif

namespace ptdp {
namespace {

using namespace std::chrono_literals;
using RankFn = std::function<void(int rank, Backend& be, Communicator& comm)>;

// Whether n ranks can run here: a GPU each, or fewer GPUs that NCCL lets them share.
bool have_gpus(int n, std::string* why) {
  std::string no_gpu;
  const int count = cuda::device_count(&no_gpu);
  if (testing::nccl_ranks_fit(n, count, why)) return true;
  if (count == 0) *why += " (" + no_gpu + ")";
  return false;
}

#define PTDP_NEED_GPUS(n)                                 \
  do {                                                    \
    std::string why_;                                     \
    if (!have_gpus(n, &why_)) GTEST_SKIP() << why_;       \
  } while (0)

// n thread ranks, rank r on GPU r (or r mod the GPUs where they share) with its own CUDA backend,
// an NCCL world ordered after the backend's stream.
void on_gpus(int n, const RankFn& fn, std::chrono::milliseconds timeout = 10s) {
  const int gpus = cuda::device_count();
  run_local_ranks(n, [&](int r, Communicator& boot) {
    const int device = nccl_rank_gpu(r, gpus);
    auto be = make_cuda_backend(device);
    auto comm = make_nccl_world(boot, device, timeout, be.get());
    fn(r, *be, *comm);
  });
}

Tensor device_values(Backend& be, std::vector<float> v) {
  Tensor h = Tensor::empty({int64_t(v.size())}, DType::F32);
  std::copy(v.begin(), v.end(), h.data<float>());
  return to_backend(be, h);
}

std::vector<float> host_values(Backend& be, const Tensor& t) {
  Tensor h = to_host(be, t);
  return std::vector<float>(h.data<float>(), h.data<float>() + h.numel());
}

TEST(NcclComm, OneRankWorldReducesGathersAndSplits) {
  PTDP_NEED_GPUS(1);
  on_gpus(1, [](int, Backend& be, Communicator& comm) {
    ASSERT_EQ(comm.size(), 1);
    Tensor x = device_values(be, {1, 2, 3, 4, 5});
    comm.all_reduce(x, ReduceOp::Sum);
    Tensor y = be.empty({5}, DType::F32);
    comm.all_gather(x, y);
    auto sub = comm.split(0, 0);
    sub->all_reduce(y, ReduceOp::Max);
    EXPECT_EQ(host_values(be, y), (std::vector<float>{1, 2, 3, 4, 5}));
  });
}

// Sizes that do not divide by the group (chunks of 3, 3, 2, 2) go through padded buffers.
TEST(NcclComm, CollectivesOverFourGpusGiveEveryRankTheSameResult) {
  PTDP_NEED_GPUS(4);
  on_gpus(4, [](int r, Backend& be, Communicator& comm) {
    std::vector<float> mine(10);
    for (int i = 0; i < 10; ++i) mine[i] = float(r * 100 + i);
    Tensor x = device_values(be, mine);
    comm.all_reduce(x, ReduceOp::Sum);
    for (int i = 0; i < 10; ++i) EXPECT_EQ(host_values(be, x)[i], float(600 + 4 * i));
    Tensor m = device_values(be, mine);
    comm.all_reduce(m, ReduceOp::Max);
    EXPECT_EQ(host_values(be, m)[9], 309.0f);

    for (int64_t n : {8, 10}) {
      ChunkRange c = chunk_range(n, 4, r);
      std::vector<float> part(c.size());
      for (int64_t i = 0; i < c.size(); ++i) part[i] = float(c.begin + i);
      Tensor in = device_values(be, part), out = be.empty({n}, DType::F32);
      comm.all_gather(in, out);
      std::vector<float> want(n);
      for (int64_t i = 0; i < n; ++i) want[i] = float(i);
      EXPECT_EQ(host_values(be, out), want) << "all_gather of " << n;

      std::vector<float> full(n);
      for (int64_t i = 0; i < n; ++i) full[i] = float(i * (r + 1));
      Tensor rin = device_values(be, full), rout = be.empty({c.size()}, DType::F32);
      comm.reduce_scatter(rin, rout, ReduceOp::Sum);
      std::vector<float> got = host_values(be, rout);
      for (int64_t i = 0; i < c.size(); ++i) EXPECT_EQ(got[i], float((c.begin + i) * 10)) << "reduce_scatter of " << n;
    }
    Tensor b = device_values(be, {float(r), float(r)});
    comm.broadcast(b, 2);
    EXPECT_EQ(host_values(be, b), (std::vector<float>{2, 2}));
    comm.barrier();
    auto pair = comm.split(r / 2, r);
    Tensor s = device_values(be, {float(r)});
    pair->all_reduce(s, ReduceOp::Sum);
    EXPECT_EQ(host_values(be, s)[0], r < 2 ? 1.0f : 5.0f);
  });
}

// Tensors in dt from f32 values (exact in bf16 and f16 here) and back.
Tensor device_values_as(Backend& be, const std::vector<float>& v, DType dt) {
  Tensor h = Tensor::empty({int64_t(v.size())}, DType::F32);
  std::copy(v.begin(), v.end(), h.data<float>());
  Tensor c = Tensor::empty({int64_t(v.size())}, dt);
  c.copy_from(h);
  return to_backend(be, c);
}

std::vector<float> host_values_of(Backend& be, const Tensor& t) {
  Tensor h = to_host(be, t);
  Tensor f = Tensor::empty({h.numel()}, DType::F32);
  f.copy_from(h);
  return std::vector<float>(f.data<float>(), f.data<float>() + f.numel());
}

// bf16 and f16 activations and gradients through every collective and point-to-point call, each
// checked against the CPU. The values and their sums are exact in both types, so any difference
// is a wrong NCCL datatype (bf16 bits summed as f16 give other numbers), a wrong element size
// (the padded reduce-scatter and all-gather) or a wrong count.
TEST(NcclComm, SixteenBitTensorsGoThroughEveryCollectiveAndPointToPoint) {
  PTDP_NEED_GPUS(4);
  for (DType dt : {DType::BF16, DType::F16}) {
    on_gpus(4, [dt](int r, Backend& be, Communicator& comm) {
      const std::string what = std::string(dtype_name(dt)) + " rank " + std::to_string(r);
      auto value = [](int rank, int i) { return float((i % 16) - 8) * 0.5f + float(rank); };
      std::vector<float> mine(37), sum(37), max(37);
      for (int i = 0; i < 37; ++i) {
        mine[i] = value(r, i);
        sum[i] = 4 * value(0, i) + 6;
        max[i] = value(3, i);
      }
      Tensor x = device_values_as(be, mine, dt);
      comm.all_reduce(x, ReduceOp::Sum);
      EXPECT_EQ(host_values_of(be, x), sum) << "all_reduce sum, " << what;
      Tensor m = device_values_as(be, mine, dt);
      comm.all_reduce(m, ReduceOp::Max);
      EXPECT_EQ(host_values_of(be, m), max) << "all_reduce max, " << what;

      for (int64_t n : {8, 10}) {  // 10: chunks of 3, 3, 2, 2 through padded buffers
        const ChunkRange c = chunk_range(n, 4, r);
        std::vector<float> full(n), want(c.size()), part(c.size()), all(n);
        for (int64_t i = 0; i < n; ++i) {
          full[i] = value(r, int(i));
          all[i] = float(i) * 0.25f;
        }
        for (int64_t i = 0; i < c.size(); ++i) {
          want[i] = 4 * value(0, int(c.begin + i)) + 6;
          part[i] = all[c.begin + i];
        }
        Tensor rin = device_values_as(be, full, dt), rout = be.empty({c.size()}, dt);
        comm.reduce_scatter(rin, rout, ReduceOp::Sum);
        EXPECT_EQ(host_values_of(be, rout), want) << "reduce_scatter of " << n << ", " << what;
        Tensor gin = device_values_as(be, part, dt), gout = be.empty({n}, dt);
        comm.all_gather(gin, gout);
        EXPECT_EQ(host_values_of(be, gout), all) << "all_gather of " << n << ", " << what;
      }

      Tensor b = device_values_as(be, mine, dt);
      comm.broadcast(b, 2);
      std::vector<float> root(37);
      for (int i = 0; i < 37; ++i) root[i] = value(2, i);
      EXPECT_EQ(host_values_of(be, b), root) << "broadcast, " << what;

      // A ring: each rank sends to the next and receives from the previous.
      const int next = (r + 1) % 4, prev = (r + 3) % 4;
      Tensor out = device_values_as(be, mine, dt), in = be.empty({37}, dt);
      CommHandle sent = comm.isend(out, next, 5);
      comm.recv(in, prev, 5);
      sent.wait();
      std::vector<float> from(37);
      for (int i = 0; i < 37; ++i) from[i] = value(prev, i);
      EXPECT_EQ(host_values_of(be, in), from) << "send/recv, " << what;
    });
  }
}

// 1F1B's steady state: stage 0 sends forward and then receives backward while stage 1 sends
// backward and then receives forward. Each send alone on a stream waits for a receive queued
// behind the peer's send: the communicator must let them progress together (one NCCL group).
TEST(NcclComm, PipelineSendsAndReceivesInOppositeOrdersDoNotDeadlock) {
  PTDP_NEED_GPUS(2);
  on_gpus(
      2,
      [](int r, Backend& be, Communicator& comm) {
        const int peer = 1 - r;
        for (int round = 0; round < 3; ++round) {
          Tensor out = device_values(be, {float(r * 10 + round), 1});
          CommHandle sent = comm.isend(out, peer, round);
          Tensor in = be.empty({2}, DType::F32);
          comm.recv(in, peer, round);
          sent.wait();
          EXPECT_EQ(host_values(be, in)[0], float(peer * 10 + round));
        }
      },
      3s);
}

#ifdef PTDP_VGPU
// A received tensor may be a buffer that kernels queued on the compute stream still use (the
// caching allocator hands it back at once on that stream): the receive must be ordered after
// them. The vgpu's race checker reports a write on the NCCL stream that is not.
TEST(NcclComm, AReceiveIsOrderedAfterComputeQueuedOnItsBuffer) {
  PTDP_NEED_GPUS(2);
  vgpu::CaptureViolations capture;
  on_gpus(2, [](int r, Backend& be, Communicator& comm) {
    Tensor x = be.empty({256}, DType::F32);
    be.fill(x, 7.0);  // a kernel on the compute stream
    if (r == 0) comm.send(device_values(be, std::vector<float>(256, 1.0f)), 1, 0);
    else comm.recv(x, 0, 0);
    if (r == 1) {
      EXPECT_EQ(host_values(be, x)[255], 1.0f);
    }
  });
  EXPECT_TRUE(capture.messages().empty()) << capture.messages().front();
}

// After an abort the communicator is freed by NCCL: neither a handle's wait nor the
// destructor may call NCCL on it again.
TEST(NcclComm, AnAbortedCommunicatorIsNeverUsedAgain) {
  PTDP_NEED_GPUS(2);
  vgpu::CaptureViolations capture;
  const int gpus = cuda::device_count();
  run_local_ranks(2, [gpus](int r, Communicator& boot) {
    auto be = make_cuda_backend(nccl_rank_gpu(r, gpus));
    auto comm = make_nccl_world(boot, nccl_rank_gpu(r, gpus), 10s, be.get());
    if (r == 0) {
      Tensor x = device_values(*be, {1, 2});
      CommHandle h = comm->all_reduce_async(x, ReduceOp::Sum);  // rank 1 never joins
      comm->abort("test: rank 0 gives up");
      EXPECT_THROW(h.wait(), CommError);
    }
    boot.barrier();
    comm.reset();
  });
  EXPECT_TRUE(capture.messages().empty()) << capture.messages().front();
}

// A rank that fails with work in flight (a peer died) must not block forever in
// ncclCommDestroy when its communicator goes: it aborts instead.
TEST(NcclComm, DestroyingWithWorkAPeerWillNeverJoinDoesNotBlock) {
  PTDP_NEED_GPUS(2);
  vgpu::CaptureViolations capture;
  const int gpus = cuda::device_count();
  run_local_ranks(2, [gpus](int r, Communicator& boot) {
    auto be = make_cuda_backend(nccl_rank_gpu(r, gpus));
    auto comm = make_nccl_world(boot, nccl_rank_gpu(r, gpus), 10s, be.get());
    if (r == 0) {
      Tensor x = device_values(*be, {1, 2});
      CommHandle dropped = comm->all_reduce_async(x, ReduceOp::Sum);  // as if an exception skipped the wait
      const auto t0 = std::chrono::steady_clock::now();
      comm.reset();
      EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
    }
    boot.barrier();
  });
  EXPECT_TRUE(capture.messages().empty()) << capture.messages().front();
}

// Polling an operation sees cudaErrorNotReady, which the runtime also leaves as the thread's
// last error: the next checked launch must not report it.
TEST(NcclComm, WaitingLeavesNoCudaErrorBehind) {
  PTDP_NEED_GPUS(2);
  on_gpus(2, [](int r, Backend& be, Communicator& comm) {
    if (r == 1) std::this_thread::sleep_for(200ms);  // rank 0 polls meanwhile
    Tensor x = device_values(be, {1});
    comm.all_reduce(x, ReduceOp::Sum);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    be.fill(x, 3.0);  // a checked launch
    EXPECT_EQ(host_values(be, x)[0], 3.0f);
  });
}

TEST(NcclComm, BarrierReadsNoUninitialisedMemory) {
  PTDP_NEED_GPUS(2);
  vgpu::CaptureViolations capture;
  on_gpus(2, [](int, Backend&, Communicator& comm) { comm.barrier(); });
  EXPECT_TRUE(capture.messages().empty()) << capture.messages().front();
}

TEST(NcclComm, HandlesDroppedWithoutAWaitReleaseTheirEvents) {
  PTDP_NEED_GPUS(1);
  on_gpus(1, [](int, Backend& be, Communicator& comm) {
    Tensor x = device_values(be, {1, 2, 3});
    comm.all_reduce(x, ReduceOp::Sum);  // first use creates what the communicator keeps
    be.synchronize();
    const size_t before = vgpu::live_events();
    for (int i = 0; i < 20; ++i) (void)comm.all_reduce_async(x, ReduceOp::Sum);
    comm.barrier();
    EXPECT_EQ(vgpu::live_events(), before);
  });
}
#endif

// Issuing a collective on device tensors must not wait for the compute stream on the host (so
// data-parallel all-reduces overlap the backward pass): with the compute stream held up, the
// call returns; the result is still right once the stream runs.
TEST(NcclComm, IssuingACollectiveDoesNotWaitForTheComputeStream) {
  PTDP_NEED_GPUS(1);
  on_gpus(1, [](int, Backend& be, Communicator& nccl) {
    auto comm = make_device_comm(nccl, be, Device::CUDA);
    Tensor x = device_values(be, {5, 6});
    static std::atomic<bool> open;
    open = false;
    ASSERT_EQ(cudaLaunchHostFunc(
                  cuda_stream(be),
                  [](void*) {
                    while (!open) std::this_thread::sleep_for(1ms);
                  },
                  nullptr),
              cudaSuccess);
    auto issued = std::async(std::launch::async, [&] {
      cudaSetDevice(0);
      return comm->all_reduce_async(x, ReduceOp::Sum);
    });
    const bool returned = issued.wait_for(3s) == std::future_status::ready;
    open = true;
    EXPECT_TRUE(returned) << "all_reduce_async waited for the compute stream";
    CommHandle h = issued.get();
    h.wait();
    EXPECT_EQ(host_values(be, x), (std::vector<float>{5, 6}));
  });
}

}  // namespace
}  // namespace ptdp
#endif
