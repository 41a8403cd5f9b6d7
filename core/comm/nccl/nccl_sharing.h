// Several ranks of one NCCL communicator on one GPU. NCCL refuses it up to 2.29 ("Duplicate GPU
// detected"); 2.30 allows it when NCCL_MULTI_RANK_GPU_ENABLE=1 is set (experimental: the ranks
// share the GPU's SMs and memory, so it tests semantics, not bandwidth). The NCCL asked is the one
// loaded at run time (ncclGetVersion), not the headers ptdp was built with.
#pragma once
#include <string>

namespace ptdp {

// NCCL's version as NCCL encodes it (2.30.7 -> 23007).
int nccl_runtime_version();

// Whether this NCCL lets two ranks of one communicator use one GPU; when not, *why (if given) says
// what would allow it.
bool nccl_ranks_share_gpus(std::string* why = nullptr);

// The GPU of rank `rank` among `gpus`: its own while there are enough, else shared round-robin.
inline int nccl_rank_gpu(int rank, int gpus) { return gpus > 0 ? rank % gpus : 0; }

}  // namespace ptdp
