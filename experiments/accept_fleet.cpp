#include "experiments/accept_fleet.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "core/common/error.h"
#include "core/harness/collectives.h"
#include "core/results/provenance.h"

namespace ptdp {
namespace {

using Json = nlohmann::ordered_json;

// Every process's string on every process: each writes its bytes into its own slot of a
// zeroed f32 buffer, and a sum all-reduce assembles them (bytes are exact in f32).
std::vector<std::string> exchange_strings(Communicator& world, const std::string& mine) {
  Tensor len = Tensor::empty({1}, DType::F64);
  len.data<double>()[0] = double(mine.size());
  world.all_reduce(len, ReduceOp::Max);
  const int64_t slot = int64_t(len.data<double>()[0]);
  Tensor buf = Tensor::zeros({slot * world.size() + world.size()}, DType::F32);  // + a length per rank
  float* p = buf.data<float>();
  for (size_t i = 0; i < mine.size(); ++i) p[world.rank() * slot + int64_t(i)] = float(uint8_t(mine[i]));
  p[slot * world.size() + world.rank()] = float(mine.size());
  world.all_reduce(buf, ReduceOp::Sum);
  std::vector<std::string> all(world.size());
  for (int r = 0; r < world.size(); ++r) {
    const int64_t n = int64_t(p[slot * world.size() + r]);
    for (int64_t i = 0; i < n; ++i) all[r] += char(uint8_t(p[r * slot + i]));
  }
  return all;
}

double median_of(std::vector<double> v) { return harness::Samples{std::move(v)}.median(); }

// A threshold of the profile's [accept.fleet] table, or none: the fleet alone judges the metric.
Threshold fleet_threshold(const Threshold& t, const AcceptProfile& p, const char* field) {
  if (t.value > 0) return t;
  return {0.0, fmt::format("no accept.fleet.{} in {}: judged against the fleet's median only", field, p.path)};
}

// The all-reduce's threshold: the profile's, or its per-NIC figure times the NICs a node's
// processes can drive (each GPU sends through its own NIC), counted on the node with the fewest.
Threshold allreduce_threshold(const AcceptProfile& p, const std::vector<std::string>& nodes) {
  const Threshold& per_nic = p.min_internode_allreduce_busbw_gbs_per_nic;
  if (per_nic.value <= 0) return fleet_threshold(p.min_internode_allreduce_busbw_gbs, p, "min_allreduce_busbw_gbs");
  std::map<std::string, int> per_node;
  for (const std::string& n : nodes) ++per_node[n];
  int fewest = int(nodes.size());
  for (const auto& [name, count] : per_node) fewest = std::min(fewest, count);
  const int nics = std::min(fewest, p.node_nics);
  return {per_nic.value * nics,
          fmt::format("{} GB/s per NIC x {} NIC(s) (the fewest processes on a node, {}, and node.nics {}: the "
                      "lesser); per NIC: {}",
                      per_nic.value, nics, fewest, p.node_nics, per_nic.source)};
}

}  // namespace

std::string fleet_node_name() {
  if (const char* s = std::getenv("SLURMD_NODENAME"); s && *s) return s;
  return host_name();
}

FleetPlace fleet_place(Communicator& world, const std::string& node) {
  const std::vector<std::string> nodes = exchange_strings(world, node);
  FleetPlace place{0, 0};
  for (int r = 0; r < world.size(); ++r)
    if (nodes[size_t(r)] == node) {
      place.local += r < world.rank();
      ++place.per_node;
    }
  return place;
}

std::vector<Check> internode_checks(Communicator& world, const std::string& node, const AcceptProfile& p, int reps) {
  const std::unique_ptr<Backend> host = make_cpu_backend();
  return internode_checks(world, node, p, reps, world, *host, "");
}

namespace {

// The transfers' buffers live where `be` computes (host memory, or the GPU of an NCCL world);
// values go there and come back through the host. Element i of a transfer's data.
float pattern(int64_t i) { return float(i % 4093); }

// Every process in one in-place sum all-reduce over `data`, timed by the slowest process.
Check internode_allreduce(Communicator& world, Communicator& data, Backend& be, const AcceptProfile& p, int reps,
                          const Threshold& t, const std::string& over) {
  const int64_t elems = p.internode_mib * (1 << 20) / int64_t(sizeof(float));
  harness::Collective op{harness::Coll::AllReduce, &data, elems, &be};
  harness::Workload w = op.workload();
  w.reset = [&] { be.fill(op.a, 0.0); };
  const harness::Measured m = harness::measure(w, harness::slowest_rank_clock(world, [&] {
                                                 be.synchronize();
                                                 world.barrier();
                                               }),
                                               0, reps);
  Check c{"internode_allreduce", "internode_allreduce_busbw_gbs", "GB/s", ">=", m.samples.best(), t.value, false,
          fmt::format("{} over all {} processes, {} MiB f32 in place, busbw = algbw x 2(n-1)/n, the slowest "
                      "process's time (the same figure on every process), best of {} (median {:.2f}), {} wrong "
                      "elements on this process",
                      over, world.size(), p.internode_mib, reps, m.samples.median(), m.wrong),
          t.source};
  c.pass = c.value >= c.threshold && m.wrong == 0;
  return c;
}

// One transfer of `x` from process `from` to `to` over `data`, as each process takes part in it:
// the sender's time runs until the receiver's acknowledgement (over `world`); the first transfer
// is checked, the receiver sending its count of wrong elements after it. Others meet at barriers.
harness::Workload transfer(Communicator& world, Communicator& data, Backend& be, Tensor& x, int from, int to) {
  const int64_t elems = x.numel();
  harness::Workload w{.work = double(elems) * sizeof(float)};
  auto number = [](double v) {
    Tensor t = Tensor::empty({1}, DType::F64);
    t.data<double>()[0] = v;
    return t;
  };
  const int me = world.rank();
  if (me == from) {
    w.init = [&be, &x, elems] {
      Tensor h = Tensor::empty({elems}, DType::F32);
      for (int64_t i = 0; i < elems; ++i) h.data<float>()[i] = pattern(i);
      x = to_backend(be, h);
    };
    w.run = [&, to, number] {
      data.send(x, to, 9301);
      Tensor ack = number(0);
      world.recv(ack, to, 9302);
    };
    w.check = [&world, to, number] {
      Tensor wrong = number(0);
      world.recv(wrong, to, 9303);
      return int64_t(wrong.data<double>()[0]);
    };
  } else if (me == to) {
    w.init = [&be, &x] { be.fill(x, -1.0); };
    w.run = [&, from, number] {
      data.recv(x, from, 9301);
      world.send(number(0), from, 9302);
    };
    w.check = [&, from, number] {
      const Tensor h = to_host(be, x);
      int64_t wrong = 0;
      for (int64_t i = 0; i < h.numel(); ++i) wrong += h.data<float>()[i] != pattern(i);
      world.send(number(double(wrong)), from, 9303);
      return int64_t(0);
    };
  } else {
    w.run = [] {};
    w.check = [] { return int64_t(0); };
  }
  return w;
}

// One process at a time sends to the next process (in rank order, wrapping) on another node. A
// slow link shows at both its ends: each process is given the better of its two transfers (the
// one it sent and the one it received), so that only a node whose both are slow stands out.
Check internode_p2p(Communicator& world, Communicator& data, Backend& be, const AcceptProfile& p, int reps,
                    const Threshold& t, const std::string& over, const std::vector<std::string>& nodes) {
  const int me = world.rank(), n = world.size();
  const auto next_off_node = [&](int k) {
    for (int j = 1; j < n; ++j)
      if (nodes[(k + j) % n] != nodes[k]) return (k + j) % n;
    return k;
  };
  Tensor x = be.empty({p.internode_mib * (1 << 20) / int64_t(sizeof(float))}, DType::F32);
  harness::Measured mine;
  const harness::Clock clock = harness::host_clock([&] {
    world.barrier();
    be.synchronize();
  });
  for (int k = 0; k < n; ++k) {
    const harness::Measured m = harness::measure(transfer(world, data, be, x, k, next_off_node(k)), clock, 0, reps);
    if (k == me) mine = m;
  }
  const int to = next_off_node(me);
  const std::vector<std::string> rates = exchange_strings(world, fmt::format("{:.17g}", mine.samples.best()));
  int from = me;
  for (int k = 0; k < n; ++k)
    if (k != me && next_off_node(k) == me) from = k;  // the last sender into this process
  const double received = from != me ? std::stod(rates[from]) : 0.0;
  Check c{"internode_p2p", "internode_p2p_gbs", "GB/s", ">=", std::max(mine.samples.best(), received), t.value, false,
          fmt::format("{}, {} MiB, the better of this process's two transfers: sent to rank {} on {} {:.3g} "
                      "(best of {}, median {:.3g}, until its acknowledgement, {} wrong elements), received from rank "
                      "{} on {} {:.3g}",
                      over, p.internode_mib, to, nodes[to], mine.samples.best(), reps, mine.samples.median(),
                      mine.wrong, from, nodes[from], received),
          t.source};
  c.pass = c.value >= c.threshold && mine.wrong == 0;
  world.barrier();
  return c;
}

}  // namespace

std::vector<Check> internode_checks(Communicator& world, const std::string& node, const AcceptProfile& p, int reps,
                                    Communicator& data, Backend& be, const std::string& where) {
  PTDP_CHECK(data.size() == world.size() && data.rank() == world.rank(),
             "internode_checks: the data communicator (rank {} of {}) is not the world's (rank {} of {})", data.rank(),
             data.size(), world.rank(), world.size());
  const std::vector<std::string> nodes = exchange_strings(world, node);
  const Threshold allreduce_t = allreduce_threshold(p, nodes);
  const Threshold p2p_t = fleet_threshold(p.min_internode_p2p_gbs, p, "min_p2p_gbs");
  if (std::all_of(nodes.begin(), nodes.end(), [&](const std::string& s) { return s == nodes[0]; })) {
    const std::string why =
        fmt::format("every one of the {} processes runs on node {}: no second node", world.size(), nodes[0]);
    return {skipped_check("internode_allreduce", "internode_allreduce_busbw_gbs", "GB/s", allreduce_t, why),
            skipped_check("internode_p2p", "internode_p2p_gbs", "GB/s", p2p_t, why)};
  }
  const std::string over = fmt::format("{} comm{}", data.backend(), where.empty() ? "" : " between " + where);
  return {internode_allreduce(world, data, be, p, reps, allreduce_t, over),
          internode_p2p(world, data, be, p, reps, p2p_t, over, nodes)};
}

std::string FleetMember::row_name() const { return gpu < 0 ? node : fmt::format("{} gpu{}", node, gpu); }

std::vector<FleetMember> gather_fleet(Communicator& world, const FleetMember& me) {
  Json j = {{"node", me.node}, {"device", me.device}, {"rank", me.rank}, {"gpu", me.gpu}, {"checks", Json::array()}};
  for (const Check& c : me.checks) j["checks"].push_back(check_json(c));
  const std::vector<std::string> all = exchange_strings(world, j.dump());
  std::vector<FleetMember> out;
  if (world.rank() != 0) return out;
  for (const std::string& s : all) {
    const Json m = Json::parse(s);
    FleetMember f;
    f.node = m.at("node");
    f.device = m.at("device");
    f.rank = m.at("rank");
    f.gpu = m.at("gpu");
    for (const Json& c : m.at("checks")) f.checks.push_back(check_from_json(c));
    out.push_back(std::move(f));
  }
  return out;
}

FleetVerdict judge_fleet(const std::vector<FleetMember>& members, double min_spread) {
  FleetVerdict v;
  size_t ran = 0;
  for (const FleetMember& m : members) {
    FleetRow row;
    row.member = &m;
    for (const Check& c : m.checks) {
      if (c.skipped) continue;
      ++ran;
      if (!c.pass) row.failed.push_back(c.name);
    }
    v.rows.push_back(row);
  }
  // Outliers, metric by metric (at-least metrics: rates).
  std::vector<std::string> metrics;
  for (const FleetMember& m : members)
    for (const Check& c : m.checks)
      if (c.op == ">=" && std::find(metrics.begin(), metrics.end(), c.metric) == metrics.end()) metrics.push_back(c.metric);
  for (const std::string& metric : metrics) {
    std::vector<std::pair<size_t, double>> measured;
    for (size_t i = 0; i < members.size(); ++i)
      for (const Check& c : members[i].checks)
        if (c.metric == metric && !c.skipped && std::isfinite(c.value)) measured.push_back({i, c.value});
    if (measured.size() < 3) continue;
    // Each member against the others (leave one out): a slow member does not widen the spread
    // it is judged by, which matters in small fleets.
    for (size_t a = 0; a < measured.size(); ++a) {
      std::vector<double> others, deviations;
      for (size_t b = 0; b < measured.size(); ++b)
        if (b != a) others.push_back(measured[b].second);
      const double median = median_of(others);
      for (double x : others) deviations.push_back(std::fabs(x - median));
      const double spread = std::max(3.0 * 1.4826 * median_of(deviations), min_spread * median);
      const double x = measured[a].second;
      if (median - x > spread)
        v.rows[measured[a].first].outliers.push_back(
            fmt::format("{} {:.4g} (the others' median {:.4g}, spread {:.3g})", metric, x, median, spread));
    }
  }
  for (const FleetRow& r : v.rows)
    if (r.excluded() && std::find(v.exclude.begin(), v.exclude.end(), r.member->node) == v.exclude.end())
      v.exclude.push_back(r.member->node);
  v.passed = ran > 0 && v.exclude.empty();
  return v;
}

namespace {
std::string joined(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}
}  // namespace

std::string fleet_json(const std::vector<FleetMember>& members, const FleetVerdict& v, const std::string& profile,
                       const std::string& git_sha, const std::string& timestamp) {
  Json j = {{"profile", profile},  {"git_sha", git_sha},   {"timestamp", timestamp},
            {"processes", members.size()}, {"passed", v.passed}, {"exclude", v.exclude},
            {"srun_exclude", v.exclude.empty() ? Json(nullptr) : Json("--exclude=" + joined(v.exclude, ","))},
            {"members", Json::array()}};
  for (const FleetRow& r : v.rows) {
    Json m = {{"node", r.member->node},
              {"rank", r.member->rank},
              {"gpu", r.member->gpu < 0 ? Json(nullptr) : Json(r.member->gpu)},
              {"device", r.member->device},
              {"status", r.failed.empty() ? "PASS" : "FAIL"}, {"failed", r.failed}, {"outliers", r.outliers},
              {"checks", Json::array()}};
    for (const Check& c : r.member->checks) m["checks"].push_back(check_json(c));
    j["members"].push_back(m);
  }
  return j.dump(2) + "\n";
}

const char kFleetCsvHeader[] =
    "node,rank,gpu,device,check,metric,value,unit,op,threshold,status,outlier,detail,profile,git_sha,timestamp";

std::string fleet_csv(const FleetVerdict& v, const std::string& profile, const std::string& git_sha,
                      const std::string& timestamp) {
  std::string s = std::string(kFleetCsvHeader) + "\n";
  for (const FleetRow& r : v.rows)
    for (const Check& c : r.member->checks) {
      std::string outlier;
      for (const std::string& o : r.outliers)
        if (o.rfind(c.metric + " ", 0) == 0) outlier = o;
      std::vector<std::string> f = {r.member->node, std::to_string(r.member->rank),
                                    r.member->gpu < 0 ? "" : std::to_string(r.member->gpu), r.member->device};
      const std::vector<std::string> check = check_csv_fields(c);
      f.insert(f.end(), check.begin(), check.end());
      f.insert(f.end(), {outlier, c.detail, profile, git_sha, timestamp});
      s += csv_row(f);
    }
  return s;
}

void print_fleet(const FleetVerdict& v) {
  fmt::print("fleet: {} process(es)\n{:<20} {:>5}  {:<6} {}\n", v.rows.size(), "node", "rank", "result",
             "failed checks; outliers");
  for (const FleetRow& r : v.rows) {
    std::string what = joined(r.failed, ", ");
    if (!r.outliers.empty()) what += (what.empty() ? "" : "; ") + std::string("outlier: ") + joined(r.outliers, "; ");
    fmt::print("{:<20} {:>5}  {:<6} {}\n", r.member->row_name(), r.member->rank,
               !r.failed.empty() ? "FAIL" : r.outliers.empty() ? "PASS" : "SLOW", what.empty() ? "-" : what);
  }
  if (v.exclude.empty()) fmt::print("exclude: none\n");
  else fmt::print("exclude: srun --exclude={}\n", joined(v.exclude, ","));
}

}  // namespace ptdp
