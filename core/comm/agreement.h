// Agreement on failures across the ranks of a world (MPI processes or local threads): a rank
// that fails in a phase (config check, dataset open, checkpoint load or save) must not leave the
// others waiting for it until the timeout. Every rank runs the phase, then all exchange whether
// they failed (one all-gather of a flag) and the first failing rank's message (a broadcast); if
// any failed, every rank throws the same AgreedError, so the job ends at once with the cause.
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/comm/communicator.h"

namespace ptdp {

// The failure every rank of a world agreed on. usage(): the failing rank's error was bad input
// (UsageError); the text names the failing rank and its cause.
class AgreedError : public std::runtime_error {
 public:
  AgreedError(bool usage, int failing_rank, const std::string& what)
      : std::runtime_error(what), usage_(usage), failing_rank_(failing_rank) {}
  bool usage() const { return usage_; }
  int failing_rank() const { return failing_rank_; }

 private:
  bool usage_;
  int failing_rank_;
};

// Runs fn on this rank, then agrees with every rank of `world` (a collective: every rank must
// call it, in the same order). Returns when no rank failed; otherwise throws AgreedError on every
// rank: "<cause> (rank R of N)", or "(on all N ranks)" / "(ranks R, S, ... of N)" when more failed.
// fn must not call collectives of `world` (a rank failing before one would leave the others in it).
void agree(Communicator& world, const std::function<void()>& fn);

// The same, for a failure already caught (null: this rank succeeded).
void agree_on(Communicator& world, std::exception_ptr failure);

// Checks that every rank holds the same values of the named fields (a collective). On a
// difference every rank throws AgreedError (usage): "the ranks of this job disagree on <field>:
// rank 0 has A, rank R has B (ranks R, ...); <hint>". Only hashes travel, plus the first
// differing value.
void require_same_fields(Communicator& world, const std::vector<std::pair<std::string, std::string>>& fields,
                         const std::string& hint);

// 64-bit FNV-1a of the bytes of s (stable across processes and builds).
uint64_t fnv1a64(const std::string& s);

}  // namespace ptdp
