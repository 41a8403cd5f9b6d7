// cuDNN's fused attention through its C++ front end (cudnn_attention.h), which loads libcudnn at
// run time (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING): its handle to the library is the one global it
// asks its user to define, set here before any front-end call.
#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING
#define CUDNN_FRONTEND_SKIP_JSON_LIB
#include "core/backend/cuda/cudnn_attention.h"

#include <cudnn_frontend.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <tuple>
#include <unordered_map>

#include "core/common/error.h"

namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend

namespace ptdp::cuda {
namespace fe = cudnn_frontend;
namespace {

struct Library {
  std::string why;  // empty: loaded
  int64_t version = 0;
};

// libcudnn.so.9 (the library's dispatching entry) or, failing that, libcudnn_graph.so.9 (where the
// graph API the front end calls lives); PTDP_CUDNN_LIBRARY names the file instead.
const Library& library() {
  static const Library lib = [] {
    Library r;
    // The front end loads CUDA's runtime by name and warns when it finds two majors: ptdp's is 13.
    setenv("CUDNN_FRONTEND_CUDART_LIB_NAME", "libcudart.so.13", 0);
    std::vector<std::string> names{"libcudnn.so.9", "libcudnn_graph.so.9"};
    if (const char* env = std::getenv("PTDP_CUDNN_LIBRARY"); env && *env) names = {env};
    std::string errors;
    void* handle = nullptr;
    for (const std::string& name : names) {
      handle = dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL);
      if (handle) break;
      const char* e = dlerror();
      errors += (errors.empty() ? "" : "; ") + std::string(e ? e : name + ": not found");
    }
    if (!handle) {
      r.why = "libcudnn cannot be loaded (" + errors +
              "): put the folder of cuDNN 9's libraries on LD_LIBRARY_PATH, or PTDP_CUDNN_LIBRARY=FILE";
      return r;
    }
    using GetVersion = size_t (*)();
    auto get_version = reinterpret_cast<GetVersion>(dlsym(handle, "cudnnGetVersion"));
    if (!get_version) {
      r.why = "the cuDNN library loaded has no cudnnGetVersion";
      return r;
    }
    r.version = int64_t(get_version());
    if (r.version < 90000) {
      r.why = fmt::format("cuDNN {} is too old (the fused attention graphs need cuDNN 9)", r.version);
      return r;
    }
    fe::cudnn_dlhandle = handle;
    return r;
  }();
  return lib;
}

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw RuntimeError("cuDNN attention: " + fmt::format(f, std::forward<Args>(args)...));
}

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

using Key = std::tuple<int, int, int, int, int, int, bool, DType, int, int>;
Key key_of(const CudnnBlock& b) { return {b.b, b.sq, b.sk, b.a, b.g, b.hd, b.causal, b.dt, b.row_a(), b.row_g()}; }

std::string describe(const CudnnBlock& b) {
  return fmt::format("b {} sq {} sk {} heads {} groups {} hd {} {} {}{}", b.b, b.sq, b.sk, b.a, b.g, b.hd,
                     b.causal ? "causal" : "full", dtype_name(b.dt),
                     b.row_a() != b.a ? fmt::format(" (of rows of {} heads, {} groups)", b.row_a(), b.row_g()) : "");
}

// `heads` heads of a [b*s, row_heads*hd] activation as cuDNN's [b, heads, s, hd] (token i of
// sequence j in row j*s + i, head h in columns [h*hd, (h+1)*hd)): an input, or an output the graph made.
void place_rows(fe::graph::Tensor_attributes& t, Uid uid, int64_t b, int64_t heads, int64_t row_heads, int64_t s,
                int64_t hd) {
  t.set_uid(uid).set_dim({b, heads, s, hd}).set_stride({s * row_heads * hd, hd, row_heads * hd, 1});
}
// A block's query-side tensor (q, y, dy, dq: its a heads of rows of row_a(), sq tokens) or key-side
// one (k, v, dk, dv: g heads of rows of row_g(), sk tokens).
enum class Side { Query, Key };
void place_rows(fe::graph::Tensor_attributes& t, Uid uid, const CudnnBlock& k, Side side) {
  if (side == Side::Query) place_rows(t, uid, k.b, k.a, k.row_a(), k.sq, k.hd);
  else place_rows(t, uid, k.b, k.g, k.row_g(), k.sk, k.hd);
}
fe::graph::Tensor_attributes rows(const char* name, Uid uid, const CudnnBlock& k, Side side) {
  fe::graph::Tensor_attributes t;
  t.set_name(name);
  place_rows(t, uid, k, side);
  return t;
}

