// Planted bugs in ptdp's own kernels that only the vgpu's per-access checks see (vgpu/README.md,
// "Kernel memory accesses"): each is reported with the kernel and the memory it reached.
#include <gtest/gtest.h>

#if defined(PTDP_HAVE_CUDA) && defined(PTDP_VGPU)
#include <vgpu/runtime.h>
#include <vgpu/suballoc.h>

#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/device_allocator.h"
#include "core/backend/cuda/device_info.h"
#include "core/backend/cuda/device_types.cuh"
#include "core/backend/cuda/kernels.h"
#include "core/comm/device_comm.h"
#include "core/comm/local/local_comm.h"
#include "core/tensor/tensor.h"
#include "core/backend/cuda/testing/skip_without_gpu.h"

namespace ptdp::cuda {
namespace {

std::string joined_messages(const std::vector<std::string>& m) {
  std::string s;
  for (const std::string& x : m) s += x + "\n";
  return s;
}

// A non-blocking stream on GPU 0 and its caching allocator for a plant: at the end the stream's
// work is waited for, the allocator forgets the stream, and the stream is destroyed.
struct PlantStream {
  static DeviceAllocator& on_gpu0() {
    PTDP_CUDA_CHECK(cudaSetDevice(0));
    return DeviceAllocator::for_device(0);
  }
  DeviceAllocator& al = on_gpu0();
  cudaStream_t st = nullptr;
  PlantStream() { PTDP_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking)); }
  ~PlantStream() {
    EXPECT_EQ(cudaStreamSynchronize(st), cudaSuccess);
    al.forget_stream(st);
    EXPECT_EQ(cudaStreamDestroy(st), cudaSuccess);
  }
  PlantStream(const PlantStream&) = delete;
  PlantStream& operator=(const PlantStream&) = delete;
};

// Each lane copies one 16-byte pack (8 bf16), as the packed kernels do (device_types.cuh).
__global__ void copy_packs(__nv_bfloat16* y, const __nv_bfloat16* x) {
  store_pack<8>(y + threadIdx.x * 8, load_pack<8>(x + threadIdx.x * 8));
}

// A packed kernel given rows that do not start 16-byte aligned (here one element off, as a view
// into a row would be, had the host's packs16 check let it through): the host's loads take any
// address, a GPU's 16-byte loads do not, and the vgpu says so as the GPU would stop.
TEST(CudaVgpuPlants, APackAtAnAddressNotAlignedToItsSizeIsReported) {
  PTDP_SKIP_WITHOUT_GPU();
  PlantStream plant;
  DeviceAllocator& al = plant.al;
  cudaStream_t st = plant.st;
  const int64_t n = 32 * 8 + 8;
  auto* x = static_cast<__nv_bfloat16*>(al.allocate(n * 2, st));
  auto* y = static_cast<__nv_bfloat16*>(al.allocate(n * 2, st));
  fill(x, DType::BF16, n, 1.0, st);
  fill(y, DType::BF16, n, 0.0, st);
  {
    vgpu::CaptureViolations capture;
    PTDP_LAUNCH(1, 32, 0, st, copy_packs)(y, x);  // aligned: nothing to say
    PTDP_CUDA_CHECK(cudaStreamSynchronize(st));
    EXPECT_TRUE(capture.messages().empty()) << joined_messages(capture.messages());
  }
  {
    vgpu::CaptureViolations capture;
    PTDP_LAUNCH(1, 32, 0, st, copy_packs)(y, x + 1);  // planted: 2 bytes past a 16-byte boundary
    PTDP_CUDA_CHECK(cudaStreamSynchronize(st));
    const std::string all = joined_messages(capture.messages());
    EXPECT_NE(all.find("misaligned address: kernel copy_packs"), std::string::npos) << all;
    EXPECT_NE(all.find("makes a 16-byte access at"), std::string::npos) << all;
    EXPECT_NE(all.find("not 16-byte aligned: a GPU stops the kernel there (cudaErrorMisalignedAddress)"),
              std::string::npos)
        << all;
  }
  al.deallocate(x, n * 2);
  al.deallocate(y, n * 2);
}

