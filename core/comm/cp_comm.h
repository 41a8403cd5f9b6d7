// How a context-parallel group computes attention (--cp-comm-type, Megatron-core's names), here
// below the model layer so that core/model/context_attention.h can take it; core/config/settings.h
// lists it with the run's other settings.
#pragma once
#include <array>
#include <string_view>
#include <utility>

#include "core/common/enum_names.h"

namespace ptdp {

// p2p passes key/value blocks around a ring, a2a exchanges heads for sequence (Ulysses),
// allgather gathers every key and value first.
enum class CpComm { P2P, A2A, AllGather };

template <>
struct EnumNames<CpComm> {
  static constexpr std::array values{std::pair{CpComm::P2P, std::string_view("p2p")},
                                     std::pair{CpComm::A2A, std::string_view("a2a")},
                                     std::pair{CpComm::AllGather, std::string_view("allgather")}};
};

}  // namespace ptdp
