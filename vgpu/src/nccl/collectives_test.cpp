// NCCL collectives over thread ranks (one virtual GPU and stream each), in and out of place,
// grouped, and from one thread driving every GPU; every rank gets the same bits.
#include <cmath>
#include <cstring>
#include <vector>

#include "nccl/nccl_test_util.h"
#include "nccl/reduce.h"

namespace {

using namespace nccl_test;
using vgpu::nccl::bf16_to_float;
using vgpu::nccl::float_to_bf16;
using vgpu::nccl::float_to_half;
using vgpu::nccl::half_to_float;

size_t elem_size(ncclDataType_t dt) { return vgpu::nccl::dtype_size(dt); }

// Host values <-> the bytes of a buffer of type dt.
std::vector<char> encode(ncclDataType_t dt, const std::vector<double>& v) {
  const size_t es = elem_size(dt);
  std::vector<char> b(v.size() * es);
  for (size_t i = 0; i < v.size(); ++i) {
    char* p = b.data() + i * es;
    switch (dt) {
      case ncclFloat32: {
        const float x = float(v[i]);
        std::memcpy(p, &x, 4);
        break;
      }
      case ncclFloat64:
        std::memcpy(p, &v[i], 8);
        break;
      case ncclInt32: {
        const int32_t x = int32_t(v[i]);
        std::memcpy(p, &x, 4);
        break;
      }
      case ncclFloat16: {
        const uint16_t x = float_to_half(float(v[i]));
        std::memcpy(p, &x, 2);
        break;
      }
      case ncclBfloat16: {
        const uint16_t x = float_to_bf16(float(v[i]));
        std::memcpy(p, &x, 2);
        break;
      }
      default:
        ADD_FAILURE() << "type not covered";
    }
  }
  return b;
}

std::vector<double> decode(ncclDataType_t dt, const std::vector<char>& b) {
  const size_t es = elem_size(dt);
  std::vector<double> v(b.size() / es);
  for (size_t i = 0; i < v.size(); ++i) {
    const char* p = b.data() + i * es;
    switch (dt) {
      case ncclFloat32: {
        float x;
        std::memcpy(&x, p, 4);
        v[i] = x;
        break;
      }
      case ncclFloat64:
        std::memcpy(&v[i], p, 8);
        break;
      case ncclInt32: {
        int32_t x;
        std::memcpy(&x, p, 4);
        v[i] = x;
        break;
      }
      case ncclFloat16: {
        uint16_t x;
        std::memcpy(&x, p, 2);
        v[i] = half_to_float(x);
        break;
      }
      case ncclBfloat16: {
        uint16_t x;
        std::memcpy(&x, p, 2);
        v[i] = bf16_to_float(x);
        break;
      }
      default:
        ADD_FAILURE() << "type not covered";
    }
  }
  return v;
}

// Small integers: exact in every type, so sums and maxima have one right answer.
double value(int rank, size_t i) { return double((rank + 1) * (int(i % 5) - 2) + rank); }

std::vector<double> values(int rank, size_t n, size_t offset = 0) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = value(rank, offset + i);
  return v;
}

TEST(NcclCollectives, AllReduceSumAndMaxOverEveryTypeGiveEveryRankTheSameBits) {
  Watchdog watchdog;
  const int n = 3;
  const size_t count = 37;
  const ncclDataType_t types[] = {ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat16, ncclInt32};
  const ncclRedOp_t ops[] = {ncclSum, ncclMax};
  std::vector<std::vector<std::vector<char>>> got(10, std::vector<std::vector<char>>(n));
  with_ranks(n, [&](Rank& k) {
    int c = 0;
    for (ncclDataType_t dt : types)
      for (ncclRedOp_t op : ops) {
        char* in = device_copy(encode(dt, values(k.rank, count)));
        void* out = nullptr;
        ASSERT_EQ(cudaMalloc(&out, count * elem_size(dt)), cudaSuccess);
        ASSERT_EQ(ncclAllReduce(in, out, count, dt, op, k.comm, k.stream), ncclSuccess);
        ASSERT_EQ(cudaStreamSynchronize(k.stream), cudaSuccess);
        got[size_t(c++)][size_t(k.rank)] = host_copy(static_cast<char*>(out), count * elem_size(dt));
        cudaFree(in);
        cudaFree(out);
      }
  });
  int c = 0;
  for (ncclDataType_t dt : types)
    for (ncclRedOp_t op : ops) {
      const auto& g = got[size_t(c++)];
      const std::vector<double> v = decode(dt, g[0]);
      for (size_t i = 0; i < count; ++i) {
        double want = op == ncclSum ? 0 : -1e300;
        for (int r = 0; r < n; ++r) want = op == ncclSum ? want + value(r, i) : std::max(want, value(r, i));
        ASSERT_EQ(v[i], want) << vgpu::nccl::dtype_name(dt) << " " << vgpu::nccl::redop_name(op) << " element " << i;
      }
      for (int r = 1; r < n; ++r) EXPECT_EQ(g[size_t(r)], g[0]) << "rank " << r << " differs, type " << int(dt);
    }
}