// A vocabulary-parallel embedding given the full vocabulary's row count instead of its shard's:
// a token of another rank's shard indexes past this shard's table, over its padding, into
// whatever tensor the caching allocator placed further on: another tensor, or the kernel's own
// output. That memory is live and written, so bounds and initialisation pass; the index was
// computed from the table's pointer, which carries the table's tag (vgpu/README.md, "Pointer
// tags"), not the tensor's.
TEST(CudaVgpuPlants, AnEmbeddingRowPastItsShardReadsAnotherTensorAndIsReported) {
  PTDP_SKIP_WITHOUT_GPU();
  PlantStream plant;
  DeviceAllocator& al = plant.al;
  cudaStream_t st = plant.st;
  const int64_t rows = 4;  // this shard's rows, one float each
  auto* wte = static_cast<float*>(al.allocate(rows * 4, st));
  // The targets must lie after the table (a row index is not negative); which blocks the caching
  // allocator hands out depends on the tests before, so blocks before it are set aside.
  std::vector<std::pair<void*, size_t>> set_aside;
  auto after_wte = [&](size_t bytes) {
    for (int tries = 0; tries < 64; ++tries) {
      void* p = al.allocate(bytes, st);
      if (vgpu::untagged(p) > vgpu::untagged(wte)) return static_cast<float*>(p);
      set_aside.emplace_back(p, bytes);
    }
    ADD_FAILURE() << "no block after the table in 64 tries";
    return static_cast<float*>(al.allocate(bytes, st));
  };
  auto* other = after_wte(4096);
  auto* x = after_wte(4);
  auto* tok = static_cast<int32_t*>(al.allocate(4, st));
  fill(wte, DType::F32, rows, 1.0, st);
  fill(other, DType::F32, 1024, 2.0, st);
  fill(x, DType::F32, 1, 0.0, st);
  // The row of wte (one float per row) at element `element` of tensor t, in the table's memory.
  auto row_at = [&](const float* t, int64_t element) {
    const auto bytes = static_cast<const char*>(vgpu::untagged(t)) - static_cast<const char*>(vgpu::untagged(wte));
    const int64_t row = int64_t(bytes / 4) + element;
    EXPECT_GT(row, rows);
    EXPECT_LT(row, int64_t(std::numeric_limits<int32_t>::max()));
    return int32_t(row);
  };
  for (const auto& [target, element, what] : {std::tuple<const float*, int64_t, const char*>{other, 7, "another tensor"},
                                              {x, 0, "the kernel's own output"}}) {
    SCOPED_TRACE(what);
    const int32_t id = row_at(target, element);
    PTDP_CUDA_CHECK(cudaMemcpyAsync(tok, &id, 4, cudaMemcpyHostToDevice, st));
    vgpu::CaptureViolations capture;
    // planted: the full vocabulary's rows, not the shard's
    embedding_forward(x, tok, wte, /*wte_rows=*/int64_t(1) << 31, 0, nullptr, DType::F32, 1, 1, 1, st);
    PTDP_CUDA_CHECK(cudaStreamSynchronize(st));
    const auto m = capture.messages();
    const std::string all = joined_messages(m);
    EXPECT_NE(all.find("out of bounds: kernel embedding_forward_kernel<T, 1>"), std::string::npos) << all;
    EXPECT_NE(all.find("accesses 4 byte(s) at byte offset " + std::to_string(element * 4) + " of the memory of allocation #"),
              std::string::npos)
        << all;
    EXPECT_NE(all.find("but carries another allocation's tag"), std::string::npos) << all;
    EXPECT_NE(all.find("embed_xent.cu:"), std::string::npos) << all;
  }
  {  // the right row count: the token is another shard's, the row is zero, nothing is reported
    vgpu::CaptureViolations capture;
    embedding_forward(x, tok, wte, rows, 0, nullptr, DType::F32, 1, 1, 1, st);
    PTDP_CUDA_CHECK(cudaStreamSynchronize(st));
    EXPECT_TRUE(capture.messages().empty()) << joined_messages(capture.messages());
  }
  al.deallocate(wte, rows * 4);
  al.deallocate(other, 4096);
  al.deallocate(x, 4);
  al.deallocate(tok, 4);
  for (const auto& [p, bytes] : set_aside) al.deallocate(p, bytes);
}

