// AdamW on f32 master weights with global-norm gradient clipping; weight decay on matrices
// only (not on biases or LayerNorm), as Megatron does. Sharded (the distributed optimizer), it
// keeps master weights and Adam state for the pieces of the buffer this rank owns only.
#pragma once
#include <vector>

#include "core/backend/backend.h"
#include "core/comm/communicator.h"
#include "core/common/flat_range.h"
#include "core/model/params.h"
#include "core/optim/lr_schedule.h"

namespace ptdp {

struct OptimizerConfig {
  LrSchedule lr;
  double weight_decay = 0.01;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double clip_grad = 1.0;  // max global L2 norm; 0 disables clipping
  // Megatron-core's precision-aware optimizer (--use-precision-aware-optimizer): the dtypes of the
  // master weights, of the gradients the step reads and of Adam's moments (f32, bf16 or f16; see
  // validate_run for which each may be). Each step reads the stored values, computes in f32 and
  // rounds the results back, as Transformer Engine's FusedAdam.
  bool precision_aware = false;
  DType main_params_dtype = DType::F32, main_grads_dtype = DType::F32;
  DType exp_avg_dtype = DType::F32, exp_avg_sq_dtype = DType::F32;
};

struct StepInfo {
  double lr = 0;
  double grad_norm = 0;  // before clipping
  bool clipped = false;
};

class AdamW {
 public:
  // params and grads are flat buffers laid out by `layout`, on `be`'s device. owned: the
  // ascending, disjoint pieces of the layout this optimizer updates (empty: all of it).
  // compact: params and grads hold only the owned pieces, one after the other (ZeRO-3's shards).
  AdamW(Backend& be, const ParamLayout& layout, Tensor params, Tensor grads, const OptimizerConfig& cfg,
        std::vector<FlatRange> owned = {}, bool compact = false);
  // The global gradient norm is summed over this model-parallel group (tensor x pipeline
  // ranks holding one model replica), counting every parameter once: tensor-parallel copies on
  // tp rank 0 only, the last stage's copy of the tied embedding not at all. Sharded, each
  // rank counts its owned pieces and the caller also sums over the data-parallel group.
  void set_norm_group(Communicator* mp, int tp_rank);
  // One update with the gradients in grads (which it may scale when clipping).
  StepInfo step();
  // The same in two halves, for a rank holding several model chunks: the sum of squares of
  // the gradients this rank counts (no communication), then the update with the global norm.
  double local_grad_sq();
  StepInfo step_with_norm(double global_norm);
  int64_t steps_taken() const { return step_; }
  void set_steps_taken(int64_t n) { step_ = n; }  // when resuming from a checkpoint
  const OptimizerConfig& config() const { return cfg_; }
  const std::vector<FlatRange>& owned() const { return owned_; }
  int64_t state_numel() const { return m_.numel(); }  // elements of master and Adam state held
  // Bytes this optimizer allocated: Adam's moments, and the f32 master weights and gradients
  // where they are not the model's own.
  int64_t own_bytes() const;
  Tensor& exp_avg() { return m_; }  // [state_numel()] in --exp-avg-dtype, the owned pieces in order
  Tensor& exp_avg_sq() { return v_; }
  // The f32 master weights of the owned pieces, in order (a copy where they are the model's own
  // f32 weights and sharded), and their replacement (which also rounds them into the model's).
  Tensor master_state();
  void set_master_state(const Tensor& master);
  void refresh_params();  // rounds the master weights into the model's (owned pieces)

 private:
  // A piece of the layout (begin, end), where its state starts in the compact state, and where it
  // starts in params and grads (begin, or state when compact).
  struct Segment {
    int64_t begin, end, state;
    bool decay;
    int64_t buf;
    int64_t size() const { return end - begin; }
  };
  // Appends s, or extends the last segment when s continues it (flat, state and buffer alike).
  static void append_merged(std::vector<Segment>& out, const Segment& s);
  Tensor master_view(const Segment& s);
  void update_16bit_state(const Segment& s, Tensor& master, Tensor& grad, const AdamWParams& p);
  Tensor master_grad_view(const Segment& s);
  Backend& be_;
  OptimizerConfig cfg_;
  Tensor params_, grads_, master_, master_grads_, m_, v_;
  bool compact_;
  bool master_is_params_, grads_are_master_;  // f32 weights / gradients: used in place (at buf)
  std::vector<FlatRange> owned_;
  std::vector<Segment> segments_;  // the owned pieces cut by weight-decay group
  std::vector<Segment> counted_;   // what enters the norm on this rank
  Communicator* mp_ = nullptr;
  const ParamLayout& layout_;
  int64_t step_ = 0;
};

}  // namespace ptdp
