#include "experiments/accept_memory.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/common/error.h"

namespace ptdp {

namespace {

constexpr double kMiB = 1 << 20, kGiB = 1 << 30;

void consider(MemoryNeed& most, double bytes, std::string what) {
  if (bytes > most.bytes) most = {bytes, std::move(what)};
}

// MemAvailable in kB from text in /proc/meminfo's format; negative when absent.
double mem_available_kb(const std::string& text) {
  std::istringstream in(text);
  std::string key;
  double kb = -1;
  while (in >> key) {
    if (key == "MemAvailable:" && (in >> kb)) return kb;
    in.ignore(1 << 20, '\n');
  }
  return -1;
}

}  // namespace

MemoryNeed largest_memory_need(const AcceptProfile& p, const std::function<bool(const std::string&)>& wanted) {
  const bool gpu = p.kind == "gpu";
  const double element = gpu ? 2 : 4;  // bf16 GEMM on a GPU, sgemm on the CPU
  MemoryNeed most;
  if (wanted("gemm") || wanted("burnin")) {
    const double m = double(p.gemm_m), n = double(p.gemm_n), k = double(p.gemm_k);
    consider(most, (m * k + n * k + m * n) * element,
             fmt::format("the gemm check: x, w and y of accept.gemm.shape = [{}, {}, {}]", p.gemm_m, p.gemm_n, p.gemm_k));
  }
  if (wanted("memory"))
    consider(most, 3 * double(p.triad_mib) * kMiB,
             fmt::format("the memory check: 3 arrays of accept.memory.array_mib = {} MiB", p.triad_mib));
  // The local communicator's ranks are threads of this process: each holds its buffer, and the
  // all-reduce as much again in flight.
  const double ranks = gpu ? 1 : double(p.ranks);
  if (wanted("allreduce"))
    consider(most, ranks * (gpu ? 1 : 2) * double(p.allreduce_mib) * kMiB,
             fmt::format("the allreduce check: accept.allreduce.mib = {} MiB{}", p.allreduce_mib,
                         gpu ? "" : fmt::format(" on each of node.ranks = {} ranks, twice", p.ranks)));
  if (wanted("p2p"))
    consider(most, ranks * double(p.p2p_mib) * kMiB,
             fmt::format("the p2p check: accept.p2p.mib = {} MiB{}", p.p2p_mib,
                         gpu ? "" : fmt::format(" on each of node.ranks = {} ranks", p.ranks)));
  if (wanted("internode"))
    consider(most, 2 * double(p.internode_mib) * kMiB,
             fmt::format("the internode check: accept.fleet.mib = {} MiB, twice", p.internode_mib));
  return most;
}

MemoryAvailable host_memory_available() {
  if (const char* env = std::getenv("PTDP_MEMINFO")) {
    const double kb = mem_available_kb(env);
    return {kb < 0 ? -1 : kb * 1024, "MemAvailable of PTDP_MEMINFO"};  // tests
  }
  std::ifstream f("/proc/meminfo");
  if (f) {
    std::stringstream text;
    text << f.rdbuf();
    const double kb = mem_available_kb(text.str());
    if (kb >= 0) return {kb * 1024, "MemAvailable in /proc/meminfo"};
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return {double(pages) * double(page), "sysconf(_SC_AVPHYS_PAGES)"};
  return {};
}

void check_memory_need(const std::string& hardware_flag, const MemoryNeed& need, const MemoryAvailable& have) {
  if (have.bytes < 0 || need.bytes <= have.bytes) return;
  usage_error("--hardware {}: {} needs {:.1f} GiB, more than the {:.1f} GiB available ({}): lower the profile's "
              "size or free memory",
              hardware_flag, need.what, need.bytes / kGiB, have.bytes / kGiB, have.source);
}

}  // namespace ptdp
