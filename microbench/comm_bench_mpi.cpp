// ptdp_comm_bench: collectives and p2p of the MPI communicator, nccl-tests style, for runs
// under mpirun (Google Benchmark picks iteration counts per process, which can deadlock ranks
// around a collective; this driver runs a fixed number of iterations on every rank).
//   mpirun -np 4 build/ptdp_comm_bench [-b 1K] [-e 32M] [-f 8] [-n 20] [-w 5] [-c 1] [--op all_reduce,...]
//                                      [--csv FILE]
// For each size: one checked call on fresh inputs (#wrong: elements differing from the closed-form
// result, summed over ranks), `-w` warm-up calls, then `-n` timed calls; time is the mean per call,
// the maximum over ranks. Rank 0 prints the table; the exit code is 1 if any result was wrong.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/comm/mpi/mpi_comm.h"
#include "core/common/error.h"
#include "core/results/provenance.h"
#include "core/harness/collectives.h"
#include "core/results/output_files.h"

namespace ptdp {
namespace {

using harness::Coll;
using harness::coll_name;

// "1K", "32M", "1G", "4096": bytes.
int64_t parse_size(const std::string& flag, const std::string& s) {
  if (s.empty()) usage_error("{} '' is not a size", flag);
  int64_t mult = 1;
  std::string digits = s;
  switch (s.back()) {
    case 'K': case 'k': mult = int64_t(1) << 10; digits.pop_back(); break;
    case 'M': case 'm': mult = int64_t(1) << 20; digits.pop_back(); break;
    case 'G': case 'g': mult = int64_t(1) << 30; digits.pop_back(); break;
    default: break;
  }
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos)
    usage_error("{} {}: expected a size in bytes, e.g. 4096, 64K, 32M, 1G", flag, s);
  const int64_t v = std::stoll(digits) * mult;
  if (v <= 0) usage_error("{} {} must be positive", flag, s);
  return v;
}

struct Options {
  std::string minbytes = "1K", maxbytes = "32M", csv;
  int factor = 8, iters = 20, warmup = 5, check = 1;
  std::vector<std::string> ops;
};

struct Row {
  std::string op;
  int64_t bytes, count;
  double time_us, algbw, busbw;
  int64_t wrong;
};

// The collectives --op names (all by default), in nccl-tests' order; a ring of one has no peer
// for sendrecv.
std::vector<Coll> selected_colls(const Options& o, int n) {
  const std::vector<Coll> all = {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast,
                                 Coll::SendRecv};
  for (const auto& name : o.ops)
    if (std::none_of(all.begin(), all.end(), [&](Coll c) { return name == coll_name(c); }))
      usage_error("--op {}: unknown (all_reduce, all_gather, reduce_scatter, broadcast, sendrecv)", name);
  std::vector<Coll> colls;
  for (Coll c : all)
    if ((o.ops.empty() || std::find(o.ops.begin(), o.ops.end(), coll_name(c)) != o.ops.end()) &&
        !(n < 2 && c == Coll::SendRecv))
      colls.push_back(c);
  return colls;
}

// One size of one collective on every rank: the checked call (wrong elements summed over the
// ranks, then fresh inputs), `-w` warm-up calls, then `-n` calls timed together after a barrier;
// the time per call is the slowest rank's.
Row measure_size(Communicator& world, Coll c, int64_t bytes, const Options& o) {
  const int n = world.size();
  const int64_t count = std::max<int64_t>(n, bytes / int64_t(sizeof(float)) / n * n);
  harness::Collective op{c, &world, count};
  harness::Workload w = op.workload();
  if (o.check)
    w.check = [&] {
      const int64_t wrong = harness::sum_over_ranks(world, op.wrong());
      op.fill();
      return wrong;
    };
  else
    w.check = nullptr;
  const harness::Clock clock = harness::slowest_rank_clock(world, [&] { world.barrier(); });
  const int64_t wrong = harness::prepare(w, clock, o.warmup);
  const double t = harness::time_calls(w, clock, o.iters);
  return {coll_name(c), int64_t(w.work), count, t * 1e6, harness::alg_rate(w, t), harness::bus_rate(w, t), wrong};
}

void print_table_head(Coll c, int n) {
  fmt::print("#\n# {} (busbw factor {:.3f})\n", coll_name(c), harness::bus_factor(c, n));
  fmt::print("# {:>12} {:>12} {:>6} {:>6} {:>5} {:>10} {:>8} {:>8} {:>7}\n", "size", "count", "type", "redop", "root",
             "time", "algbw", "busbw", "#wrong");
  fmt::print("# {:>12} {:>12} {:>6} {:>6} {:>5} {:>10} {:>8} {:>8} {:>7}\n", "(B)", "(elements)", "", "", "", "(us)",
             "(GB/s)", "(GB/s)", "");
}

void print_row(Coll c, const Row& r, bool check) {
  const bool reduces = c == Coll::AllReduce || c == Coll::ReduceScatter;
  fmt::print("  {:>12} {:>12} {:>6} {:>6} {:>5} {:>10.2f} {:>8.3f} {:>8.3f} {:>7}\n", r.bytes, r.count, "float",
             reduces ? "sum" : "none", c == Coll::Broadcast ? "0" : "-1", r.time_us, r.algbw, r.busbw,
             check ? std::to_string(r.wrong) : "N/A");
  std::fflush(stdout);
}

void write_csv(const std::string& path, const std::vector<Row>& rows, int n, int iters) {
  std::string out = "op,size_bytes,count,type,ranks,time_us,algbw_gbs,busbw_gbs,wrong,iters,git_sha,host,device,"
                    "timestamp\n";
  const std::string prov = fmt::format("{},\"{}\",\"{}\",{}", git_sha(), host_name(), cpu_name(), utc_timestamp());
  for (const Row& r : rows)
    out += fmt::format("{},{},{},float,{},{:.3f},{:.4f},{:.4f},{},{},{}\n", r.op, r.bytes, r.count, n, r.time_us,
                       r.algbw, r.busbw, r.wrong, iters, prov);
  write_file_atomic(path, out);
  fmt::print("# wrote {}\n", path);
}

int run(Communicator& world, const Options& o) {
  const int n = world.size(), rank = world.rank();
  const int64_t lo = parse_size("-b/--minbytes", o.minbytes), hi = parse_size("-e/--maxbytes", o.maxbytes);
  if (lo > hi) usage_error("-b/--minbytes {} must not exceed -e/--maxbytes {}", o.minbytes, o.maxbytes);
  if (o.factor < 2) usage_error("-f/--stepfactor {} must be at least 2", o.factor);
  if (o.iters < 1) usage_error("-n/--iters {} must be positive", o.iters);
  if (o.warmup < 0) usage_error("-w/--warmup_iters {} must not be negative", o.warmup);
  if (!o.csv.empty()) {
    const std::filesystem::path dir = std::filesystem::path(o.csv).parent_path();
    if (!dir.empty() && !std::filesystem::is_directory(dir))
      usage_error("--csv {}: the directory {} does not exist", o.csv, dir.string());
  }
  const std::vector<Coll> colls = selected_colls(o, n);
  if (rank == 0) {
    fmt::print("# ptdp_comm_bench: MPI communicator, {} ranks, float, {} timed calls after {} warm-up, check {}\n", n,
               o.iters, o.warmup, o.check ? "on" : "off");
    fmt::print("# time: mean per call, the maximum over ranks; algbw = size / time; busbw = algbw x factor\n");
    fmt::print("# git {}, host {}, device {}\n", git_sha(), host_name(), cpu_name());
  }
  std::vector<Row> rows;
  int64_t total_wrong = 0;
  double busbw_sum = 0;
  for (Coll c : colls) {
    if (rank == 0) print_table_head(c, n);
    for (int64_t bytes = lo; bytes <= hi; bytes *= o.factor) {
      const Row r = measure_size(world, c, bytes, o);
      total_wrong += r.wrong;
      busbw_sum += r.busbw;
      if (rank == 0) print_row(c, r, o.check);
      rows.push_back(r);
    }
  }
  if (rank == 0) {
    fmt::print("# Out of bounds values : {} {}\n", total_wrong, total_wrong == 0 ? "OK" : "WRONG");
    fmt::print("# Avg bus bandwidth    : {:.3f} GB/s\n#\n", rows.empty() ? 0.0 : busbw_sum / double(rows.size()));
    if (!o.csv.empty()) write_csv(o.csv, rows, n, o.iters);
  }
  return total_wrong == 0 ? 0 : 1;
}

}  // namespace
}  // namespace ptdp