TEST(NcclCollectives, AllReduceInPlace) {
  Watchdog watchdog;
  with_ranks(2, [](Rank& k) {
    float* x = device_copy(std::vector<float>{1.0f + float(k.rank), 10, -3});
    ASSERT_EQ(ncclAllReduce(x, x, 3, ncclFloat32, ncclSum, k.comm, k.stream), ncclSuccess);
    ASSERT_EQ(cudaStreamSynchronize(k.stream), cudaSuccess);
    EXPECT_EQ(host_copy(x, 3), (std::vector<float>{3, 20, -6}));
    cudaFree(x);
  });
}

TEST(NcclCollectives, BroadcastFromEveryRootInAndOutOfPlace) {
  Watchdog watchdog;
  const int n = 3;
  with_ranks(n, [&](Rank& k) {
    for (int root = 0; root < n; ++root) {
      std::vector<int32_t> mine{k.rank * 100 + 1, k.rank * 100 + 2};
      int32_t* x = device_copy(mine);
      int32_t* y = device_copy(std::vector<int32_t>{-1, -1});
      // Out of place: non-roots pass no sendbuff ("sendbuff ... only used on rank root").
      ASSERT_EQ(ncclBroadcast(k.rank == root ? x : nullptr, y, 2, ncclInt32, root, k.comm, k.stream), ncclSuccess);
      ASSERT_EQ(ncclBroadcast(x, x, 2, ncclInt32, root, k.comm, k.stream), ncclSuccess);  // in place
      ASSERT_EQ(cudaStreamSynchronize(k.stream), cudaSuccess);
      const std::vector<int32_t> want{root * 100 + 1, root * 100 + 2};
      EXPECT_EQ(host_copy(y, 2), want);
      EXPECT_EQ(host_copy(x, 2), want);
      cudaFree(x);
      cudaFree(y);
    }
  });
}

TEST(NcclCollectives, ReduceWritesOnlyTheRoot) {
  Watchdog watchdog;
  const int n = 3, root = 1;
  with_ranks(n, [&](Rank& k) {
    double* in = device_copy(std::vector<double>{double(k.rank), 0.5});
    double* out = device_copy(std::vector<double>{-7, -7});
    ASSERT_EQ(ncclReduce(in, k.rank == root ? out : nullptr, 2, ncclFloat64, ncclSum, root, k.comm, k.stream),
              ncclSuccess);
    ASSERT_EQ(ncclReduce(in, in, 2, ncclFloat64, ncclMax, root, k.comm, k.stream), ncclSuccess);  // in place
    ASSERT_EQ(cudaStreamSynchronize(k.stream), cudaSuccess);
    if (k.rank == root) {
      EXPECT_EQ(host_copy(out, 2), (std::vector<double>{3, 1.5}));
      EXPECT_EQ(host_copy(in, 2), (std::vector<double>{2, 0.5}));
    } else {
      EXPECT_EQ(host_copy(out, 2), (std::vector<double>{-7, -7}));
      EXPECT_EQ(host_copy(in, 2), (std::vector<double>{double(k.rank), 0.5}));
    }
    cudaFree(in);
    cudaFree(out);
  });
}

TEST(NcclCollectives, AllGatherInAndOutOfPlace) {
  Watchdog watchdog;
  const int n = 4;
  const size_t c = 3;
  with_ranks(n, [&](Rank& k) {
    std::vector<float> mine(c), want(c * n), start(c * n, -1);
    for (size_t i = 0; i < c; ++i) mine[i] = float(k.rank * 10) + float(i);
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < c; ++i) want[size_t(q) * c + i] = float(q * 10) + float(i);
    float* in = device_copy(mine);
    float* out = device_copy(start);
    ASSERT_EQ(ncclAllGather(in, out, c, ncclFloat32, k.comm, k.stream), ncclSuccess);
    // In place: this rank's contribution already sits at its chunk of the output.
    std::vector<float> placed(start);
    for (size_t i = 0; i < c; ++i) placed[size_t(k.rank) * c + i] = mine[i];
    float* io = device_copy(placed);
    ASSERT_EQ(ncclAllGather(io + size_t(k.rank) * c, io, c, ncclFloat32, k.comm, k.stream), ncclSuccess);
    ASSERT_EQ(cudaStreamSynchronize(k.stream), cudaSuccess);
    EXPECT_EQ(host_copy(out, c * n), want);
    EXPECT_EQ(host_copy(io, c * n), want);
    cudaFree(in);
    cudaFree(out);
    cudaFree(io);
  });
}

