// Discrete-event replay of one pipeline's schedule (make_schedule's actions, stage by stage) with
// per-action durations and point-to-point dependencies: when each stage finishes, how busy it is,
// and whether the schedule deadlocks.
#pragma once
#include <string>
#include <vector>

#include "core/parallel/schedule.h"

namespace ptdp::sim {

// Durations of one model chunk on one stage, in seconds.
struct ChunkCosts {
  double forward = 0, backward = 0;  // compute (with the chunk's tensor-parallel collectives)
  // A send of this chunk's output (forward) or input gradient (backward): the sender is busy for
  // `busy` and the message reaches the peer `arrive` after the send starts.
  double send_fwd_busy = 0, send_fwd_arrive = 0;
  double send_bwd_busy = 0, send_bwd_arrive = 0;
  // Work on the receiver once a message has arrived (the all-gather of scatter/gather).
  double recv_fwd_after = 0, recv_bwd_after = 0;
};

struct ReplayInput {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  int p = 1, m = 1, v = 1;
  // costs[stage * v + chunk]
  std::vector<ChunkCosts> costs;
  // The actions of each stage; empty: make_schedule(kind, p, m, v, stage).
  std::vector<std::vector<Action>> actions;
  // Blocking, unbuffered transfers (DeepSpeed's NCCL send and recv): a send waits for the peer to
  // reach the matching receive and a receive for the send; the transfer (the sender's
  // send_*_arrive) then starts when both are there and occupies both. send_*_busy is unused.
  bool rendezvous = false;
};

struct StageTimeline {
  double finish = 0;        // when the stage's last action ends
  double compute = 0;       // sum of its forward and backward durations
  double forward = 0, backward = 0;  // the two parts of `compute`
  int sends = 0;            // messages it sent (forward and backward)
  double comm = 0;          // time busy sending and gathering
  double wait = 0;          // time blocked in receives
  std::vector<double> last_backward_end;  // per chunk: end of its last backward
  std::vector<double> backward_ends;      // the end of every backward, in the stage's order
  int peak_in_flight = 0;   // most (micro-batch, chunk) forwards whose backward has not run
};

struct ReplayResult {
  bool deadlock = false;
  std::string deadlock_detail;  // which stages wait on what
  double makespan = 0;          // the last stage's finish
  std::vector<StageTimeline> stages;
};

ReplayResult replay(const ReplayInput& in);

// The paper's bubble fraction t_pb / t_id: (makespan - ideal) / ideal, where ideal is the most
// compute any one stage does (m * (t_f + t_b) on balanced stages).
double bubble_fraction(const ReplayResult& r);

}  // namespace ptdp::sim
