#include "experiments/accept_gpu.h"

#include <cmath>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "core/common/error.h"
#include "core/harness/harness.h"
#include "experiments/accept_fleet.h"

#ifdef PTDP_HAVE_CUDA
#include <cuda_runtime.h>

#include <chrono>
#include <exception>
#include <numeric>
#include <thread>

#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/measure.h"
#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/device_allocator.h"
#include "core/backend/cuda/device_guard.h"
#include "core/backend/cuda/device_info.h"
#include "core/common/rng.h"
#include "core/tensor/dtype.h"
#endif
#ifdef PTDP_HAVE_NCCL
#include "core/comm/nccl/nccl_comm.h"
#include "core/comm/nccl/nccl_node.h"
#include "core/harness/collectives.h"
#endif

namespace ptdp {

#ifndef PTDP_HAVE_CUDA

int visible_gpus(std::string* why) {
  if (why) *why = "this build has no CUDA backend: configure with -DPTDP_CUDA=ON where nvcc is installed";
  return 0;
}
std::string gpu_description() { return "no GPU"; }
MemoryAvailable gpu_memory_available() { return {}; }
std::string gpu_summary(const AcceptProfile&) { return "no GPU"; }
std::string gpu_software() { return "no CUDA backend in this build"; }
std::vector<Check> gpu_checks(const AcceptProfile&, const std::function<bool(const std::string&)>&, int) {
  throw RuntimeError("ptdp accept: the GPU checks need the CUDA backend, which this build lacks");
}
GemmLoad gemm_load(const AcceptProfile&, double, const std::function<void()>&) {
  throw RuntimeError("ptdp accept: the GPU burn-in needs the CUDA backend, which this build lacks");
}
std::unique_ptr<Backend> make_gpu_train_backend() {
  throw RuntimeError("ptdp accept: the GPU training check needs the CUDA backend, which this build lacks");
}
void check_one_gpu(int) {}
std::vector<int> checked_gpus() { return {}; }
std::vector<Check> gpu_internode_checks(Communicator&, const std::string&, const AcceptProfile&, int, int) {
  throw RuntimeError("ptdp accept: the GPU inter-node checks need the CUDA backend, which this build lacks");
}

#else  // PTDP_HAVE_CUDA

namespace {

constexpr int kWarmup = 3;                  // untimed calls before the timed ones (clocks, plans, caches)
constexpr int64_t kBlock = int64_t(1) << 20;  // random values repeated through the GEMM operands
constexpr auto kNcclTimeout = std::chrono::seconds(300);  // NCCL work unfinished by then is aborted

// ---------------------------------------------------------------- data

// Uniform bf16 values in [-1, 1), and the same values as floats for the host reference.
struct RandomBlock {
  std::vector<bf16> bits;
  std::vector<float> values;
  RandomBlock(uint64_t seed, int64_t n) : bits(n), values(n) {
    for (int64_t i = 0; i < n; ++i) {
      bits[i] = float_to_bf16(float(2.0 * uniform01(seed, 0, uint64_t(i)) - 1.0));
      values[i] = bf16_to_float(bits[i]);
    }
  }
  float at(int64_t i) const { return values[size_t(i % int64_t(values.size()))]; }
};

// t (bf16, on the device) holds r's values repeated from its first element on.
void fill_repeating(Backend& be, Tensor& t, const RandomBlock& r) {
  const Tensor host = Tensor::wrap(const_cast<bf16*>(r.bits.data()), {int64_t(r.bits.size())}, DType::BF16);
  cuda::fill_repeating(be, t, host);
}

// ---------------------------------------------------------------- GEMM and memory, per GPU

struct GpuRates {
  harness::Samples s;
  harness::Samples copy;  // memory: cudaMemcpy device to device, for the detail
  int64_t checked = 0, wrong = 0;
};

// The GEMM y = x w^T in bf16 (f32 accumulation) at [m, k] x [n, k]^T on one GPU: its operands
// filled with random values repeated, and the check of 12 sampled entries of y against a host
// reference computed from the same bf16 inputs.
struct GemmOnDevice {
  const int64_t m, n, k;
  const RandomBlock rx{11, kBlock}, rw{12, kBlock};
  std::unique_ptr<Backend> be;
  Tensor x, w, y;
  GemmOnDevice(int device, int64_t m_, int64_t n_, int64_t k_) : m(m_), n(n_), k(k_), be(make_cuda_backend(device)) {
    x = be->empty({m, k}, DType::BF16);
    w = be->empty({n, k}, DType::BF16);
    y = be->empty({m, n}, DType::BF16);
    fill_repeating(*be, x, rx);
    fill_repeating(*be, w, rw);
  }
  void run() { be->linear_forward(y, x, w, nullptr); }
  void check(GpuRates& r) {
    Tensor row = Tensor::empty({n}, DType::BF16);
    for (const int64_t i : {int64_t(0), m / 3, m - 1}) {
      be->copy(row, y.view(i * n, {n}));  // device -> host, synchronous
      for (const int64_t j : {int64_t(0), n / 2, (7919 % n), n - 1}) {
        double want = 0, sum_abs = 0;
        for (int64_t l = 0; l < k; ++l) {
          const double p = double(rx.at(i * k + l)) * double(rw.at(j * k + l));
          want += p;
          sum_abs += std::fabs(p);
        }
        const double got = bf16_to_float(row.data<bf16>()[j]);
        ++r.checked;
        // bf16 output rounding (2^-8 relative) and f32 accumulation in another order.
        if (!(std::fabs(got - want) <= 8e-3 * std::fabs(want) + 1e-3 * sum_abs)) ++r.wrong;
      }
    }
    be->synchronize();
  }
  // 2mnk FLOPs in TFLOP/s; the check's counts go into r.
  harness::Workload workload(GpuRates& r) {
    harness::Workload wl{.work = 2.0 * double(m) * double(n) * double(k), .unit = 1e12};
    wl.run = [this] { run(); };
    wl.check = [this, &r] {
      check(r);
      return r.wrong;
    };
    return wl;
  }
};

// measure(g, r) with the GEMM set up on `device`; the device's cached memory given back afterwards.
template <class Measure> GpuRates with_gemm_on(int device, int64_t m, int64_t n, int64_t k, const Measure& measure) {
  cuda::DeviceGuard guard(device);
  GpuRates r;
  {
    GemmOnDevice g(device, m, n, k);
    measure(g, r);
  }
  cuda::DeviceAllocator::for_device(device).release_cached();
  return r;
}

// The GEMM's best rates (TFLOP/s), after an L2 flush each; its first call checked.
GpuRates gemm_on(int device, int64_t m, int64_t n, int64_t k, int reps) {
  return with_gemm_on(device, m, n, k, [reps](GemmOnDevice& g, GpuRates& r) {
    cuda::FlushedTiming timing(*g.be);
    r.s = harness::measure(g.workload(r), harness::timing_clock(timing), kWarmup - 1, reps).samples;
  });
}

// The GEMM back to back on one GPU until `until`: its sustained rate (every GEMM's FLOPs over the
// whole time, in batches of 8 between synchronizations), then its check.
using Deadline = std::chrono::time_point<std::chrono::steady_clock, std::chrono::duration<double>>;
GpuRates gemm_load_on(int device, int64_t m, int64_t n, int64_t k, Deadline until) {
  return with_gemm_on(device, m, n, k, [until](GemmOnDevice& g, GpuRates& r) {
    const harness::Workload w = g.workload(r);
    g.run();
    g.be->synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    int64_t calls = 0;
    do {
      for (int i = 0; i < 8; ++i, ++calls) g.run();
      g.be->synchronize();
    } while (std::chrono::steady_clock::now() < until);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.s.rates.push_back(double(calls) * w.work / s / w.unit);
    g.check(r);
  });
}

// STREAM add c = a + b over three f32 arrays of `mib` MiB through the backend's add kernel, GB/s
// counting 3 arrays moved per pass; and cudaMemcpy device to device, counting read + write.
// Every element of c is checked after the first pass.
GpuRates memory_on(int device, int64_t mib, int reps) {
  cuda::DeviceGuard guard(device);
  GpuRates r;
  {
    const std::unique_ptr<Backend> be = make_cuda_backend(device);
    const int64_t n = mib * (int64_t(1) << 20) / int64_t(sizeof(float));
    const double bytes = double(n) * sizeof(float);
    Tensor a = be->empty({n}, DType::F32), b = be->empty({n}, DType::F32), c = be->empty({n}, DType::F32);
    be->fill(a, 1.0);
    be->fill(b, 2.0);
    be->fill(c, 0.0);
    const cudaStream_t st = cuda_stream(*be);
    cuda::FlushedTiming timing(*be);
    const harness::Clock clock = harness::timing_clock(timing);
    harness::Workload copy{.work = 2.0 * bytes};
    copy.run = [&] { PTDP_CUDA_CHECK(cudaMemcpyAsync(c.raw(), a.raw(), c.nbytes(), cudaMemcpyDeviceToDevice, st)); };
    r.copy = harness::measure(copy, clock, kWarmup, reps).samples;
    harness::Workload add{.work = 3.0 * bytes};
    add.run = [&] { be->add(c, a, b); };
    add.check = [&] {
      Tensor host = Tensor::empty({n}, DType::F32);
      be->copy(host, c);  // device -> host, synchronous
      const float* h = host.data<float>();
      r.checked = n;
      for (int64_t i = 0; i < n; ++i) r.wrong += h[i] != 3.0f;
      return r.wrong;
    };
    r.s = harness::measure(add, clock, kWarmup - 1, reps).samples;
    be->synchronize();
  }
  cuda::DeviceAllocator::for_device(device).release_cached();
  return r;
}

// The measurement on every GPU; the slowest GPU's best counts.
template <class F>
Check per_gpu_check(const std::vector<int>& devices, Check c, F&& measure, std::string* per_gpu, std::string* copies,
                    int* slowest, GpuRates* worst) {
  double low = std::numeric_limits<double>::infinity();
  int64_t checked = 0, wrong = 0;
  for (const int d : devices) {
    const GpuRates r = measure(d);
    const char* sep = d == devices.front() ? "" : ", ";
    *per_gpu += fmt::format("{}{:.1f}", sep, r.s.best());
    if (!r.copy.rates.empty()) *copies += fmt::format("{}{:.1f}", sep, r.copy.best());
    checked += r.checked;
    wrong += r.wrong;
    if (r.s.best() < low) {
      low = r.s.best();
      *slowest = d;
      *worst = r;
    }
  }
  worst->checked = checked;
  worst->wrong = wrong;
  c.op = ">=";
  c.value = low;
  c.pass = low >= c.threshold && wrong == 0;
  return c;
}

// ---------------------------------------------------------------- NCCL inside the node

#ifdef PTDP_HAVE_NCCL

// The node's time of a call: the longest GPU's CUDA-event time.
harness::Clock node_clock(NcclNode& node, const char* what) {
  return {{}, [&node, what](const std::function<void()>& calls) { return node.seconds(what, calls); }};
}

// `launch(i)` queued on every GPU of `node` inside one NCCL group, as a workload of `bytes` per call
// whose first call is checked by `wrong` after the node's work is done.
harness::Workload node_workload(NcclNode& node, const char* what, double bytes,
                                const std::function<void(int)>& launch, const std::function<int64_t()>& wrong) {
  harness::Workload w{.work = bytes};
  w.run = [&node, launch] { node.group(launch); };
  w.check = [&node, what, wrong] {
    node.wait(what);
    return wrong();
  };
  return w;
}

// In-place sum all-reduce of `mib` MiB of f32 over GPUs 0..gpus-1; busbw in GB/s (nccl-tests:
// algbw x 2 (n - 1) / n). The first call's result is checked on every GPU.
harness::Measured allreduce_node(int gpus, int64_t mib, int reps) {
  const int64_t n = mib * (int64_t(1) << 20) / int64_t(sizeof(float));
  std::vector<int> devices(gpus);
  std::iota(devices.begin(), devices.end(), 0);
  NcclNode node(devices, kNcclTimeout);
  std::vector<Tensor> bufs;
  for (int i = 0; i < gpus; ++i) {
    bufs.push_back(node.backend(i).empty({n}, DType::F32));
    node.backend(i).fill(bufs.back(), double(i + 1));
  }
  auto launch = [&](int i) {
    PTDP_NCCL_OK(ncclAllReduce(bufs[i].raw(), bufs[i].raw(), size_t(n), ncclFloat32, ncclSum, node.comm(i),
                               node.stream(i)));
  };
  auto wrong = [&] {
    const float want = float(gpus * (gpus + 1) / 2);
    int64_t w = 0;
    for (int i = 0; i < gpus; ++i) {
      const Tensor host = to_host(node.backend(i), bufs[i]);
      for (int64_t e = 0; e < n; ++e) w += host.data<float>()[e] != want;
    }
    return w;
  };
  harness::Workload w = node_workload(node, "all-reduce", double(n) * sizeof(float), launch, wrong);
  w.bus_factor = harness::bus_factor(harness::Coll::AllReduce, gpus);
  // Values grow by x gpus per call: at most 8^14 x 36 for 8 GPUs, finite.
  const harness::Measured m = harness::measure(w, node_clock(node, "all-reduce"), kWarmup - 1, reps);
  bufs.clear();
  node.release_cached();
  return m;
}

// GPU 0 sends `mib` MiB to GPU 1 (ncclSend / ncclRecv in one group); bytes over the longer of
// the two GPUs' times, GB/s. The first transfer's data is checked.
harness::Measured p2p_pair(int64_t mib, int reps) {
  const int64_t n = mib * (int64_t(1) << 20) / int64_t(sizeof(float));
  NcclNode node({0, 1}, kNcclTimeout);
  Tensor pattern = Tensor::empty({n}, DType::F32);
  for (int64_t e = 0; e < n; ++e) pattern.data<float>()[e] = float(e % 1024);
  Tensor src = to_backend(node.backend(0), pattern), dst = node.backend(1).empty({n}, DType::F32);
  node.backend(1).fill(dst, -1.0);  // never a value of the pattern
  auto launch = [&](int i) {
    if (i == 0) PTDP_NCCL_OK(ncclSend(src.raw(), size_t(n), ncclFloat32, 1, node.comm(0), node.stream(0)));
    else PTDP_NCCL_OK(ncclRecv(dst.raw(), size_t(n), ncclFloat32, 0, node.comm(1), node.stream(1)));
  };
  auto wrong = [&] {
    const Tensor host = to_host(node.backend(1), dst);
    int64_t w = 0;
    for (int64_t e = 0; e < n; ++e) w += host.data<float>()[e] != float(e % 1024);
    return w;
  };
  const harness::Workload w = node_workload(node, "send/recv", double(n) * sizeof(float), launch, wrong);
  const harness::Measured m = harness::measure(w, node_clock(node, "send/recv"), kWarmup - 1, reps);
  src = dst = Tensor();
  node.release_cached();
  return m;
}

#endif  // PTDP_HAVE_NCCL

}  // namespace

int visible_gpus(std::string* why) { return cuda::device_count(why); }

std::string gpu_description() {
  const int n = cuda::device_count();
  if (n == 0) return "no GPU";
  std::string out;
  int run = 0;
  std::string name;
  for (int d = 0; d <= n; ++d) {
    const std::string next = d < n ? cuda::device_name(d) : std::string();
    if (d > 0 && next != name) {
      out += fmt::format("{}{} x {}", out.empty() ? "" : ", ", run, name);
      run = 0;
    }
    name = next;
    ++run;
  }
  return out;
}

std::string gpu_software() {
  std::string s = "CUDA " + cuda::versions();
#ifdef PTDP_HAVE_NCCL
  s += ", NCCL " + nccl_version_string();
#endif
  return s;
}

std::string gpu_summary(const AcceptProfile& p) {
  return fmt::format("{} ({} GPU(s) visible, the profile's node has {}), {}", gpu_description(), cuda::device_count(),
                     p.node_gpus, gpu_software());
}

namespace {
int g_checked_gpu = -1;  // check_one_gpu's; -1: every visible GPU
}  // namespace

void check_one_gpu(int device) { g_checked_gpu = device; }

std::vector<int> checked_gpus() {
  if (g_checked_gpu >= 0) return {g_checked_gpu};
  std::vector<int> all(size_t(std::max(0, cuda::device_count())));
  std::iota(all.begin(), all.end(), 0);
  return all;
}

MemoryAvailable gpu_memory_available() {
  MemoryAvailable least;
  for (const int d : checked_gpus()) {
    const cuda::DeviceGuard guard(d);
    size_t free = 0, total = 0;
#ifdef PTDP_VGPU  // the virtual GPU has no cudaMemGetInfo: its nominal memory, all of it free
    cudaDeviceProp prop{};
    PTDP_CUDA_CHECK(cudaGetDeviceProperties(&prop, d));
    free = total = prop.totalGlobalMem;
    const char* how = "the virtual GPU's totalGlobalMem";
#else
    PTDP_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    const char* how = "cudaMemGetInfo";
#endif
    if (least.bytes < 0 || double(free) < least.bytes)
      least = {double(free), fmt::format("free on GPU {} of {:.1f} GiB, {}", d, double(total) / (1 << 30), how)};
  }
  return least;
}

namespace {

Check gemm_check(const AcceptProfile& p, const std::vector<int>& devices, int reps) {
  std::string per, unused;
  int slowest = 0;
  GpuRates w;
  Check c{"gemm", "gemm_bf16_tflops", "TFLOP/s", ">=", 0, p.min_gemm_tflops.value, false, "",
          p.min_gemm_tflops.source};
  c = per_gpu_check(devices, c, [&](int d) { return gemm_on(d, p.gemm_m, p.gemm_n, p.gemm_k, reps); }, &per, &unused,
                    &slowest, &w);
  c.detail = fmt::format(
      "bf16 y = x w^T {}x{}x{}{} through the CUDA backend (cuBLASLt, f32 accumulation), best of {} after {} warm-up "
      "calls, L2 flushed before each; slowest GPU {}: {:.1f} (median {:.1f}); per GPU: {}; {} of {} sampled entries "
      "wrong",
      p.gemm_m, p.gemm_n, p.gemm_k, p.gemm_what.empty() ? "" : " (" + p.gemm_what + ")", reps, kWarmup, slowest,
      w.s.best(), w.s.median(), per, w.wrong, w.checked);
  return c;
}

Check memory_check(const AcceptProfile& p, const std::vector<int>& devices, int reps) {
  std::string per, copies;
  int slowest = 0;
  GpuRates w;
  Check c{"memory", "device_add_gbs", "GB/s", ">=", 0, p.min_memory_gbs.value, false, "", p.min_memory_gbs.source};
  c = per_gpu_check(devices, c, [&](int d) { return memory_on(d, p.triad_mib, reps); }, &per, &copies, &slowest, &w);
  c.detail = fmt::format(
      "STREAM add c = a + b (the CUDA backend's add kernel), 3 f32 arrays of {} MiB, 3 arrays counted per pass, "
      "best of {} after {} warm-up passes, L2 flushed before each; slowest GPU {}: {:.1f} (median {:.1f}); per GPU: "
      "{}; cudaMemcpy device to device (read + write counted) per GPU: {}; {} wrong elements",
      p.triad_mib, reps, kWarmup, slowest, w.s.best(), w.s.median(), per, copies, w.wrong);
  return c;
}

// Why a node's NCCL check cannot run with the GPUs this process checks (fewer than two).
std::string one_gpu_reason(int gpus) {
  return g_checked_gpu >= 0
             ? fmt::format("this process checks GPU {} only (one process per GPU on its node); the node's NCCL checks "
                           "need one process per node",
                           g_checked_gpu)
             : fmt::format("{} GPU visible", gpus);
}

// A node's NCCL check: its best rate against `t`, failed by any wrong element.
Check nccl_check(const char* name, const char* metric, const Threshold& t, const harness::Measured& m,
                 std::string detail) {
  Check c{name, metric, "GB/s", ">=", m.samples.best(), t.value, false, std::move(detail), t.source};
  c.pass = c.value >= c.threshold && m.wrong == 0;
  return c;
}

Check allreduce_check(const AcceptProfile& p, int gpus, int reps) {
  if (gpus < 2)
    return skipped_check("allreduce", "allreduce_busbw_gbs", "GB/s", p.min_allreduce_busbw_gbs,
                         one_gpu_reason(gpus) + ": nothing to reduce over");
#ifdef PTDP_HAVE_NCCL
  const harness::Measured m = allreduce_node(gpus, p.allreduce_mib, reps);
  return nccl_check("allreduce", "allreduce_busbw_gbs", p.min_allreduce_busbw_gbs, m,
                    fmt::format("NCCL {} ncclAllReduce in place, {} GPUs in one process (ncclCommInitAll), {} MiB f32, "
                                "busbw = algbw x 2(n-1)/n, longest GPU's event time, best of {} after {} warm-up calls "
                                "(median {:.1f}), {} wrong elements",
                                nccl_version_string(), gpus, p.allreduce_mib, reps, kWarmup, m.samples.median(),
                                m.wrong));
#else
  throw RuntimeError("ptdp accept: the allreduce check needs NCCL, which this build lacks");
#endif
}

Check p2p_check(const AcceptProfile& p, int gpus, int reps) {
  if (gpus < 2)
    return skipped_check("p2p", "p2p_gbs", "GB/s", p.min_p2p_gbs, one_gpu_reason(gpus) + ": no second GPU to send to");
#ifdef PTDP_HAVE_NCCL
  int peer = 0;
  PTDP_CUDA_CHECK(cudaDeviceCanAccessPeer(&peer, 0, 1));
  const harness::Measured m = p2p_pair(p.p2p_mib, reps);
  return nccl_check("p2p", "p2p_gbs", p.min_p2p_gbs, m,
                    fmt::format("NCCL {} ncclSend/ncclRecv GPU 0 -> GPU 1 (peer access {}), {} MiB, longest GPU's "
                                "event time, best of {} after {} warm-up transfers (median {:.1f}), {} wrong elements",
                                nccl_version_string(), peer ? "yes" : "no", p.p2p_mib, reps, kWarmup,
                                m.samples.median(), m.wrong));
#else
  throw RuntimeError("ptdp accept: the p2p check needs NCCL, which this build lacks");
#endif
}

}  // namespace

std::vector<Check> gpu_checks(const AcceptProfile& p, const std::function<bool(const std::string&)>& wanted,
                              int reps) {
  const std::vector<int> devices = checked_gpus();
  const int gpus = int(devices.size());
  std::vector<Check> checks;
  if (wanted("gemm")) checks.push_back(gemm_check(p, devices, reps));
  if (wanted("memory")) checks.push_back(memory_check(p, devices, reps));
  if (wanted("allreduce")) checks.push_back(allreduce_check(p, gpus, reps));
  if (wanted("p2p")) checks.push_back(p2p_check(p, gpus, reps));
  return checks;
}

GemmLoad gemm_load(const AcceptProfile& p, double seconds, const std::function<void()>& while_loaded) {
  const std::vector<int> devices = checked_gpus();
  const int gpus = int(devices.size());
  const Deadline until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::vector<GpuRates> rates(size_t(std::max(gpus, 0)));
  std::vector<std::exception_ptr> errors(rates.size());
  std::vector<std::thread> threads;
  for (int d = 0; d < gpus; ++d)
    threads.emplace_back([&, d] {
      try {
        rates[size_t(d)] = gemm_load_on(devices[size_t(d)], p.gemm_m, p.gemm_n, p.gemm_k, until);
      } catch (...) {
        errors[size_t(d)] = std::current_exception();
      }
    });
  // The sensors late in the load (its last quarter, at most a second before its end), while the GEMMs run.
  std::this_thread::sleep_until(until - std::chrono::duration<double>(std::min(1.0, seconds / 4)));
  if (while_loaded) while_loaded();
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  GemmLoad out;
  out.tflops = rates.empty() ? 0 : std::numeric_limits<double>::infinity();
  for (const GpuRates& r : rates) {
    out.tflops = std::min(out.tflops, r.s.best());
    out.checked += r.checked;
    out.wrong += r.wrong;
  }
  return out;
}

std::unique_ptr<Backend> make_gpu_train_backend() { return make_cuda_backend(checked_gpus().at(0)); }

std::vector<Check> gpu_internode_checks(Communicator& world, const std::string& node, const AcceptProfile& p, int reps,
                                        int device) {
#ifdef PTDP_HAVE_NCCL
  const std::unique_ptr<Backend> be = make_cuda_backend(device);
  const std::unique_ptr<Communicator> nccl = make_nccl_world(world, device, kNcclTimeout, be.get());
  return internode_checks(world, node, p, reps, *nccl, *be,
                          fmt::format("GPUs (NCCL {}; this process's GPU {}, {})", nccl_version_string(), device,
                                      cuda::device_name(device)));
#else
  (void)device;
  return internode_checks(world, node, p, reps);  // host memory over the launcher's communicator
#endif
}

#endif  // PTDP_HAVE_CUDA

int require_gpus(const std::string& hardware_flag, const AcceptProfile& p, bool wants_nccl) {
  std::string why;
  const int gpus = visible_gpus(&why);
  if (gpus == 0)
    usage_error("--hardware {}: a GPU acceptance profile ({}), and there is no GPU here ({})", hardware_flag, p.device,
                why);
#ifndef PTDP_HAVE_NCCL
  if (wants_nccl && gpus > 1)
    usage_error("--hardware {}: the allreduce and p2p checks need NCCL, which this build lacks (leave them out with "
                "--checks gemm,memory,train)",
                hardware_flag);
#else
  (void)wants_nccl;
#endif
  return gpus;
}

}  // namespace ptdp
