#include "core/parallel/schedule.h"

#include <algorithm>
#include <string>

#include "core/common/error.h"

namespace ptdp {

const char* op_name(Op op) {
  switch (op) {
    case Op::RecvForward: return "RecvForward";
    case Op::Forward: return "Forward";
    case Op::SendForward: return "SendForward";
    case Op::RecvBackward: return "RecvBackward";
    case Op::Backward: return "Backward";
    case Op::SendBackward: return "SendBackward";
  }
  return "?";
}

Peer forward_peer(int p, int stage, int chunk) {
  return stage + 1 < p ? Peer{stage + 1, chunk} : Peer{0, chunk + 1};
}

Peer backward_peer(int p, int stage, int chunk) {
  return stage > 0 ? Peer{stage - 1, chunk} : Peer{p - 1, chunk - 1};
}

namespace {

// Appends the receive / compute / send triple of one forward or backward.
struct Emitter {
  int p, v, stage;
  std::vector<Action>& out;
  void forward(int k, int j) {
    if (!(stage == 0 && j == 0)) out.push_back({Op::RecvForward, k, j});
    out.push_back({Op::Forward, k, j});
    if (!(stage == p - 1 && j == v - 1)) out.push_back({Op::SendForward, k, j});
  }
  void backward(int k, int j) {
    if (!(stage == p - 1 && j == v - 1)) out.push_back({Op::RecvBackward, k, j});
    out.push_back({Op::Backward, k, j});
    if (!(stage == 0 && j == 0)) out.push_back({Op::SendBackward, k, j});
  }
};

}  // namespace

std::vector<Action> make_schedule(ScheduleKind kind, int p, int m, int v, int stage) {
  PTDP_CHECK(p >= 1 && m >= 1 && v >= 1, "p={} m={} v={}", p, m, v);
  PTDP_CHECK(stage >= 0 && stage < p, "stage {} of {}", stage, p);
  std::vector<Action> out;
  out.reserve(size_t(6) * m * v);
  Emitter e{p, v, stage, out};
  if (kind == ScheduleKind::GPipe) {
    PTDP_CHECK(v == 1, "gpipe has one chunk per stage (v={})", v);
    for (int k = 0; k < m; ++k) e.forward(k, 0);
    for (int k = 0; k < m; ++k) e.backward(k, 0);
    return out;
  }
  if (kind == ScheduleKind::OneFOneB) {
    PTDP_CHECK(v == 1, "1f1b has one chunk per stage (v={})", v);
    const int warmup = std::min(p - stage - 1, m);
    const int steady = m - warmup;
    for (int k = 0; k < warmup; ++k) e.forward(k, 0);
    for (int i = 0; i < steady; ++i) {
      e.forward(warmup + i, 0);
      e.backward(i, 0);
    }
    for (int i = steady; i < m; ++i) e.backward(i, 0);
    return out;
  }
  // Interleaved (Megatron's forward_backward_pipelining_with_interleaving, paper era).
  PTDP_CHECK(m % p == 0, "the interleaved schedule needs m ({}) to be a multiple of p ({})", m, p);
  const int total = m * v, group = p * v;
  // Virtual micro-batch k -> (micro-batch, chunk): groups of p micro-batches go through chunk 0,
  // then the same p through chunk 1, and so on; backward visits the chunks in reverse.
  auto microbatch = [&](int k) { return (k / group) * p + k % p; };
  auto chunk = [&](int k, bool fwd) {
    const int j = (k % group) / p;
    return fwd ? j : v - 1 - j;
  };
  const int warmup = std::min((p - stage - 1) * 2 + (v - 1) * p, total);
  const int steady = total - warmup;
  for (int k = 0; k < warmup; ++k) e.forward(microbatch(k), chunk(k, true));
  for (int i = 0; i < steady; ++i) {
    const int kf = warmup + i;
    e.forward(microbatch(kf), chunk(kf, true));
    e.backward(microbatch(i), chunk(i, false));
  }
  for (int i = steady; i < total; ++i) e.backward(microbatch(i), chunk(i, false));
  return out;
}

}  // namespace ptdp
