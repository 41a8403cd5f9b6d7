#include "core/accounting/model_gemms.h"

#include "core/model/tensor_inventory.h"

namespace ptdp::cpu {

std::vector<GemmShape> model_gemms(const ModelConfig& c, int64_t rows, int tp) {
  const ModelTensors m = model_tensors(c, c.padded_vocab(tp));
  std::vector<ModuleGemm> gemms;
  for (int i = 0; i < kLayerModules; ++i) gemms.push_back(module_gemm(m, i, tp));  // llama: gate and up in one GEMM
  gemms.push_back(logits_gemm(m, tp));
  std::vector<GemmShape> g;
  for (const ModuleGemm& x : gemms) {
    g.push_back({false, true, rows, x.out, x.in});   // forward: y = x w^T
    g.push_back({false, false, rows, x.in, x.out});  // input grad: dx = dy w
    g.push_back({true, false, x.out, x.in, rows});   // weight grad: dw = dy^T x
  }
  return g;
}

}  // namespace ptdp::cpu