int main(int argc, char** argv) {
  using namespace ptdp;
  CLI::App app{"ptdp_comm_bench: MPI collectives and p2p in nccl-tests' terms (run under mpirun)"};
  Options o;
  app.add_option("-b,--minbytes", o.minbytes, "smallest message (bytes; K, M, G suffixes)")->capture_default_str();
  app.add_option("-e,--maxbytes", o.maxbytes, "largest message")->capture_default_str();
  app.add_option("-f,--stepfactor", o.factor, "multiply the size by this between steps")->capture_default_str();
  app.add_option("-n,--iters", o.iters, "timed calls per size")->capture_default_str();
  app.add_option("-w,--warmup_iters", o.warmup, "untimed calls per size before timing")->capture_default_str();
  app.add_option("-c,--check", o.check, "check the results of one call per size (0 or 1)")->capture_default_str();
  app.add_option("--op", o.ops, "only these: all_reduce, all_gather, reduce_scatter, broadcast, sendrecv")
      ->delimiter(',');
  app.add_option("--csv", o.csv, "rank 0 writes the table to this CSV file (atomically)");
  MpiSession mpi(&argc, &argv);
  std::unique_ptr<Communicator> world = mpi.world();
  const bool report = world->rank() == 0;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return report ? app.exit(e) : 0;
    if (report) std::fprintf(stderr, "ptdp_comm_bench: error: %s\n", e.what());
    return 2;
  }
  try {
    return run(*world, o);
  } catch (const UsageError& e) {
    if (report) std::fprintf(stderr, "ptdp_comm_bench: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ptdp_comm_bench: rank %d failed: %s\n", world->rank(), e.what());
    world->abort(e.what());
    return 1;
  }
}
