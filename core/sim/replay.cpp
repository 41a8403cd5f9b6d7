#include "core/sim/replay.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/common/error.h"

namespace ptdp::sim {

namespace {

constexpr double kNotSent = -1.0;

struct Replayer {
  const ReplayInput& in;
  int p, m, v;
  std::vector<std::vector<Action>> actions;
  std::vector<double> arrival;  // per message slot: arrival time, kNotSent before the send
  std::vector<int> waiter;      // per message slot: the stage blocked on it, -1 if none
  // Rendezvous: per message slot, when the sender and the receiver reached it (kNotSent: not yet)
  // and the transfer's duration.
  std::vector<double> send_posted, recv_posted, transfer;
  std::vector<size_t> pos;
  std::vector<double> clock;
  std::vector<int> in_flight;
  ReplayResult res;

  explicit Replayer(const ReplayInput& i) : in(i), p(i.p), m(i.m), v(i.v) {
    PTDP_CHECK(int(in.costs.size()) == p * v, "costs has {} entries, expected p*v = {}", in.costs.size(), p * v);
    if (!in.actions.empty()) {
      PTDP_CHECK(int(in.actions.size()) == p, "actions for {} stages, expected p = {}", in.actions.size(), p);
      actions = in.actions;
    } else {
      actions.reserve(p);
      for (int s = 0; s < p; ++s) actions.push_back(make_schedule(in.kind, p, m, v, s));
    }
    arrival.assign(size_t(2) * p * v * m, kNotSent);
    waiter.assign(arrival.size(), -1);
    if (in.rendezvous) {
      send_posted.assign(arrival.size(), kNotSent);
      recv_posted.assign(arrival.size(), kNotSent);
      transfer.assign(arrival.size(), 0.0);
    }
    pos.assign(p, 0);
    clock.assign(p, 0.0);
    in_flight.assign(p, 0);
    res.stages.resize(p);
    for (auto& st : res.stages) st.last_backward_end.assign(v, 0.0);
  }

  // Message slot of a forward (dir 0) or backward (dir 1) message delivered to (stage, chunk).
  size_t slot(int dir, int stage, int chunk, int mb) const {
    return ((size_t(dir) * p + stage) * v + chunk) * m + mb;
  }

  // A rendezvous transfer of slot k between a stage at time `t` and its peer, which posted its
  // side at `peer_posted`: both are busy from the later of the two for the transfer.
  void meet(size_t k, double peer_posted, double& t, StageTimeline& tl) {
    const double start = std::max(t, peer_posted);
    arrival[k] = start + transfer[k];
    tl.wait += start - t;
    tl.comm += transfer[k];
    t = arrival[k];
  }
  // This stage's side of rendezvous slot k, once the peer has completed the transfer with it.
  void met(size_t k, double& t, StageTimeline& tl) {
    tl.wait += std::max(0.0, arrival[k] - transfer[k] - t);
    tl.comm += transfer[k];
    t = std::max(t, arrival[k]);
  }
  // Rendezvous side of a send or receive at slot k; false: the stage blocks (it is the waiter).
  bool rendezvous(size_t k, bool sending, int s, double& t, StageTimeline& tl, std::vector<int>& ready) {
    if (arrival[k] != kNotSent) {
      met(k, t, tl);
      return true;
    }
    const double peer = sending ? recv_posted[k] : send_posted[k];
    if (peer != kNotSent) {
      meet(k, peer, t, tl);
      ready.push_back(waiter[k]);
      waiter[k] = -1;
      return true;
    }
    (sending ? send_posted : recv_posted)[k] = t;
    waiter[k] = s;
    return false;
  }