TEST(NcclCollectives, ReduceScatterInAndOutOfPlace) {
  Watchdog watchdog;
  const int n = 3;
  const size_t c = 4;
  with_ranks(n, [&](Rank& k) {
    std::vector<float> mine(c * n);
    for (size_t i = 0; i < mine.size(); ++i) mine[i] = float(value(k.rank, i));
    std::vector<float> want(c);
    for (size_t i = 0; i < c; ++i) {
      float s = 0;
      for (int r = 0; r < n; ++r) s += float(value(r, size_t(k.rank) * c + i));
      want[i] = s;
    }
    float* in = device_copy(mine);
    float* out = device_copy(std::vector<float>(c, -1));
    ASSERT_EQ(ncclReduceScatter(in, out, c, ncclFloat32, ncclSum, k.comm, k.stream), ncclSuccess);
    float* io = device_copy(mine);
    ASSERT_EQ(ncclReduceScatter(io, io + size_t(k.rank) * c, c, ncclFloat32, ncclSum, k.comm, k.stream), ncclSuccess);
    ASSERT_EQ(cudaStreamSynchronize(k.stream), cudaSuccess);
    EXPECT_EQ(host_copy(out, c), want);
    const std::vector<float> all = host_copy(io, c * n);
    EXPECT_EQ(std::vector<float>(all.begin() + long(size_t(k.rank) * c), all.begin() + long(size_t(k.rank + 1) * c)),
              want);
    cudaFree(in);
    cudaFree(out);
    cudaFree(io);
  });
}

// ptdp's all_gather and reduce_scatter of sizes that do not divide: one broadcast / reduce per
// rank's chunk inside a group (chunks of 1, 1, 1 and 0 elements here).
TEST(NcclCollectives, GroupedBroadcastsAndReducesOverUnevenChunks) {
  Watchdog watchdog;
  const int n = 4;
  const size_t total = 3;
  with_ranks(n, [&](Rank& k) {
    auto chunk = [&](int q, size_t* begin) {
      const size_t base = total / n, extra = total % n;
      *begin = size_t(q) * base + std::min<size_t>(size_t(q), extra);
      return base + (size_t(q) < extra ? 1 : 0);
    };
    size_t b0;
    const size_t mine_n = chunk(k.rank, &b0);
    std::vector<float> mine(std::max<size_t>(mine_n, 1), float(k.rank + 1));
    float* in = device_copy(mine);
    float* out = device_copy(std::vector<float>(total, -1));
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int q = 0; q < n; ++q) {
      size_t b;
      const size_t m = chunk(q, &b);
      ASSERT_EQ(ncclBroadcast(q == k.rank ? in : nullptr, out + b, m, ncclFloat32, q, k.comm, k.stream), ncclSuccess);
    }
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    ASSERT_EQ(cudaStreamSynchronize(k.stream), cudaSuccess);
    EXPECT_EQ(host_copy(out, total), (std::vector<float>{1, 2, 3}));

    float* full = device_copy(std::vector<float>{1, 2, 3});
    float* part = device_copy(std::vector<float>{-1});
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int q = 0; q < n; ++q) {
      size_t b;
      const size_t m = chunk(q, &b);
      ASSERT_EQ(ncclReduce(full + b, q == k.rank ? part : nullptr, m, ncclFloat32, ncclSum, q, k.comm, k.stream),
                ncclSuccess);
    }
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    ASSERT_EQ(cudaStreamSynchronize(k.stream), cudaSuccess);
    EXPECT_EQ(host_copy(part, 1)[0], k.rank < 3 ? float(4 * (k.rank + 1)) : -1.0f);
    for (float* p : {in, out, full, part}) cudaFree(p);
  });
}

