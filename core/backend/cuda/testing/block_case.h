// One block of the block-attention op tests (flash_attention_forward/backward's arguments) and its
// description in a failure message.
#pragma once
#include <cstdint>
#include <string>

namespace ptdp::testing {

struct BlockCase {
  int b, sq, sk, a, g, hd;
  int64_t q_pos, k_pos;
  bool causal;
};

inline std::string describe(const BlockCase& c) {
  return "b=" + std::to_string(c.b) + " sq=" + std::to_string(c.sq) + " sk=" + std::to_string(c.sk) +
         " a=" + std::to_string(c.a) + " g=" + std::to_string(c.g) + " hd=" + std::to_string(c.hd) +
         " q_pos=" + std::to_string(c.q_pos) + " k_pos=" + std::to_string(c.k_pos) +
         (c.causal ? " causal" : " not causal");
}

}  // namespace ptdp::testing
