// The op contracts are Backend's (op_contracts.cpp), so every backend refuses a broken call the
// same way: one list of broken calls, run on the CPU backend, the host-device test backend and
// (in the GPU suite) the CUDA backend, each refused with the same message.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/testing/host_device_backend.h"
#ifdef PTDP_HAVE_CUDA
#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/device_info.h"
#endif

namespace ptdp {
namespace {

constexpr DType kContractF32 = DType::F32;

// A call with one operand or size that breaks its op's contract, and the message that says so.
struct Refusal {
  const char* name;
  std::function<void(Backend&)> call;
  std::string message;
};

// The layers' ops.
std::vector<Refusal> layer_refusals() {
  return {
      {"linear output shape",
       [](Backend& be) {
         Tensor y = be.empty({4, 2}, kContractF32);
         be.linear_forward(y, be.empty({4, 8}, kContractF32), be.empty({3, 8}, kContractF32), nullptr);
       },
       "linear output has shape [4, 2], expected [4, 3]"},
      {"linear weight grad dtype",
       [](Backend& be) {
         Tensor dw = be.empty({3, 8}, DType::F64);
         be.linear_backward(nullptr, false, dw, nullptr, be.empty({4, 3}, kContractF32), be.empty({4, 8}, kContractF32),
                            be.empty({3, 8}, kContractF32));
       },
       "linear weight grad is f64, expected f32"},
      {"linear input not 2-d",
       [](Backend& be) {
         Tensor y = be.empty({4, 3}, kContractF32);
         be.linear_forward(y, be.empty({32}, kContractF32), be.empty({3, 8}, kContractF32), nullptr);
       },
       "linear input must be 2-d, got [32]"},
      {"layernorm mean rows",
       [](Backend& be) {
         Tensor y = be.empty({4, 8}, kContractF32), mean = be.empty({3}, kContractF32), rstd = be.empty({4}, kContractF32);
         be.layernorm_forward(y, mean, rstd, be.empty({4, 8}, kContractF32), be.empty({8}, kContractF32), be.empty({8}, kContractF32), 1e-5);
       },
       "layernorm mean has shape [3], expected [4]"},
      {"layernorm weight undefined",
       [](Backend& be) {
         Tensor y = be.empty({4, 8}, kContractF32), mean = be.empty({4}, kContractF32), rstd = be.empty({4}, kContractF32);
         be.layernorm_forward(y, mean, rstd, be.empty({4, 8}, kContractF32), Tensor(), be.empty({8}, kContractF32), 1e-5);
       },
       "layernorm weight is undefined"},
      {"layernorm input grad overlapping the output grad",
       [](Backend& be) {
         Tensor both = be.empty({5, 8}, kContractF32), dg = be.empty({8}, kContractF32), db = be.empty({8}, kContractF32);
         Tensor dx = both.view(0, {4, 8}), dy = both.view(8, {4, 8});
         be.layernorm_backward(dx, dg, db, dy, be.empty({4, 8}, kContractF32), be.empty({8}, kContractF32), be.empty({4}, kContractF32),
                               be.empty({4}, kContractF32));
       },
       "layernorm_backward: the input grad overlaps the output grad (the CUDA kernels need them apart)"},
      {"add_layernorm residual overlapping the input",
       [](Backend& be) {
         Tensor both = be.empty({5, 8}, kContractF32), y = be.empty({4, 8}, kContractF32);
         Tensor x = both.view(0, {4, 8}), r = both.view(8, {4, 8});
         Tensor mean = be.empty({4}, kContractF32), rstd = be.empty({4}, kContractF32);
         be.add_layernorm_forward(y, mean, rstd, x, r, be.empty({8}, kContractF32), be.empty({8}, kContractF32), 1e-5);
       },
       "add_layernorm_forward: the input overlaps the residual (the CUDA kernels need them apart)"},
      {"add_rmsnorm residual shape",
       [](Backend& be) {
         Tensor x = be.empty({4, 8}, kContractF32), y = be.empty({4, 8}, kContractF32), rstd = be.empty({4}, kContractF32);
         be.add_rmsnorm_forward(y, rstd, x, be.empty({4, 9}, kContractF32), be.empty({8}, kContractF32), 1e-5);
       },
       "residual has shape [4, 9], expected [4, 8]"},
      {"layernorm residual grad shape",
       [](Backend& be) {
         Tensor dx = be.empty({4, 8}, kContractF32), dg = be.empty({8}, kContractF32), db = be.empty({8}, kContractF32);
         Tensor residual = be.empty({4, 7}, kContractF32);
         be.layernorm_backward(dx, dg, db, be.empty({4, 8}, kContractF32), be.empty({4, 8}, kContractF32),
                               be.empty({8}, kContractF32), be.empty({4}, kContractF32), be.empty({4}, kContractF32),
                               &residual);
       },
       "residual grad has shape [4, 7], expected [4, 8]"},
      {"rmsnorm residual grad overlapping the input grad",
       [](Backend& be) {
         Tensor both = be.empty({5, 8}, kContractF32), dg = be.empty({8}, kContractF32);
         Tensor dx = both.view(0, {4, 8}), residual = both.view(8, {4, 8});
         be.rmsnorm_backward(dx, dg, be.empty({4, 8}, kContractF32), be.empty({4, 8}, kContractF32),
                             be.empty({8}, kContractF32), be.empty({4}, kContractF32), &residual);
       },
       "rmsnorm_backward: the input grad overlaps the residual grad (the CUDA kernels need them apart)"},
      {"rmsnorm rstd dtype",
       [](Backend& be) {
         Tensor y = be.empty({4, 8}, kContractF32), rstd = be.empty({4}, DType::BF16);
         be.rmsnorm_forward(y, rstd, be.empty({4, 8}, kContractF32), be.empty({8}, kContractF32), 1e-5);
       },
       "rmsnorm rstd is bf16, expected f32"},
      {"rope odd head size",
       [](Backend& be) {
         Tensor x = be.empty({4, 9}, kContractF32);
         be.rope(x, x, 2, 1, 3, 1e4, false);
       },
       "rope: bad sizes s=2 a=1 hd=3 theta=10000 (hd must be even)"},
      {"rope rows not a multiple of s",
       [](Backend& be) {
         Tensor x = be.empty({5, 6}, kContractF32);
         be.rope(x, x, 2, 1, 2, 1e4, false);
       },
       "rope: qkv must be [b*s, 3*a*hd] with an even head size, got [5, 6] for s=2 a=1 hd=2"},
      {"swiglu odd input",
       [](Backend& be) {
         Tensor y = be.empty({4, 3}, kContractF32);
         be.swiglu_forward(y, be.empty({4, 7}, kContractF32));
       },
       "swiglu: input must be [n, 2f], got [4, 7]"},
      {"gelu output grad shape",
       [](Backend& be) {
         Tensor dx = be.empty({4, 8}, kContractF32);
         be.gelu_backward(dx, be.empty({4, 8}, kContractF32), be.empty({4, 7}, kContractF32));
       },
       "gelu output grad has shape [4, 7], expected [4, 8]"},
      {"attention sizes",
       [](Backend& be) {
         Tensor y = be.empty({0, 8}, kContractF32), probs = be.empty({1, 2, 0, 0}, kContractF32);
         be.attention_forward(y, probs, be.empty({0, 24}, kContractF32), 1, 0, 2, 4);
       },
       "attention: bad sizes b=1 s=0 a=2 hd=4"},
      {"attention probs shape",
       [](Backend& be) {
         Tensor y = be.empty({4, 8}, kContractF32), probs = be.empty({1, 2, 3, 3}, kContractF32);
         be.attention_forward(y, probs, be.empty({4, 24}, kContractF32), 1, 4, 2, 4);
       },
       "attention probs has shape [1, 2, 3, 3], expected [1, 2, 4, 4]"},
      {"gqa groups",
       [](Backend& be) {
         Tensor y = be.empty({4, 24}, kContractF32);
         be.gqa_expand(y, be.empty({4, 20}, kContractF32), 4, 3, 2);
       },
       "gqa: 3 query groups must divide 4 heads (head size 2)"},
      {"gqa_reduce input shape",
       [](Backend& be) {
         Tensor dx = be.empty({4, 16}, kContractF32);
         be.gqa_reduce(dx, be.empty({4, 16}, kContractF32), 4, 2, 2);
       },
       "gqa_reduce input has shape [4, 16], expected [4, 24]"},
  };
}

// The embedding, the cross-entropy and the element-wise ops.
std::vector<Refusal> edge_refusals() {
  return {
      {"embedding tokens dtype",
       [](Backend& be) {
         Tensor x = be.empty({4, 8}, kContractF32);
         be.embedding_forward(x, be.empty({4}, kContractF32), be.empty({16, 8}, kContractF32), 0, nullptr, 4);
       },
       "tokens is f32, expected i32"},
      {"embedding positions",
       [](Backend& be) {
         Tensor x = be.empty({4, 8}, kContractF32), wpe = be.empty({2, 8}, kContractF32);
         be.embedding_forward(x, be.empty({4}, DType::I32), be.empty({16, 8}, kContractF32), 0, &wpe, 4);
       },
       "position embedding [2, 8] too small for s=4 h=8"},
      {"xent v_valid",
       [](Backend& be) {
         Tensor max = be.empty({4}, kContractF32);
         be.xent_row_max(max, be.empty({4, 8}, kContractF32), 9);
       },
       "xent_row_max: v_valid 9 outside [0, 8]"},
      {"xent targets",
       [](Backend& be) {
         Tensor tgt = be.empty({4}, kContractF32);
         be.xent_target_logit(tgt, be.empty({4, 8}, kContractF32), be.empty({5}, DType::I32), 0, 8);
       },
       "targets has shape [5], expected [4]"},
      {"xent loss statistic",
       [](Backend& be) {
         Tensor loss = be.empty({4}, kContractF32);
         be.xent_loss(loss, be.empty({3}, kContractF32), be.empty({4}, kContractF32), be.empty({4}, kContractF32));
       },
       "cross-entropy max has shape [3], expected [4]"},
      {"xent loss dtype",
       [](Backend& be) {
         Tensor loss = be.empty({4}, DType::BF16);
         be.xent_loss(loss, be.empty({4}, DType::BF16), be.empty({4}, DType::BF16), be.empty({4}, DType::BF16));
       },
       "the loss is f32 or f64, not bf16"},
      {"add rhs",
       [](Backend& be) {
         Tensor y = be.empty({4, 2}, kContractF32);
         be.add(y, be.empty({4, 2}, kContractF32), be.empty({8}, kContractF32));
       },
       "add rhs has shape [8], expected [4, 2]"},
      {"add_ numel",
       [](Backend& be) {
         Tensor y = be.empty({4}, kContractF32);
         be.add_(y, be.empty({3}, kContractF32));
       },
       "add_: 3 elements into 4"},
      {"adamw moment shape",
       [](Backend& be) {
         Tensor p = be.empty({4}, kContractF32), m = be.empty({2, 2}, kContractF32), v = be.empty({4}, kContractF32);
         be.adamw(p, be.empty({4}, kContractF32), m, v, AdamWParams{});
       },
       "adamw m has shape [2, 2], expected [4]"},
      {"copy numel",
       [](Backend& be) {
         Tensor dst = be.empty({4}, kContractF32);
         be.copy(dst, be.empty({3}, kContractF32));
       },
       "copy: 3 elements into 4"},
  };
}

std::vector<Refusal> refusals() {
  std::vector<Refusal> all = layer_refusals(), edge = edge_refusals();
  all.insert(all.end(), edge.begin(), edge.end());
  return all;
}

std::unique_ptr<Backend> make_backend(const std::string& name) {
  if (name == "cpu") return make_cpu_backend();
  if (name == "host_device") return testing::make_host_device_backend();
#ifdef PTDP_HAVE_CUDA
  if (name == "cuda") return make_cuda_backend(0);
#endif
  throw RuntimeError("no backend " + name);
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Calls f, which must throw RuntimeError whose message ends with `tail` (after PTDP_CHECK's
// condition, file and line).
void expect_refused(const std::function<void()>& f, const std::string& tail, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << what << ": accepted, expected: " << tail;
  } catch (const RuntimeError& e) {
    EXPECT_TRUE(ends_with(e.what(), tail)) << what << ": " << e.what() << "\n  expected the end: " << tail;
  }
}

class OpContracts : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
#ifdef PTDP_HAVE_CUDA
    std::string reason;
    if (GetParam() == "cuda" && cuda::device_count(&reason) == 0) GTEST_SKIP() << "no GPU here: " << reason;
#endif
    be = make_backend(GetParam());
  }
  std::unique_ptr<Backend> be;
};

TEST_P(OpContracts, EveryBackendRefusesABrokenCallWithTheSameMessage) {
  for (const Refusal& r : refusals()) expect_refused([&] { r.call(*be); }, r.message, r.name);
}

// An operand on the other side of the bus is refused naming it, before any arithmetic.
TEST_P(OpContracts, AnOperandOnTheWrongDeviceIsRefusedNamingIt) {
  Tensor y = be->empty({4, 8}, kContractF32);
  if (be->device() == Device::CPU) {
    float host[32];
    const Tensor device = Tensor::wrap(host, {4, 8}, kContractF32, Device::CUDA);
    expect_refused([&] { be->gelu_forward(y, device); },
                   "gelu input is a device tensor: the cpu backend works on host tensors (download with the "
                   "device backend's copy)",
                   "a device input");
  } else {
    const Tensor host = Tensor::empty({4, 8}, kContractF32);
    expect_refused([&] { be->gelu_forward(y, host); },
                   "gelu input is a host tensor: the " + be->name() +
                       " backend works on device tensors (upload with Backend::copy)",
                   "a host input");
  }
}

// A dtype the backend does not compute in is refused naming the op and the dtype.
TEST_P(OpContracts, AnInputOfADtypeTheBackendDoesNotComputeInIsRefused) {
  Tensor y = be->empty({4, 8}, DType::I32);
  try {
    be->gelu_forward(y, be->empty({4, 8}, DType::I32));
    ADD_FAILURE() << "an i32 input accepted";
  } catch (const RuntimeError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("gelu_forward: the " + be->name() + " backend computes in f32, "), std::string::npos)
        << what;
    EXPECT_TRUE(ends_with(what, ", not i32")) << what;
  }
}

std::string backend_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

INSTANTIATE_TEST_SUITE_P(Host, OpContracts, ::testing::Values("cpu", "host_device"), backend_name);
#ifdef PTDP_HAVE_CUDA
INSTANTIATE_TEST_SUITE_P(Cuda, OpContracts, ::testing::Values("cuda"), backend_name);
#endif

}  // namespace
}  // namespace ptdp
