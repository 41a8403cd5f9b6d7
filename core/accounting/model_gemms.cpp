#include "core/accounting/model_gemms.h"

#include <utility>

namespace ptdp::cpu {

std::vector<GemmShape> model_gemms(const ModelConfig& c, int64_t rows, int tp) {
  const int64_t h = c.hidden, f = c.ffn_hidden(), v = c.padded_vocab(tp), qkv = c.qkv_width();
  const int64_t up = c.arch == Arch::Llama ? 2 * f : f;  // llama: gate and up in one GEMM
  std::vector<GemmShape> g;
  for (auto [out, in] : {std::pair{qkv / tp, h}, {h, h / tp}, {up / tp, h}, {h, f / tp}, {v / tp, h}}) {
    g.push_back({false, true, rows, out, in});   // forward: y = x w^T
    g.push_back({false, false, rows, in, out});  // input grad: dx = dy w
    g.push_back({true, false, out, in, rows});   // weight grad: dw = dy^T x
  }
  return g;
}

}  // namespace ptdp::cpu
