// Pipeline schedules as data: the ordered actions (receive, compute, send) of one pipeline stage
// for GPipe, 1F1B (PipeDream-Flush) and Megatron's interleaved 1F1B. The executor runs them, the
// simulator (core/sim) replays them.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/common/enum_names.h"

namespace ptdp {

enum class ScheduleKind { GPipe, OneFOneB, Interleaved };
template <>
struct EnumNames<ScheduleKind> {
  static constexpr std::array values{std::pair{ScheduleKind::GPipe, std::string_view("gpipe")},
                                     std::pair{ScheduleKind::OneFOneB, std::string_view("1f1b")},
                                     std::pair{ScheduleKind::Interleaved, std::string_view("interleaved")}};
};

enum class Op : uint8_t { RecvForward, Forward, SendForward, RecvBackward, Backward, SendBackward };
const char* op_name(Op op);

struct Action {
  Op op;
  int microbatch;
  int chunk;  // model chunk on this stage, 0..v-1
  bool operator==(const Action&) const = default;
};

// Ordered actions of `stage` (0..p-1) for m micro-batches and v chunks per stage (v = 1 unless
// interleaved). Forward(k, j) is preceded by RecvForward(k, j) unless (stage 0, chunk 0) and
// followed by SendForward(k, j) unless (stage p-1, chunk v-1); Backward(k, j) is preceded by
// RecvBackward(k, j) unless (stage p-1, chunk v-1) and followed by SendBackward(k, j) unless
// (stage 0, chunk 0). Sends are posted asynchronously and receives block, in this order; the
// order respects the cross-stage dependencies, so no stage waits forever.
//   gpipe:       all m forwards, then all m backwards in micro-batch order 0..m-1.
//   1f1b:        min(p-stage-1, m) warm-up forwards, then one forward / one backward, then the
//                remaining backwards (at most p micro-batches in flight on stage 0).
//   interleaved: m*v virtual micro-batches; virtual k runs chunk (k mod p*v) div p forward and
//                v-1 minus that backward; warm-up (p-stage-1)*2 + (v-1)*p forwards, capped at
//                m*v. Needs m to be a multiple of p (PTDP_CHECK).
std::vector<Action> make_schedule(ScheduleKind kind, int p, int m, int v, int stage);

// Where a SendForward/SendBackward of (stage, chunk) goes: the peer stage and its chunk. For a
// forward send the peer is the next stage (stage p-1, chunk j -> stage 0, chunk j+1); for a
// backward send the previous one (stage 0, chunk j -> stage p-1, chunk j-1).
struct Peer {
  int stage, chunk;
};
Peer forward_peer(int p, int stage, int chunk);
Peer backward_peer(int p, int stage, int chunk);

}  // namespace ptdp