// The gradient norm taken on the compute stream over the flat gradient buffer while the
// data-parallel reduction of its last bucket still writes that bucket on the communication
// stream: the wait for the reduction's event is missing. The kernel's argument points at the
// buffer's first byte and the reduction writes only its tail, so only the kernel's own loads,
// learnt as it runs, show the race (vgpu/README.md, "Streams").
TEST(CudaVgpuPlants, AGradientNormReadingABucketStillBeingReducedIsReported) {
  PTDP_SKIP_WITHOUT_GPU();
  PlantStream compute_stream, comm_stream;
  DeviceAllocator& al = compute_stream.al;
  cudaStream_t compute = compute_stream.st, comm = comm_stream.st;
  const int64_t n = 4096, bucket = 1024;
  auto* grads = static_cast<float*>(al.allocate(n * 4, compute));
  auto* reduced = static_cast<float*>(al.allocate(bucket * 4, compute));
  auto* norm = static_cast<double*>(al.allocate(8, compute));
  auto* partials = static_cast<double*>(al.allocate(kSumPartials * 8, compute));
  fill(grads, DType::F32, n, 1.0, compute);
  fill(reduced, DType::F32, bucket, 0.5, compute);
  PTDP_CUDA_CHECK(cudaStreamSynchronize(compute));
  for (bool wait : {false, true}) {
    SCOPED_TRACE(wait ? "with the wait" : "planted: no wait");
    vgpu::CaptureViolations capture;
    cudaEvent_t done;
    PTDP_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    PTDP_CUDA_CHECK(cudaMemcpyAsync(grads + (n - bucket), reduced, bucket * 4, cudaMemcpyDeviceToDevice, comm));
    PTDP_CUDA_CHECK(cudaEventRecord(done, comm));
    if (wait) PTDP_CUDA_CHECK(cudaStreamWaitEvent(compute, done, 0));
    sum(norm, grads, DType::F32, n, /*squares=*/true, partials, compute);
    PTDP_CUDA_CHECK(cudaDeviceSynchronize());
    PTDP_CUDA_CHECK(cudaEventDestroy(done));
    const std::string all = joined_messages(capture.messages());
    if (wait) {
      EXPECT_TRUE(capture.messages().empty()) << all;
      continue;
    }
    EXPECT_NE(all.find("race: "), std::string::npos) << all;
    EXPECT_NE(all.find("kernel sum_partial_kernel"), std::string::npos) << all;
    EXPECT_NE(all.find("cudaMemcpyAsync"), std::string::npos) << all;
    EXPECT_NE(all.find("bytes [12288, 16384)"), std::string::npos) << all;
  }
  al.deallocate(grads, n * 4);
  al.deallocate(reduced, bucket * 4);
  al.deallocate(norm, 8);
  al.deallocate(partials, kSumPartials * 8);
}

// A device buffer wrapped as a host tensor (Tensor::wrap without Device::CUDA) and converted on
// the host: ptdp's tensor code then loads device memory, which on a GPU faults or reads garbage.
// The host code that holds tensors is instrumented (core/CMakeLists.txt), and a copy with memmove
// is seen from any code (vgpu/README.md, "Host access").
TEST(CudaVgpuPlants, ADeviceBufferWrappedAsAHostTensorIsReportedWhenTheHostReadsIt) {
  PTDP_SKIP_WITHOUT_GPU();
  PTDP_CUDA_CHECK(cudaSetDevice(0));
  float* dev = nullptr;
  PTDP_CUDA_CHECK(cudaMalloc(&dev, 4 * sizeof(float)));
  PTDP_CUDA_CHECK(cudaMemset(dev, 0, 4 * sizeof(float)));
  PTDP_CUDA_CHECK(cudaDeviceSynchronize());
  const Tensor wrapped = Tensor::wrap(dev, {4}, DType::F32);  // planted: the device is left CPU
  {
    vgpu::CaptureViolations capture;
    Tensor half = Tensor::empty({4}, DType::BF16);
    half.copy_from(wrapped);  // element-wise conversion: plain loads in tensor.cpp
    const std::string all = joined_messages(capture.messages());
    EXPECT_NE(all.find("host access to device memory: the host reads 4 byte(s) at byte offset 0 of allocation #"),
              std::string::npos)
        << all;
    EXPECT_NE(all.find("tensor.cpp:"), std::string::npos) << all;
  }
  {
    vgpu::CaptureViolations capture;
    Tensor same = Tensor::empty({4}, DType::F32);
    same.copy_from(wrapped);  // same dtype: one memmove
    const std::string all = joined_messages(capture.messages());
    EXPECT_NE(all.find("host access to device memory: the host reads 16 byte(s) with memmove at byte offset 0"),
              std::string::npos)
        << all;
  }
  PTDP_CUDA_CHECK(cudaFree(dev));
}

