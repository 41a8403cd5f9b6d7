#include "experiments/accept_fleet.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "core/common/error.h"
#include "core/results/provenance.h"

namespace ptdp {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

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

double median_of(std::vector<double> v) { return Samples{std::move(v)}.median(); }

// A threshold of the profile's [accept.fleet] table, or none: the fleet alone judges the metric.
std::pair<double, std::string> fleet_threshold(const Threshold& t, const AcceptProfile& p, const char* field) {
  if (t.value > 0) return {t.value, t.source};
  return {0.0, fmt::format("no accept.fleet.{} in {}: judged against the fleet's median only", field, p.path)};
}

// The all-reduce's threshold: the profile's, or its per-NIC figure times the NICs a node's
// processes can drive (each GPU sends through its own NIC), counted on the node with the fewest.
std::pair<double, std::string> allreduce_threshold(const AcceptProfile& p, const std::vector<std::string>& nodes) {
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

std::vector<Check> internode_checks(Communicator& world, const std::string& node, const AcceptProfile& p, int reps,
                                    Communicator& data, Backend& be, const std::string& where) {
  PTDP_CHECK(data.size() == world.size() && data.rank() == world.rank(),
             "internode_checks: the data communicator (rank {} of {}) is not the world's (rank {} of {})", data.rank(),
             data.size(), world.rank(), world.size());
  const std::vector<std::string> nodes = exchange_strings(world, node);
  const int me = world.rank(), n = world.size();
  const auto [ar_min, ar_source] = allreduce_threshold(p, nodes);
  const auto [p2p_min, p2p_source] = fleet_threshold(p.min_internode_p2p_gbs, p, "min_p2p_gbs");
  const Threshold ar_t{ar_min, ar_source}, p2p_t{p2p_min, p2p_source};
  if (std::all_of(nodes.begin(), nodes.end(), [&](const std::string& s) { return s == nodes[0]; })) {
    const std::string why = fmt::format("every one of the {} processes runs on node {}: no second node", n, nodes[0]);
    return {skipped_check("internode_allreduce", "internode_allreduce_busbw_gbs", "GB/s", ar_t, why),
            skipped_check("internode_p2p", "internode_p2p_gbs", "GB/s", p2p_t, why)};
  }
  const int64_t elems = p.internode_mib * (1 << 20) / int64_t(sizeof(float));
  // The transfers' buffers live where `be` computes (host memory, or the GPU of an NCCL world);
  // values go there and come back through the host.
  auto filled = [&](float (*value)(int64_t, int), int arg) {
    Tensor h = Tensor::empty({elems}, DType::F32);
    float* v = h.data<float>();
    for (int64_t i = 0; i < elems; ++i) v[i] = value(i, arg);
    return to_backend(be, h);
  };
  auto wrong_in = [&](const Tensor& x, float (*value)(int64_t, int), int arg) {
    const Tensor h = to_host(be, x);
    const float* v = h.data<float>();
    int64_t wrong = 0;
    for (int64_t i = 0; i < elems; ++i) wrong += v[i] != value(i, arg);
    return wrong;
  };
  const auto rank_value = [](int64_t, int r) { return float(r + 1); };
  const auto sum_value = [](int64_t, int size) { return float(size) * float(size + 1) / 2; };
  const auto pattern = [](int64_t i, int) { return float(i % 4093); };
  const auto unset = [](int64_t, int) { return -1.0f; };
  const std::string over = fmt::format("{} comm{}", data.backend(), where.empty() ? "" : " between " + where);
  std::vector<Check> out;
  {  // every process in one in-place all-reduce
    Tensor x = filled(rank_value, me);
    data.all_reduce(x, ReduceOp::Sum);  // checked, and warms every path
    const int64_t wrong = wrong_in(x, sum_value, n);
    Samples s;
    for (int r = 0; r < reps; ++r) {
      be.fill(x, 0.0);
      be.synchronize();
      world.barrier();
      const auto t0 = Clock::now();
      data.all_reduce(x, ReduceOp::Sum);
      Tensor t = Tensor::empty({1}, DType::F64);  // the job's time: its slowest process's
      t.data<double>()[0] = std::chrono::duration<double>(Clock::now() - t0).count();
      world.all_reduce(t, ReduceOp::Max);
      s.rates.push_back(double(elems) * sizeof(float) / t.data<double>()[0] / 1e9 * 2.0 * (n - 1) / n);
    }
    Check c{"internode_allreduce", "internode_allreduce_busbw_gbs", "GB/s", ">=", s.best(), ar_min, false,
            fmt::format("{} over all {} processes, {} MiB f32 in place, busbw = algbw x 2(n-1)/n, the slowest "
                        "process's time (the same figure on every process), best of {} (median {:.2f}), {} wrong "
                        "elements on this process",
                        over, n, p.internode_mib, reps, s.median(), wrong),
            ar_source};
    c.pass = c.value >= c.threshold && wrong == 0;
    out.push_back(c);
  }
  // One process at a time sends to the next process (in rank order, wrapping) on another node.
  const auto next_off_node = [&](int k) {
    for (int j = 1; j < n; ++j)
      if (nodes[(k + j) % n] != nodes[k]) return (k + j) % n;
    return k;
  };
  Tensor x = be.empty({elems}, DType::F32);  // filled by each transfer's first round
  Samples mine;
  int64_t my_wrong = 0;
  const int to = next_off_node(me);
  for (int k = 0; k < n; ++k) {
    const int dest = next_off_node(k);
    for (int r = -1; r < reps; ++r) {
      world.barrier();
      if (me == k) {
        if (r == -1) x = filled(pattern, 0);
        be.synchronize();
        const auto t0 = Clock::now();
        data.send(x, dest, 9301);
        Tensor ack = Tensor::empty({1}, DType::F64);  // the receiver's count of wrong elements
        world.recv(ack, dest, 9302);
        const double t = std::chrono::duration<double>(Clock::now() - t0).count();
        if (r == -1) my_wrong = int64_t(ack.data<double>()[0]);
        else mine.rates.push_back(double(elems) * sizeof(float) / t / 1e9);
      } else if (me == dest) {
        if (r == -1) x = filled(unset, 0);
        be.synchronize();
        data.recv(x, k, 9301);
        Tensor ack = Tensor::empty({1}, DType::F64);
        ack.data<double>()[0] = r == -1 ? double(wrong_in(x, pattern, 0)) : 0.0;
        world.send(ack, k, 9302);
      }
    }
  }
  // A slow link shows at both its ends: each process is given the better of its two transfers
  // (the one it sent and the one it received), so that only a node whose both are slow stands out.
  const std::vector<std::string> rates = exchange_strings(world, fmt::format("{:.17g}", mine.best()));
  int from = me;
  for (int k = 0; k < n; ++k)
    if (k != me && next_off_node(k) == me) from = k;  // the last sender into this process
  const double received = from != me ? std::stod(rates[from]) : 0.0;
  Check c{"internode_p2p", "internode_p2p_gbs", "GB/s", ">=", std::max(mine.best(), received), p2p_min, false,
          fmt::format("{}, {} MiB, the better of this process's two transfers: sent to rank {} on {} {:.3g} "
                      "(best of {}, median {:.3g}, until its acknowledgement, {} wrong elements), received from rank "
                      "{} on {} {:.3g}",
                      over, p.internode_mib, to, nodes[to], mine.best(), reps, mine.median(), my_wrong, from,
                      nodes[from], received),
          p2p_source};
  c.pass = c.value >= c.threshold && my_wrong == 0;
  out.push_back(c);
  world.barrier();
  return out;
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

std::string fleet_csv(const FleetVerdict& v, const std::string& profile, const std::string& git_sha,
                      const std::string& timestamp) {
  std::string s =
      "node,rank,gpu,device,check,metric,value,unit,op,threshold,status,outlier,detail,profile,git_sha,timestamp\n";
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
