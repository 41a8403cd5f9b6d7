#include "experiments/accept_cpu.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include <cstdio>

#include <fmt/format.h>

#include "core/backend/cpu/blas_core.h"
#include "core/backend/cpu/threads.h"
#include "core/comm/local/local_comm.h"
#include "core/harness/collectives.h"
#include "core/harness/cpu_workloads.h"
#include "experiments/accept_health.h"
#include "experiments/accept_load.h"

namespace ptdp {

namespace {

int64_t f32_elements(int64_t mib) { return mib * (1 << 20) / int64_t(sizeof(float)); }

Check at_least(std::string name, std::string metric, std::string unit, double value, const Threshold& t,
               int64_t wrong, std::string detail) {
  Check c{std::move(name), std::move(metric), std::move(unit), ">=", value, t.value, false, std::move(detail),
          t.source};
  c.pass = c.value >= c.threshold && wrong == 0;
  return c;
}

// One untimed call (checked), then `reps` timed ones.
harness::Measured on_the_host(const harness::Workload& w, int reps) {
  return harness::measure(w, harness::host_clock(), 0, reps);
}

// In-place sum all-reduce of `mib` MiB of f32 on `ranks` local ranks: rank 0's time from a
// barrier to its return, bus bandwidth as nccl-tests; wrong elements summed over the ranks.
harness::Measured allreduce_local(int ranks, int64_t mib, int reps) {
  harness::Measured out;
  run_local_ranks(ranks, [&](int rank, Communicator& comm) {
    set_cpu_threads(1);
    harness::Collective op{harness::Coll::AllReduce, &comm, f32_elements(mib)};
    harness::Workload w = op.workload();
    w.check = [&] { return harness::sum_over_ranks(comm, op.wrong()); };
    w.reset = [&] { op.a.zero_(); };
    const harness::Measured m = harness::measure(w, harness::host_clock([&] { comm.barrier(); }), 0, reps);
    if (rank == 0) out = m;
  });
  return out;
}

// Rank 0 sends `mib` MiB to rank 1: bytes over the receiver's time from a barrier; the first
// transfer's data is checked on the receiver.
harness::Measured p2p_local(int ranks, int64_t mib, int reps) {
  const int64_t n = f32_elements(mib);
  harness::Measured out;
  run_local_ranks(ranks, [&](int rank, Communicator& comm) {
    set_cpu_threads(1);
    Tensor x = Tensor::empty({n}, DType::F32);
    harness::Workload w{.work = double(n) * sizeof(float)};
    w.init = [&] {
      float* p = x.data<float>();
      for (int64_t i = 0; i < n; ++i) p[i] = rank == 0 ? float(i % 1024) : -1.0f;
    };
    w.run = [&] {
      if (rank == 0) comm.send(x, 1, 7);
      if (rank == 1) comm.recv(x, 0, 7);
    };
    w.check = [&] {
      int64_t wrong = 0;
      for (int64_t i = 0; rank == 1 && i < n; ++i) wrong += x.data<float>()[i] != float(i % 1024);
      return wrong;
    };
    const harness::Measured m = harness::measure(w, harness::host_clock([&] { comm.barrier(); }), 0, reps);
    if (rank == 1) out = m;
    comm.barrier();
  });
  return out;
}

// What competed with the checks: the load average before them, and the CPU time others take
// while each runs (accept_load.h).
struct LoadWatch {
  explicit LoadWatch(double max) : max_per_cpu(max) {}
  HostLoad host = read_host_load();
  double max_per_cpu;
  CpuTimes before;