// The host communicator handed a device tensor without the staging copy that DeviceComm makes
// (core/comm/device_comm.cpp's there()): the in-process communicator sums the ranks' buffers with
// host loops, which on the virtual GPU would read device memory as host memory and train
// correctly; on a GPU they fault. Device memory is closed to host code (vgpu/README.md, "Host
// access"), so the communicator's first load is reported, in its own frame.
TEST(CudaVgpuPlants, AHostCommunicatorGivenADeviceTensorIsReported) {
  std::string reason;
  if (device_count(&reason) < 2) GTEST_SKIP() << "needs 2 GPUs: " << reason;
  auto run = [](bool staged) {
    std::vector<float> sums(2);
    run_local_ranks(2, [&](int r, Communicator& host) {
      auto be = make_cuda_backend(r);
      Tensor x = be->empty({256}, DType::F32);
      be->fill(x, r + 1.0);
      if (staged) {
        make_device_comm(host, *be, Device::CPU)->all_reduce(x, ReduceOp::Sum);
      } else {
        be->synchronize();
        host.all_reduce(x, ReduceOp::Sum);  // planted: the device tensor itself, no staging copy
      }
      Tensor h = to_host(*be, x);
      sums[r] = h.data<float>()[255];
    });
    return sums;
  };
  {
    vgpu::CaptureViolations capture;
    run(false);
    const std::string all = joined_messages(capture.messages());
    EXPECT_NE(all.find("host access to device memory: the host reads device memory at 0x"), std::string::npos) << all;
    EXPECT_NE(all.find("of allocation #"), std::string::npos) << all;
    EXPECT_NE(all.find("local_comm.cpp"), std::string::npos) << all;  // the communicator's host loop
  }
  vgpu::CaptureViolations capture;
  EXPECT_EQ(run(true), (std::vector<float>{3.0f, 3.0f}));
  EXPECT_TRUE(capture.messages().empty()) << joined_messages(capture.messages());
}

// A test helper that sums a CUDA tensor's values through data<float>() instead of copying them to
// the host first (to_host): the test is not instrumented, the protection sees the load.
float sum_without_copy(const Tensor& t) {
  float s = 0;
  for (int64_t i = 0; i < t.numel(); ++i) s += t.data<float>()[i];  // planted: t lives on the device
  return s;
}

TEST(CudaVgpuPlants, ATestHelperReadingACudaTensorWithoutACopyIsReported) {
  PTDP_SKIP_WITHOUT_GPU();
  auto be = make_cuda_backend(0);
  Tensor x = be->empty({8}, DType::F32);
  be->fill(x, 2.0);
  be->synchronize();
  vgpu::CaptureViolations capture;
  EXPECT_EQ(sum_without_copy(x), 16.0f);  // captured: it read on
  const std::string all = joined_messages(capture.messages());
  EXPECT_NE(all.find("host access to device memory: the host reads device memory at 0x"), std::string::npos) << all;
  EXPECT_NE(all.find(", byte offset 0 of allocation #"), std::string::npos) << all;
  EXPECT_NE(all.find("sum_without_copy"), std::string::npos) << all;
}

// Every __shared__ array of ptdp's kernels has a red zone after it (vgpu/include/vgpu/device.h),
// so an index past its end is reported instead of landing in the next array.
TEST(CudaVgpuPlants, EverySharedArrayOfPtdpsKernelsHasARedZoneAfterIt) {
  for (const std::string& name : vgpu::unguarded_shared_variables())
    EXPECT_EQ(name.find("ptdp::"), std::string::npos) << name << ": no red zone follows it";
}

}  // namespace
}  // namespace ptdp::cuda
#endif