// As nccl-tests and ptdp's GPU benchmarks run: one thread, one communicator per GPU made
// together, every GPU's call of each operation inside one group.
TEST(NcclCollectives, OneThreadDrivesEveryGpuWithInitAllAndGroups) {
  Watchdog watchdog;
  const int n = 4;
  std::vector<ncclComm_t> comms(n);
  const int devs[] = {0, 1, 2, 3};
  ASSERT_EQ(ncclCommInitAll(comms.data(), n, devs), ncclSuccess);
  std::vector<cudaStream_t> streams(n);
  std::vector<float*> in(n), out(n);
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(cudaSetDevice(i), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&streams[size_t(i)], cudaStreamNonBlocking), cudaSuccess);
    in[size_t(i)] = device_copy(std::vector<float>(8, float(i + 1)));
    out[size_t(i)] = device_copy(std::vector<float>(8, -1));
    int rank = -1, dev = -1, count = -1;
    EXPECT_EQ(ncclCommUserRank(comms[size_t(i)], &rank), ncclSuccess);
    EXPECT_EQ(ncclCommCuDevice(comms[size_t(i)], &dev), ncclSuccess);
    EXPECT_EQ(ncclCommCount(comms[size_t(i)], &count), ncclSuccess);
    EXPECT_EQ(rank, i);
    EXPECT_EQ(dev, i);
    EXPECT_EQ(count, n);
  }
  auto sync_all = [&] {
    for (int i = 0; i < n; ++i) ASSERT_EQ(cudaStreamSynchronize(streams[size_t(i)]), cudaSuccess);
  };
  for (int rep = 0; rep < 3; ++rep) {
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int i = 0; i < n; ++i)
      ASSERT_EQ(
          ncclAllReduce(in[size_t(i)], out[size_t(i)], 8, ncclFloat32, ncclSum, comms[size_t(i)], streams[size_t(i)]),
          ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  }
  sync_all();
  for (int i = 0; i < n; ++i) EXPECT_EQ(host_copy(out[size_t(i)], 8), std::vector<float>(8, 10.0f));
  // Ring exchange: GPU i sends to i+1 and receives from i-1, all in one group.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(ncclSend(in[size_t(i)], 8, ncclFloat32, (i + 1) % n, comms[size_t(i)], streams[size_t(i)]), ncclSuccess);
    ASSERT_EQ(ncclRecv(out[size_t(i)], 8, ncclFloat32, (i + n - 1) % n, comms[size_t(i)], streams[size_t(i)]),
              ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  sync_all();
  for (int i = 0; i < n; ++i)
    EXPECT_EQ(host_copy(out[size_t(i)], 8), std::vector<float>(8, float((i + n - 1) % n + 1)));
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(
        ncclReduceScatter(in[size_t(i)], out[size_t(i)], 2, ncclFloat32, ncclSum, comms[size_t(i)], streams[size_t(i)]),
        ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  sync_all();
  for (int i = 0; i < n; ++i) EXPECT_EQ(host_copy(out[size_t(i)], 2), std::vector<float>(2, 10.0f));
  for (int i = 0; i < n; ++i) {
    ncclResult_t async = ncclInternalError;
    EXPECT_EQ(ncclCommGetAsyncError(comms[size_t(i)], &async), ncclSuccess);
    EXPECT_EQ(async, ncclSuccess);
    EXPECT_EQ(ncclCommDestroy(comms[size_t(i)]), ncclSuccess);
    cudaFree(in[size_t(i)]);
    cudaFree(out[size_t(i)]);
    cudaStreamDestroy(streams[size_t(i)]);
  }
  cudaSetDevice(0);
}

TEST(NcclCollectives, NullStreamIsTheLegacyStreamOfTheCommunicatorsDevice) {
  Watchdog watchdog;
  with_ranks(2, [](Rank& k) {
    float* x = device_copy(std::vector<float>{float(k.rank)});
    ASSERT_EQ(ncclAllReduce(x, x, 1, ncclFloat32, ncclSum, k.comm, nullptr), ncclSuccess);
    EXPECT_EQ(host_copy(x, 1)[0], 1.0f);  // cudaMemcpy on the legacy stream runs after it
    cudaFree(x);
  });
}

TEST(NcclApi, VersionErrorStringsAndUniqueIds) {
  Watchdog watchdog;
  int v = 0;
  ASSERT_EQ(ncclGetVersion(&v), ncclSuccess);
  EXPECT_EQ(v, NCCL_VERSION_CODE);
  EXPECT_EQ(v, 22803);
  EXPECT_EQ(v / 10000, 2);
  EXPECT_EQ((v % 10000) / 100, 28);
  EXPECT_STREQ(ncclGetErrorString(ncclSuccess), "no error");
  EXPECT_NE(std::string(ncclGetErrorString(ncclInvalidUsage)).find("invalid usage"), std::string::npos);
  ncclUniqueId a, b;
  ASSERT_EQ(ncclGetUniqueId(&a), ncclSuccess);
  ASSERT_EQ(ncclGetUniqueId(&b), ncclSuccess);
  EXPECT_NE(std::memcmp(a.internal, b.internal, sizeof(a.internal)), 0);
  EXPECT_EQ(ncclGetVersion(nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("ncclGetVersion"), std::string::npos);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
}

}  // namespace
