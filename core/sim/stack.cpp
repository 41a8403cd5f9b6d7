#include "core/sim/stack.h"

#include "core/common/error.h"

namespace ptdp::sim {

const std::vector<std::string>& stack_names() {
  static const std::vector<std::string> names = {"megatron-2021", "megatron-2022", "mcore"};
  return names;
}

SoftwareStack software_stack(const std::string& name) {
  SoftwareStack s;
  s.name = name;
  if (name == "megatron-2021") {
    s.nccl_first_nic_per_switch = true;
    return s;
  }
  if (name == "megatron-2022" || name == "mcore") {
    s.tp_backward_overlap = true;
    s.fused_grad_accumulation = true;
    s.free_pipeline_outputs = true;
    s.sequence_parallel = true;
    if (name == "megatron-2022") return s;
    s.flash_attention = true;
    s.tp_comm_overlap = true;
    s.dp_overlap = true;
    s.param_gather_overlap = true;
    s.grad_bytes = 4;  // bf16 training reduces fp32 gradients (--accumulate-allreduce-grads-in-fp32)
    return s;
  }
  usage_error("--stack '{}' must be megatron-2021, megatron-2022 or mcore", name);
}

SoftwareStack checked_stack(const std::string& name, bool sequence_parallel) {
  const SoftwareStack s = software_stack(name);
  if (sequence_parallel && !s.sequence_parallel)
    usage_error("--sequence-parallel: --stack {} has no sequence parallelism (it came with Korthikanti et al. 2022); "
                "choose --stack megatron-2022 or mcore, or leave out --sequence-parallel",
                name);
  return s;
}

}  // namespace ptdp::sim
