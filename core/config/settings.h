// The enumerated settings of a run (--precision, --backend, --comm, --data-order, --log-format,
// --stack, --cp-comm-type, --attention-backend) and their names.
#pragma once
#include <array>
#include <string_view>
#include <utility>

#include "core/backend/attention_choice.h"
#include "core/comm/cp_comm.h"
#include "core/common/enum_names.h"
#include "core/tensor/dtype.h"

namespace ptdp {

enum class Precision { F32, Bf16, F16 };
enum class BackendKind { Cpu, Cuda };
enum class CommKind { Local, Mpi, Nccl };
// The sample order of a dataset: ptdp (windows over the token stream, seeded Fisher-Yates) or
// megatron (Megatron-core's GPTDataset/BlendedDataset: documents packed, --split, blends).
enum class DataOrder { Ptdp, Megatron };
enum class LogFormat { Ptdp, Megatron };  // the progress line: ptdp's, or Megatron-LM's training_log line
// The software a simulated run models (--stack, core/sim/stack.h): Megatron-LM of the paper
// (megatron-2021), of Korthikanti et al. (megatron-2022), Megatron-Core (mcore), Megatron-DeepSpeed,
// or ptdp's own CUDA backend.
enum class StackKind { Megatron2021, Megatron2022, Mcore, MegatronDeepspeed, Ptdp };
// A simulated run's FP8 (--fp8-format, Megatron-core's flag; Transformer Engine's delayed scaling):
// none, e4m3 everywhere, or hybrid (e4m3 forward, e5m2 gradients). Same cost for both formats.
enum class Fp8Format { None, E4m3, Hybrid };
// CpComm (--cp-comm-type): core/comm/cp_comm.h.
// The attention kernels (--attention-backend): AttentionBackend, core/backend/attention_choice.h
// (the layers below the config resolve it against their backend).

template <>
struct EnumNames<Precision> {
  static constexpr std::array values{std::pair{Precision::F32, std::string_view("f32")},
                                     std::pair{Precision::Bf16, std::string_view("bf16")},
                                     std::pair{Precision::F16, std::string_view("f16")}};
};
template <>
struct EnumNames<BackendKind> {
  static constexpr std::array values{std::pair{BackendKind::Cpu, std::string_view("cpu")},
                                     std::pair{BackendKind::Cuda, std::string_view("cuda")}};
};
template <>
struct EnumNames<CommKind> {
  static constexpr std::array values{std::pair{CommKind::Local, std::string_view("local")},
                                     std::pair{CommKind::Mpi, std::string_view("mpi")},
                                     std::pair{CommKind::Nccl, std::string_view("nccl")}};
};
template <>
struct EnumNames<DataOrder> {
  static constexpr std::array values{std::pair{DataOrder::Ptdp, std::string_view("ptdp")},
                                     std::pair{DataOrder::Megatron, std::string_view("megatron")}};
};
template <>
struct EnumNames<LogFormat> {
  static constexpr std::array values{std::pair{LogFormat::Ptdp, std::string_view("ptdp")},
                                     std::pair{LogFormat::Megatron, std::string_view("megatron")}};
};

template <>
struct EnumNames<StackKind> {
  static constexpr std::array values{std::pair{StackKind::Megatron2021, std::string_view("megatron-2021")},
                                     std::pair{StackKind::Megatron2022, std::string_view("megatron-2022")},
                                     std::pair{StackKind::Mcore, std::string_view("mcore")},
                                     std::pair{StackKind::MegatronDeepspeed, std::string_view("megatron-deepspeed")},
                                     std::pair{StackKind::Ptdp, std::string_view("ptdp")}};
};

template <>
struct EnumNames<Fp8Format> {
  static constexpr std::array values{std::pair{Fp8Format::None, std::string_view("none")},
                                     std::pair{Fp8Format::E4m3, std::string_view("e4m3")},
                                     std::pair{Fp8Format::Hybrid, std::string_view("hybrid")}};
};

// The dtypes a setting may name (the optimizer's state: --exp-avg-dtype ...): f32, bf16 and f16,
// as --precision spells them (dtype_name names every DType).
template <>
struct EnumNames<DType> {
  static constexpr std::array values{std::pair{DType::F32, std::string_view("f32")},
                                     std::pair{DType::BF16, std::string_view("bf16")},
                                     std::pair{DType::F16, std::string_view("f16")}};
};
template <>
struct EnumNames<AttentionBackend> {
  static constexpr std::array values{std::pair{AttentionBackend::Auto, std::string_view("auto")},
                                     std::pair{AttentionBackend::Cudnn, std::string_view("cudnn")},
                                     std::pair{AttentionBackend::Flash, std::string_view("flash")},
                                     std::pair{AttentionBackend::Unfused, std::string_view("unfused")},
                                     // Megatron-core's names: fused (Transformer Engine's cuDNN attention), local
                                     // (Megatron's own, unfused)
                                     std::pair{AttentionBackend::Cudnn, std::string_view("fused")},
                                     std::pair{AttentionBackend::Unfused, std::string_view("local")}};
};

}  // namespace ptdp
