// `ptdp accept` as a fleet: launched by srun or mpirun over many nodes (one process per node),
// every process runs the node's checks, then the inter-node checks run over the whole job, and
// rank 0 gathers every node's verdict into one report that names the failing checks, the
// outliers (a node slower than the fleet's median by more than the fleet's spread, even above
// its threshold) and the nodes to leave out (`srun --exclude=...`).
#pragma once
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/comm/communicator.h"
#include "experiments/accept_profile.h"

namespace ptdp {

// The node a process runs on: $SLURMD_NODENAME (Slurm's name for it) if set, else the host name.
std::string fleet_node_name();

// A process's place among the job's processes on its node (by node name, in rank order):
// srun --ntasks-per-node=8 gives local 0..7 and per_node 8. Collective.
struct FleetPlace {
  int local = 0, per_node = 1;
};
FleetPlace fleet_place(Communicator& world, const std::string& node);

// Inter-node checks over `world` (every process calls them): an in-place all-reduce of `mib` MiB
// f32 over every process (nccl-tests' busbw from the slowest process's time, the same figure on
// every process; elements that came out wrong), then, one process
// at a time, a send of `mib` MiB to the next process on another node (bytes over the time until
// the receiver's acknowledgement; the receiver counts wrong elements). A process's p2p figure is
// the better of the transfer it sent and the one it received: a slow link slows both its ends,
// a slow node both of its transfers. A job on one node gets both as SKIP.
std::vector<Check> internode_checks(Communicator& world, const std::string& node, const AcceptProfile& p, int reps);
// The same with the transfers over `data` (the same ranks as `world`, e.g. an NCCL world of one
// GPU per process) in buffers of `be` (that GPU's backend); `world` still meets, times and
// gathers. `where` names the buffers in the detail ("GPUs", ...).
std::vector<Check> internode_checks(Communicator& world, const std::string& node, const AcceptProfile& p, int reps,
                                    Communicator& data, Backend& be, const std::string& where);

struct FleetMember {
  std::string node, device;
  int rank = 0;
  std::vector<Check> checks;
  int gpu = -1;  // the one GPU the process checked (one process per GPU), or -1: every GPU it sees
  // "node3", or "node3 gpu5" for a process of one GPU: the report's name of its row.
  std::string row_name() const;
};

// Every process's member on rank 0, in rank order (an empty vector elsewhere). Collective.
std::vector<FleetMember> gather_fleet(Communicator& world, const FleetMember& me);

struct FleetRow {
  const FleetMember* member = nullptr;
  std::vector<std::string> failed;    // checks that ran and failed
  std::vector<std::string> outliers;  // "metric value (fleet median M, spread S)"
  bool excluded() const { return !failed.empty() || !outliers.empty(); }
};

struct FleetVerdict {
  std::vector<FleetRow> rows;
  std::vector<std::string> exclude;  // nodes, once each, in rank order
  bool passed = false;               // every check that ran passed, no outlier, something ran
};

// Outliers, for each metric of at-least checks measured on 3 members or more: a member whose
// value is below the other members' median by more than their spread, 3 scaled median absolute
// deviations (a robust three sigma) and at least `min_spread` of that median (the profile's
// accept.fleet.min_spread: its machines' run-to-run noise), so that equal nodes' noise names
// nobody. Leaving the member out keeps a slow one from widening its own yardstick.
FleetVerdict judge_fleet(const std::vector<FleetMember>& members, double min_spread);

std::string fleet_json(const std::vector<FleetMember>& members, const FleetVerdict& v, const std::string& profile,
                       const std::string& git_sha, const std::string& timestamp);
// The first line of fleet_csv's report.
extern const char kFleetCsvHeader[];
std::string fleet_csv(const FleetVerdict& v, const std::string& profile, const std::string& git_sha,
                      const std::string& timestamp);
void print_fleet(const FleetVerdict& v);

}  // namespace ptdp
