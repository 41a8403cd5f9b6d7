// The GPU checks of `ptdp accept` (a profile of kind = "gpu"): a bf16 GEMM through the CUDA
// backend (cuBLASLt) and the STREAM add kernel in device memory on every visible GPU, the
// slowest GPU counting; NCCL all-reduce bus bandwidth over every visible GPU and NCCL
// send/recv bandwidth GPU 0 -> GPU 1, all in one process (ncclCommInitAll). Timed with CUDA
// events after warm-up calls, the GEMM and memory checks after an L2 flush. With one GPU the
// communication checks are SKIP. Compiled in every build; without CUDA there are no GPUs.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/comm/communicator.h"
#include "experiments/accept_memory.h"
#include "experiments/accept_profile.h"

namespace ptdp {

// The GPUs this process checks: every visible one, or only `device` after check_one_gpu(device)
// (a fleet launched one process per GPU: each process its own GPU, each GPU a row of the report).
void check_one_gpu(int device);
std::vector<int> checked_gpus();

// The GPUs visible to this process; 0 with `why` set when there are none (no driver, no
// device, or a build without the CUDA backend).
int visible_gpus(std::string* why);

// Refuses (UsageError, exit code 2) a GPU profile on a machine without a GPU, or the
// communication checks in a build without NCCL: "--hardware FLAG: ... no GPU here (why)".
// Returns the number of visible GPUs.
int require_gpus(const std::string& hardware_flag, const AcceptProfile& p, bool wants_nccl);

// The least free memory of the checked GPUs (cudaMemGetInfo), and which GPU; unknown (bytes < 0)
// in a build without CUDA.
MemoryAvailable gpu_memory_available();

// What the report's `device` says, e.g. "8 x NVIDIA H100 80GB HBM3".
std::string gpu_description();
// The CUDA runtime, driver and NCCL versions, e.g. "CUDA runtime 13.0, driver 13.0, NCCL 2.28.3".
std::string gpu_software();
// One line for the header: the GPUs, the node's count from the profile, CUDA and NCCL versions.
std::string gpu_summary(const AcceptProfile& p);

// The gemm, memory, allreduce and p2p checks that `wanted` names, in that order.
std::vector<Check> gpu_checks(const AcceptProfile& p, const std::function<bool(const std::string&)>& wanted,
                              int reps);

// The burn-in's load: the gemm check's GEMM on every visible GPU at once, back to back for
// `seconds`; `while_loaded` is called once near the end while the GEMMs still run (the sensors
// are read then). The slowest GPU's sustained rate (every GEMM's FLOPs over the whole time), and
// the sampled entries of each GPU's last result checked against the host and how many were wrong.
struct GemmLoad {
  double tflops = 0;
  int64_t checked = 0, wrong = 0;
};
GemmLoad gemm_load(const AcceptProfile& p, double seconds, const std::function<void()>& while_loaded);

// The backend the training check runs on: the CUDA backend on the first checked GPU.
std::unique_ptr<Backend> make_gpu_train_backend();

// A GPU fleet's inter-node checks (accept_fleet.h) between GPUs: over an NCCL world of one GPU per
// process (`device`, bootstrapped over `world`), buffers in device memory. A build without NCCL
// runs them in host memory over `world`.
std::vector<Check> gpu_internode_checks(Communicator& world, const std::string& node, const AcceptProfile& p, int reps,
                                        int device);

}  // namespace ptdp
