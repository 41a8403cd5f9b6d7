// Test helpers for parallel runs: train a model under a (t, d) layout on local ranks and
// collect the losses and the full logical weights, to compare with one rank.
#pragma once
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "core/comm/communicator.h"
#include "core/config/settings.h"
#include "core/model/config.h"
#include "core/train/trainer.h"

namespace ptdp::testing {

struct RunResult {
  std::vector<double> losses;                          // per iteration
  double eval_loss = 0;  // after training: Trainer::evaluate over the next global batch of the data
  std::map<std::string, std::vector<double>> weights;  // name -> logical (unsplit) tensor
  int64_t peak_activation_bytes = 0;  // rank 0's most activation bytes stashed at once, over the iterations
};

struct Layout {
  int tp = 1, dp = 1, pp = 1, vpp = 1;
  int first = 0, last = 0;  // layers of the first and last stages (0: an even share)
  bool embedding = false, loss = false;  // counted as a layer each in the split (layer_split.h)
  std::vector<int> chunks;               // --pipeline-model-parallel-layout's virtual stages (layer_split.h)
  ScheduleKind schedule = ScheduleKind::OneFOneB;
  Recompute recompute = Recompute::None;
  bool recompute_act = false;  // --recompute-activation
  bool scatter_gather = true;
  bool sequence_parallel = false;  // t > 1
  bool overlap = false;
  int64_t bucket_elems = 40'000'000;
  int zero = 0;              // 1: the distributed optimizer (sharded over dp)
  int cp = 1;                // context-parallel size (block attention over the group)
  CpComm cp_comm = CpComm::P2P;
  bool flash = false;        // block attention without context parallelism (--attention-backend flash)
  DType dtype = DType::F32;  // bf16/f16: mixed precision (the weights compared are the f32 masters)
  // cpu | host-device (device plumbing on the CPU, testing/host_device_backend.h) | cuda (every
  // rank a thread on GPU 0). Not cpu: communicators stage device tensors through host memory.
  std::string backend = "cpu";
  // local: the threads' communicator (device tensors staged through host memory); nccl (with
  // backend cuda): NCCL over one GPU per rank, rank r on GPU r.
  std::string comm = "local";
  std::string name() const;
};
// How gtest prints a Layout (its name, not its bytes).
void PrintTo(const Layout& l, std::ostream* os);

// Trains `iters` steps of the model on synthetic data (seeded) with the given layout on
// t*c*p*d local ranks (threads), and gathers the final weights from every shard. Layout fields
// override those of tc.
RunResult train_parallel(const ModelConfig& c, const TrainConfig& tc, const Layout& layout, int iters,
                         uint64_t seed);

// The same on the ranks of `world` (local threads or MPI processes), called by every rank;
// every rank returns the losses and the assembled logical weights.
RunResult train_on_world(Communicator& world, const ModelConfig& c, const TrainConfig& tc, const Layout& layout,
                         int iters, uint64_t seed);

// The training settings of the equivalence tests: micro-batch b, global batch B, peak lr 1e-3.
// Whether `ranks` NCCL ranks can run on `gpus` GPUs: one each, or shared where NCCL allows it
// (core/comm/nccl/nccl_sharing.h); when not, *why says what is missing.
bool nccl_ranks_fit(int ranks, int gpus, std::string* why);

TrainConfig equivalence_train_config(int micro_batch, int global_batch = 8);

// The backend named as in Layout::backend.
std::unique_ptr<Backend> make_test_backend(const std::string& name);

// Largest norm-wise relative difference over all tensors, and the same over the whole model.
struct WeightDiff {
  double worst_tensor = 0, whole = 0;
  std::string worst_name;
};
WeightDiff compare_weights(const RunResult& ref, const RunResult& got);

}  // namespace ptdp::testing