  void start() { before = cpu_times_now(); }
  // `c`, measured since start() with samples `s`: the signs of load in its detail and a warning on
  // stderr. A check with wrong results is never excused by load.
  Check judge(Check c, const harness::Samples& s, int64_t wrong) const {
    LoadSigns signs;
    if (host.load1 >= 0) signs.load_per_cpu = host.load1 / host.cpus;
    signs.others_per_cpu = others_per_cpu(before, cpu_times_now());
    if (s.best() > 0) signs.median_over_best = s.median() / s.best();
    const std::string note = load_note(signs, max_per_cpu, host.load1, host.cpus);
    if (note.empty()) return c;
    c.under_load = wrong == 0;
    c.detail += "; measured under load: " + note;
    fmt::print(stderr, "ptdp: warning: {}: measured under load: {}; {}\n", c.name, note,
               c.pass ? "its rate may be below this machine's" : "its FAIL may be the load's doing, not the machine's");
    std::fflush(stderr);
    return c;
  }
};

std::string gemm_shape(const AcceptProfile& p) {
  return fmt::format("{}x{}x{}{}", p.gemm_m, p.gemm_n, p.gemm_k, p.gemm_what.empty() ? "" : " (" + p.gemm_what + ")");
}

}  // namespace

int max_threads() { return kThreadsPerHardwareThread * std::max(1, int(std::thread::hardware_concurrency())); }

std::vector<Check> cpu_checks(const AcceptProfile& p, const std::function<bool(const std::string&)>& wanted, int reps,
                              int threads) {
  std::vector<Check> checks;
  LoadWatch load(p.max_load_per_cpu.value);
  if (wanted("gemm")) {
    set_cpu_threads(threads);
    load.start();
    const harness::Samples s = on_the_host(harness::sgemm(p.gemm_m, p.gemm_n, p.gemm_k), reps).samples;
    const std::string detail = fmt::format("OpenBLAS sgemm {}, {} threads, {} kernels, best of {} (median {:.1f})",
                                           gemm_shape(p), threads, cpu::blas_core(), reps, s.median());
    checks.push_back(
        load.judge(at_least("gemm", "sgemm_gflops", "GFLOP/s", s.best(), p.min_gemm_gflops, 0, detail), s, 0));
  }
  if (wanted("memory")) {
    set_cpu_threads(threads);
    load.start();
    const harness::Samples s = on_the_host(harness::stream_triad(f32_elements(p.triad_mib)), reps).samples;
    checks.push_back(
        load.judge(at_least("memory", "stream_triad_gbs", "GB/s", s.best(), p.min_triad_gbs, 0,
                            fmt::format("STREAM triad, 3 arrays of {} MiB, {} threads, best of {} (median {:.1f})",
                                        p.triad_mib, threads, reps, s.median())),
                   s, 0));
  }
  if (wanted("allreduce")) {
    load.start();
    const harness::Measured m = allreduce_local(p.ranks, p.allreduce_mib, reps);
    checks.push_back(load.judge(
        at_least("allreduce", "allreduce_busbw_gbs", "GB/s", m.samples.best(), p.min_allreduce_busbw_gbs, m.wrong,
                 fmt::format("local comm, {} ranks, {} MiB f32 in place, busbw = algbw x 2(n-1)/n, best of {} "
                             "(median {:.2f}), {} wrong elements",
                             p.ranks, p.allreduce_mib, reps, m.samples.median(), m.wrong)),
        m.samples, m.wrong));
  }
  if (wanted("p2p")) {
    load.start();
    const harness::Measured m = p2p_local(p.ranks, p.p2p_mib, reps);
    checks.push_back(load.judge(
        at_least("p2p", "p2p_gbs", "GB/s", m.samples.best(), p.min_p2p_gbs, m.wrong,
                 fmt::format("local comm, rank 0 -> rank 1, {} MiB, best of {} (median {:.2f}), {} wrong elements",
                             p.p2p_mib, reps, m.samples.median(), m.wrong)),
        m.samples, m.wrong));
  }
  return checks;
}

double cpu_gemm_load(const AcceptProfile& p, int threads, double seconds) {
  set_cpu_threads(threads);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  double inverse = 0;
  int n = 0;
  do {
    inverse += 1 / on_the_host(harness::sgemm(p.gemm_m, p.gemm_n, p.gemm_k), 1).samples.best();
    ++n;
  } while (std::chrono::steady_clock::now() < until);
  return n / inverse;
}

}  // namespace ptdp