// lse [b, a, sq] f32 as cuDNN's softmax statistics [b, a, sq, 1], packed (a run of groups too: cuDNN
// before 9.26 takes only packed statistics in the backward, so a part's are copied out first).
void place_stats(fe::graph::Tensor_attributes& t, const CudnnBlock& k) {
  const int64_t a = k.a, sq = k.sq;
  t.set_uid(kStats).set_dim({k.b, a, sq, 1}).set_stride({a * sq, sq, 1, 1}).set_data_type(fe::DataType_t::FLOAT);
}

// sm > 0: for a GPU of that compute capability (cudnn_validate), else the current device's.
std::shared_ptr<fe::graph::Graph> new_graph(DType dt, int sm) {
  auto g = std::make_shared<fe::graph::Graph>();
  if (sm > 0) g->set_sm_version(sm);
  g->set_io_data_type(dt == DType::F16 ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

template <class Attributes>
void mask(Attributes& opt, const CudnnBlock& k) {
  opt.set_attn_scale(float(1.0 / std::sqrt(double(k.hd))));
  if (k.causal) opt.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
}

std::shared_ptr<fe::graph::Graph> forward_graph(const CudnnBlock& k, int sm = 0) {
  auto g = new_graph(k.dt, sm);
  auto q = g->tensor(rows("q", kQ, k, Side::Query));
  auto kk = g->tensor(rows("k", kK, k, Side::Key));
  auto v = g->tensor(rows("v", kV, k, Side::Key));
  auto opt = fe::graph::SDPA_attributes().set_name("ptdp_attention").set_generate_stats(true);
  mask(opt, k);
  auto [o, lse] = g->sdpa(q, kk, v, opt);
  place_rows(o->set_output(true), kO, k, Side::Query);
  place_stats(lse->set_output(true), k);
  return g;
}

// Deterministic: cuDNN's Hopper backward then forms dQ from a dP workspace of b*a*sq*sk*2 bytes
// instead of accumulating it with atomics, so that two runs give the same bits.
std::shared_ptr<fe::graph::Graph> backward_graph(const CudnnBlock& k, int sm = 0) {
  auto g = new_graph(k.dt, sm);
  auto q = g->tensor(rows("q", kQ, k, Side::Query));
  auto kk = g->tensor(rows("k", kK, k, Side::Key));
  auto v = g->tensor(rows("v", kV, k, Side::Key));
  auto o = g->tensor(rows("y", kO, k, Side::Query));
  auto dout = g->tensor(rows("dy", kDO, k, Side::Query));
  fe::graph::Tensor_attributes stats;
  place_stats(stats.set_name("lse"), k);
  auto lse = g->tensor(stats);
  auto opt = fe::graph::SDPA_backward_attributes().set_name("ptdp_attention_backward").set_deterministic_algorithm(true);
  mask(opt, k);
  auto [dq, dk, dv] = g->sdpa_backward(q, kk, v, o, dout, lse, opt);
  place_rows(dq->set_output(true), kDQ, k, Side::Query);
  place_rows(dk->set_output(true), kDK, k, Side::Key);
  place_rows(dv->set_output(true), kDV, k, Side::Key);
  return g;
}

// Validates, lowers and builds the heuristics' first plan; the reason when any step fails.
std::string build(fe::graph::Graph& g, cudnnHandle_t handle, int64_t& workspace) {
  auto step = [](fe::error_t e, const char* what) {
    return e.is_good() ? std::string() : std::string(what) + ": " + e.get_message();
  };
  std::string why = step(g.validate(), "validate");
  if (why.empty()) why = step(g.build_operation_graph(handle), "build_operation_graph");
  if (why.empty()) why = step(g.create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans");
  if (why.empty()) why = step(g.check_support(), "check_support");
  if (why.empty()) why = step(g.build_plans(fe::BuildPlanPolicy_t::HEURISTICS_CHOICE), "build_plans");
  if (why.empty()) why = step(g.get_workspace_size(workspace), "get_workspace_size");
  return why;
}

}  // namespace

const std::string& cudnn_unavailable() { return library().why; }
int64_t cudnn_version() { return library().version; }

std::string cudnn_validate(const CudnnBlock& blk, int sm) {
  if (!cudnn_unavailable().empty()) return cudnn_unavailable();
  try {
    if (fe::error_t e = forward_graph(blk, sm)->validate(); !e.is_good()) return "forward: " + e.get_message();
    if (fe::error_t e = backward_graph(blk, sm)->validate(); !e.is_good()) return "backward: " + e.get_message();
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

struct CudnnAttention::Impl {
  struct Graphs {
    std::shared_ptr<fe::graph::Graph> fwd, bwd;
    int64_t fwd_ws = 0, bwd_ws = 0;
    std::string refused;  // empty: both built
    bool said = false;    // the refusal was told (on stderr, or to refusal()'s caller)
  };
  cudnnHandle_t handle = nullptr;  // on the backend's stream
  cudaStream_t stream = nullptr;
  std::map<Key, Graphs> graphs;
  int64_t cap = kCudnnBackwardWorkspaceCap;
  std::map<Key, CudnnBlock> parts;  // a block's backward call: itself, or a run of its groups

  // The block of the most consecutive key/value groups whose backward's dP workspace fits the cap
  // (cudnn_backward_groups), if cuDNN builds it; else blk itself.
  const CudnnBlock& part_of(const CudnnBlock& blk) {
    auto [it, added] = parts.try_emplace(key_of(blk), blk);
    if (!added) return it->second;
    const int gc = cudnn_backward_groups(blk.b, blk.sq, blk.sk, blk.a, blk.g, cap);
    if (gc == blk.g) return it->second;
    CudnnBlock part = blk;
    part.a = blk.a / blk.g * gc;
    part.g = gc;
    part.a_rows = blk.row_a();
    part.g_rows = blk.row_g();
    if (const std::string& why = get(part).refused; why.empty()) {
      it->second = part;
    } else {
      fmt::print(stderr, "ptdp: cuDNN {} refused the backward of {} ({}); the backward of {} runs in one call\n",
                 cudnn_version_text(), describe(part), why, describe(blk));
    }
    return it->second;
  }

  Graphs& get(const CudnnBlock& blk) {
    auto [it, added] = graphs.try_emplace(key_of(blk));
    Graphs& gr = it->second;
    if (!added) return gr;
    try {
      gr.fwd = forward_graph(blk);
      gr.refused = build(*gr.fwd, handle, gr.fwd_ws);
      if (gr.refused.empty()) {
        gr.bwd = backward_graph(blk);
        gr.refused = build(*gr.bwd, handle, gr.bwd_ws);
        if (!gr.refused.empty()) gr.refused = "backward: " + gr.refused;
      } else {
        gr.refused = "forward: " + gr.refused;
      }
    } catch (const std::exception& e) {
      gr.refused = e.what();
    }
    return gr;
  }

  // A refused block's reason, said once on stderr where ptdp's kernel runs it instead.
  bool takes(const CudnnBlock& blk) {
    Graphs& gr = get(blk);
    if (!gr.refused.empty() && !gr.said) {
      gr.said = true;
      fmt::print(stderr, "ptdp: cuDNN {} refused attention {} ({}); ptdp's flash kernel runs it\n", cudnn_version_text(),
                 describe(blk), gr.refused);
    }
    return gr.refused.empty();
  }

  // Where a split backward's packed lse lies in its workspace: after cuDNN's, 256-byte aligned.
  static int64_t stats_offset(const Graphs& part) { return (part.bwd_ws + 255) / 256 * 256; }

  Graphs& built(const CudnnBlock& blk) {
    Graphs& gr = get(blk);
    if (!gr.refused.empty()) fail("{} was refused ({})", describe(blk), gr.refused);
    return gr;
  }

  void run(const fe::graph::Graph& g, std::unordered_map<int64_t, void*>& pack, void* workspace, const char* what) {
    const fe::error_t e = g.execute(handle, pack, workspace);
    if (!e.is_good()) fail("{}: {}", what, fe::error_t(e).get_message());
  }
};

CudnnAttention::CudnnAttention(cudaStream_t stream) : impl_(std::make_unique<Impl>()) {
  if (!cudnn_unavailable().empty()) fail("{}", cudnn_unavailable());
  if (const char* env = std::getenv("PTDP_CUDNN_BACKWARD_WORKSPACE"); env && *env) {
    char* end = nullptr;
    const long long bytes = std::strtoll(env, &end, 10);
    if (*end != '\0' || bytes <= 0)
      throw UsageError(fmt::format("PTDP_CUDNN_BACKWARD_WORKSPACE='{}' must be a positive number of bytes", env));
    impl_->cap = bytes;
  }
  const cudnnStatus_t st = fe::detail::create_handle(&impl_->handle);
  if (st != CUDNN_STATUS_SUCCESS) fail("cudnnCreate failed (status {})", int(st));
  impl_->stream = stream;
  const cudnnStatus_t ss = fe::detail::set_stream(impl_->handle, stream);
  if (ss != CUDNN_STATUS_SUCCESS) {
    fe::detail::destroy_handle(impl_->handle);
    fail("cudnnSetStream failed (status {})", int(ss));
  }
}

CudnnAttention::~CudnnAttention() {
  impl_->graphs.clear();
  if (impl_->handle) fe::detail::destroy_handle(impl_->handle);
}

bool CudnnAttention::takes(const CudnnBlock& blk) { return cudnn_shape_ok(blk) && impl_->takes(blk); }

std::string CudnnAttention::refusal(const CudnnBlock& blk) {
  if (!cudnn_shape_ok(blk))
    return describe(blk) + " is not a block cuDNN is asked for (f16 or bf16, hd a multiple of 8 up to 256, whole "
                           "groups, causal on the diagonal)";
  Impl::Graphs& gr = impl_->get(blk);
  gr.said = true;
  return gr.refused.empty() ? std::string() : "cuDNN " + cudnn_version_text() + " refused attention " + describe(blk) +
                                                  " (" + gr.refused + ")";
}
int64_t CudnnAttention::forward_workspace(const CudnnBlock& blk) { return impl_->built(blk).fwd_ws; }
// A part's backward workspace is cuDNN's, then (blk split) the part's lse packed.
int64_t CudnnAttention::backward_workspace(const CudnnBlock& blk) {
  const CudnnBlock& part = impl_->part_of(blk);
  const Impl::Graphs& gr = impl_->built(part);
  return part.g == blk.g ? gr.bwd_ws : Impl::stats_offset(gr) + int64_t(part.b) * part.a * part.sq * 4;
}
int CudnnAttention::backward_calls(const CudnnBlock& blk) { return blk.g / impl_->part_of(blk).g; }

void CudnnAttention::forward(const CudnnBlock& blk, void* y, float* lse, const void* q, const void* k, const void* v,
                             void* workspace) {
  std::unordered_map<int64_t, void*> pack{{kQ, const_cast<void*>(q)}, {kK, const_cast<void*>(k)},
                                          {kV, const_cast<void*>(v)}, {kO, y},
                                          {kStats, lse}};
  impl_->run(*impl_->built(blk).fwd, pack, workspace, "forward");
}

void CudnnAttention::backward(const CudnnBlock& blk, void* dq, void* dk, void* dv, const void* dy, const void* q,
                              const void* k, const void* v, const void* y, const float* lse, void* workspace) {
  const CudnnBlock& part = impl_->part_of(blk);
  const Impl::Graphs& gr = impl_->built(part);
  // Call c's heads start c*part.a query heads and c*part.g groups into the rows; its lse rows are
  // copied packed behind cuDNN's workspace.
  const int64_t e = int64_t(dtype_size(blk.dt)), qs = int64_t(part.a) * blk.hd * e, ks = int64_t(part.g) * blk.hd * e;
  const int64_t lse_row = int64_t(part.a) * blk.sq * 4;
  auto at = [](const void* p, int64_t bytes) { return static_cast<char*>(const_cast<void*>(p)) + bytes; };
  const bool split = part.g != blk.g;
  void* stats = split ? at(workspace, Impl::stats_offset(gr)) : at(lse, 0);
  for (int c = 0; c < blk.g / part.g; ++c) {
    if (split) {
      const cudaError_t err = cudaMemcpy2DAsync(stats, lse_row, at(lse, c * lse_row), int64_t(blk.a) * blk.sq * 4,
                                                lse_row, blk.b, cudaMemcpyDeviceToDevice, impl_->stream);
      if (err != cudaSuccess) fail("copying the statistics of {}: {}", describe(part), cudaGetErrorString(err));
    }
    std::unordered_map<int64_t, void*> pack{
        {kQ, at(q, c * qs)},   {kK, at(k, c * ks)},   {kV, at(v, c * ks)},   {kO, at(y, c * qs)}, {kDO, at(dy, c * qs)},
        {kStats, stats},       {kDQ, at(dq, c * qs)}, {kDK, at(dk, c * ks)}, {kDV, at(dv, c * ks)}};
    impl_->run(*gr.bwd, pack, workspace, "backward");
  }
}

std::vector<std::string> CudnnAttention::refused() const {
  std::vector<std::string> out;
  for (const auto& [key, gr] : impl_->graphs) {
    if (gr.refused.empty()) continue;
    const auto& [b, sq, sk, a, g, hd, causal, dt, a_rows, g_rows] = key;
    out.push_back(describe(CudnnBlock{b, sq, sk, a, g, hd, causal, dt, a_rows, g_rows}) + ": " + gr.refused);
  }
  return out;
}

}  // namespace ptdp::cuda