  // Runs `s` until it blocks or ends; pushes stages it unblocks onto `ready`.
  void run_stage(int s, std::vector<int>& ready) {
    StageTimeline& tl = res.stages[s];
    const auto& acts = actions[s];
    double& t = clock[s];
    while (pos[s] < acts.size()) {
      const Action& a = acts[pos[s]];
      const ChunkCosts& c = in.costs[size_t(s) * v + a.chunk];
      switch (a.op) {
        case Op::RecvForward:
        case Op::RecvBackward: {
          const int dir = a.op == Op::RecvForward ? 0 : 1;
          const size_t k = slot(dir, s, a.chunk, a.microbatch);
          if (in.rendezvous) {
            if (!rendezvous(k, false, s, t, tl, ready)) return;
          } else {
            if (arrival[k] == kNotSent) {
              waiter[k] = s;
              return;
            }
            if (arrival[k] > t) tl.wait += arrival[k] - t;
            t = std::max(t, arrival[k]);
          }
          const double after = dir == 0 ? c.recv_fwd_after : c.recv_bwd_after;
          t += after;
          tl.comm += after;
          break;
        }
        case Op::SendForward:
        case Op::SendBackward: {
          const bool fwd = a.op == Op::SendForward;
          const Peer peer = fwd ? forward_peer(p, s, a.chunk) : backward_peer(p, s, a.chunk);
          const size_t k = slot(fwd ? 0 : 1, peer.stage, peer.chunk, a.microbatch);
          PTDP_CHECK(peer.chunk >= 0 && peer.chunk < v && a.microbatch >= 0 && a.microbatch < m,
                     "stage {} sends to a chunk or micro-batch that does not exist", s);
          if (in.rendezvous) {
            transfer[k] = fwd ? c.send_fwd_arrive : c.send_bwd_arrive;
            if (!rendezvous(k, true, s, t, tl, ready)) return;
            ++tl.sends;
            break;
          }
          PTDP_CHECK(arrival[k] == kNotSent, "message to stage {} chunk {} micro-batch {} sent twice", peer.stage,
                     peer.chunk, a.microbatch);
          arrival[k] = t + (fwd ? c.send_fwd_arrive : c.send_bwd_arrive);
          if (waiter[k] >= 0) {
            ready.push_back(waiter[k]);
            waiter[k] = -1;
          }
          ++tl.sends;
          const double busy = fwd ? c.send_fwd_busy : c.send_bwd_busy;
          t += busy;
          tl.comm += busy;
          break;
        }
        case Op::Forward:
          t += c.forward;
          tl.compute += c.forward;
          tl.forward += c.forward;
          tl.peak_in_flight = std::max(tl.peak_in_flight, ++in_flight[s]);
          break;
        case Op::Backward:
          t += c.backward;
          tl.compute += c.backward;
          tl.backward += c.backward;
          --in_flight[s];
          tl.last_backward_end[a.chunk] = t;
          tl.backward_ends.push_back(t);
          break;
      }
      ++pos[s];
    }
    tl.finish = t;
  }

  ReplayResult run() {
    std::vector<int> ready;
    for (int s = p - 1; s >= 0; --s) ready.push_back(s);
    while (!ready.empty()) {
      const int s = ready.back();
      ready.pop_back();
      run_stage(s, ready);
    }
    for (int s = 0; s < p; ++s) {
      if (pos[s] < actions[s].size()) {
        res.deadlock = true;
        const Action& a = actions[s][pos[s]];
        res.deadlock_detail += fmt::format("{}stage {} waits at {}(micro-batch {}, chunk {})",
                                           res.deadlock_detail.empty() ? "" : "; ", s, op_name(a.op),
                                           a.microbatch, a.chunk);
      }
      res.makespan = std::max(res.makespan, res.stages[s].finish);
    }
    return std::move(res);
  }
};

}  // namespace

ReplayResult replay(const ReplayInput& in) { return Replayer(in).run(); }

double bubble_fraction(const ReplayResult& r) {
  double ideal = 0;
  for (const auto& s : r.stages) ideal = std::max(ideal, s.compute);
  return ideal > 0 ? (r.makespan - ideal) / ideal : 0.0;
}

}  // namespace ptdp::sim
