// The fiber-per-thread kernel executor (executor.h). One Runner per worker thread: for each block
// it starts blockDim fibers (context.h, on pooled stacks) and runs each until it
// returns or waits in __syncthreads or a warp operation, switching directly to the next ready
// fiber. When no fiber is ready it returns to the worker's own stack, where the block is either
// finished or stuck (a divergence or deadlock, reported from there).
#include "kernel/executor.h"

#include <vgpu/runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define VGPU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VGPU_ASAN 1
#endif
#endif
#ifdef VGPU_ASAN
#include <pthread.h>
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#include "kernel/access_check.h"
#include "kernel/context.h"
#include "kernel/crash_handler.h"
#include "kernel/shared_memory.h"
#include "kernel/stack_pool.h"
#include "kernel/thread_order.h"

namespace vgpu::kernel {
namespace {

using detail::BarrierOp;
using detail::WarpOp;

enum class State : uint8_t { Idle, Running, AtBarrier, AtWarp, Done };  // queued fibers keep their last state
constexpr uint16_t kNoStack = 0xffff;

struct Warp;
struct alignas(32) Fiber {
  Context ctx = nullptr;  // while suspended
  Warp* warp = nullptr;
  uint3 tid{};
  State state = State::Idle;
  uint8_t lane = 0;
  uint16_t stack = kNoStack;  // pool slot it runs on (assigned when it starts)
};
static_assert(sizeof(Fiber) == 32);

// A warp's lanes and the operation each waits in, in compact arrays (what completing a warp
// operation reads and writes stays in a few cache lines).
struct Warp {
  uint32_t exists = 0;   // lanes that are threads of the block
  uint32_t waiting = 0;  // lanes blocked in a warp operation
  uint32_t done = 0;     // lanes that have returned
  uint32_t absent = 0;   // ~exists | done: lanes that can take part in nothing
  uint32_t mask[32];
  WarpOp op[32];
  int8_t src[32];  // lane it reads (shuffles)
  uint64_t value[32];
  uint64_t result[32];
  std::source_location where[32];  // where each lane waits (also __syncthreads)
};

// ---- Message helpers ----
const char* op_name(WarpOp op) {
  switch (op) {
    case WarpOp::Sync: return "__syncwarp";
    case WarpOp::Ballot: return "__ballot_sync/__all_sync/__any_sync";
    case WarpOp::Idx: return "__shfl_sync";
    case WarpOp::Up: return "__shfl_up_sync";
    case WarpOp::Down: return "__shfl_down_sync";
    case WarpOp::Xor: return "__shfl_xor_sync";
  }
  return "warp operation";
}

std::string place(std::source_location w) { return std::string(w.file_name()) + ":" + std::to_string(w.line()); }

inline bool same_place(std::source_location a, std::source_location b) {
  if (std::memcmp(&a, &b, sizeof a) == 0) return true;  // the same call site
  return a.line() == b.line() && a.column() == b.column() &&
         (a.file_name() == b.file_name() || std::strcmp(a.file_name(), b.file_name()) == 0);
}

std::string dim(unsigned x, unsigned y, unsigned z) {
  std::string s = "(";
  s += std::to_string(x);
  s += ',';
  s += std::to_string(y);
  s += ',';
  s += std::to_string(z);
  return s + ')';
}

std::string hex(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%08x", v);
  return b;
}

// "3, 5-7" for sorted indices
std::string ranges(const std::vector<uint32_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!s.empty()) s += ", ";
    s += std::to_string(v[i]);
    if (j > i) {
      s += '-';
      s += std::to_string(v[j]);
    }
    i = j + 1;
  }
  return s;
}

std::vector<uint32_t> bits_of(uint32_t m) {
  std::vector<uint32_t> v;
  for (; m; m &= m - 1) v.push_back(static_cast<uint32_t>(__builtin_ctz(m)));
  return v;
}

constexpr const char* kBarrierRule =
    "CUDA C++ Programming Guide, Synchronization Functions: __syncthreads() waits until all threads of the block "
    "reach it, and is allowed in conditional code only if the condition evaluates identically across the entire "
    "thread block.";
constexpr const char* kWarpRule =
    "CUDA C++ Programming Guide, Warp Shuffle/Vote Functions: each calling thread must have its own bit set in "
    "mask, and all non-exited threads named in mask must execute the same intrinsic with the same mask; a lane "
    "that has returned or does not exist can never take part, so the operation cannot complete as written.";

class Runner;
__attribute__((tls_model("initial-exec"))) thread_local Runner* t_active = nullptr;

class Runner {
 public:
  cudaError_t run(const detail::KernelSpec& spec, detail::ThreadBody body, const void* closure);
  int barrier(BarrierOp op, int predicate, std::source_location where);
  template <WarpOp kOp>
  uint64_t warp(unsigned mask, uint64_t value, int arg, int width, std::source_location where);
  bool in_fiber() const { return current_ != nullptr; }
  const detail::KernelSpec& spec() const { return *spec_; }
  bool tracked() const { return tracked_; }
  const AccessLog& writes() const { return writes_; }
  const AccessLog& reads() const { return reads_; }

 private:
  [[noreturn]] static void entry();
  bool run_block(uint64_t linear_block);
  void push(Fiber* f) { queue_[tail_++ & qmask_] = f; }
  void push_front(Fiber* f) { queue_[--head_ & qmask_] = f; }
  Fiber* pop() { return head_ == tail_ ? nullptr : queue_[head_++ & qmask_]; }
  void make_current(Fiber* f) {
    f->state = State::Running;
    current_ = f;
    threadIdx = f->tid;
  }
  [[gnu::always_inline]] Context enter(Fiber* f) {
    if (f->stack == kNoStack) start(f);
    make_current(f);
    return f->ctx;
  }
  void start(Fiber* f);
  void switch_from(Fiber* self);
  // AddressSanitizer must be told about every stack switch (its fiber annotations); no-ops otherwise.
  // `to` null: the worker's own stack. fake_save null: the fiber being left never resumes.
  void before_switch(void** fake_save, const Fiber* to) {
#ifdef VGPU_ASAN
    if (to)
      __sanitizer_start_switch_fiber(fake_save, stacks_.top(to->stack) - stacks_.size(to->stack),
                                     stacks_.size(to->stack));
    else
      __sanitizer_start_switch_fiber(fake_save, main_bottom_, main_size_);
#else
    (void)fake_save;
    (void)to;
#endif
  }
  static void after_switch(void* fake) {
#ifdef VGPU_ASAN
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
    (void)fake;
#endif
  }
  void finish(Fiber* self);
  [[noreturn]] void fail(const char* kind, std::string message);
  // The failure paths, kept out of line so that the hot paths keep small stack frames.
  [[noreturn, gnu::cold, gnu::noinline]] void fail_exception(const char* what);
  [[noreturn, gnu::cold, gnu::noinline]] void fail_returned_while_waited(const Fiber* self, uint32_t waiter);
  [[noreturn, gnu::cold, gnu::noinline]] void fail_mixed_barrier();
  [[noreturn, gnu::cold, gnu::noinline]] void fail_warp_call(const Fiber* self, WarpOp op, uint32_t mask, int width,
                                                             std::source_location where);
  [[noreturn, gnu::cold, gnu::noinline]] void fail_warp_mismatch(uint32_t w, uint32_t mask, WarpOp op, uint32_t lane);
  [[noreturn, gnu::cold, gnu::noinline]] void fail_warp_source(uint32_t w, uint32_t lane, uint32_t mask, WarpOp op);
  void complete_warp(Warp& wd, uint32_t w, uint32_t mask, WarpOp op);
  uint32_t index(const Fiber* f) const { return static_cast<uint32_t>(f - fibers_.data()); }
  std::source_location where_of(uint32_t i) const { return warps_[i >> 5].where[i & 31]; }
  std::string block_text() const;
  std::string thread_text(uint32_t i) const;
  std::string mixed_barrier_message() const;
  void report_stuck();

  const detail::KernelSpec* spec_ = nullptr;
  detail::ThreadBody body_ = nullptr;
  const void* closure_ = nullptr;
  uint32_t n_ = 0;  // threads per block
  std::vector<Fiber> fibers_;
  std::vector<Warp> warps_;
  std::vector<Fiber*> queue_;  // ready fibers, a ring: each fiber is in it at most once
  uint32_t qmask_ = 0, head_ = 0, tail_ = 0;
  StackPool stacks_;
  std::vector<uint16_t> free_stacks_;  // LIFO: the most recently used (cached) stack first
  OrderSetting setting_{ThreadOrder::Forward, 1};
  uint64_t name_hash_ = 0;
  FiberOrder order_;
  Context main_ctx_ = nullptr;  // the worker's own stack while a block runs
  const void* main_bottom_ = nullptr;  // its bounds, for AddressSanitizer
  size_t main_size_ = 0;
  Context dead_ctx_ = nullptr;  // where fibers that never resume "save" their context
  Fiber* current_ = nullptr;
  uint32_t live_ = 0;
  // The __syncthreads being filled.
  uint32_t at_barrier_ = 0, barrier_true_ = 0;
  bool barrier_mixed_ = false;
  std::source_location barrier_where_{};
  int barrier_result_ = 0;
  // The access checks (access_check.h), on while tracking_.
  AccessTracker tracker_;
  bool tracking_ = false;
  bool tracked_ = false;  // the last grid made tracked accesses
  AccessLog writes_;       // the last grid's instrumented stores
  AccessLog reads_;        // and loads of device or pinned memory
  // A violation found on a fiber, reported from the worker's stack.
  bool failed_ = false;
  const char* fail_kind_ = "";
  std::string fail_message_;
};

std::string Runner::block_text() const {
  return "block " + dim(blockIdx.x, blockIdx.y, blockIdx.z) + " of " + describe_kernel(*spec_);
}

std::string Runner::thread_text(uint32_t i) const {
  const uint3 t = fibers_[i].tid;
  return "thread " + dim(t.x, t.y, t.z) + " (lane " + std::to_string(i & 31) + " of warp " + std::to_string(i >> 5) +
         ")";
}

// A fiber that has not started gets a stack and a fresh context (enter() then makes it current).
void Runner::start(Fiber* f) {
  f->stack = free_stacks_.back();
  free_stacks_.pop_back();
#ifdef VGPU_ASAN
  // A fiber abandoned by a failed block left its frames' redzones poisoned on this stack.
  ASAN_UNPOISON_MEMORY_REGION(stacks_.top(f->stack) - stacks_.size(f->stack), stacks_.size(f->stack));
#endif
  f->ctx = make_context(stacks_.top(f->stack), stacks_.size(f->stack), &Runner::entry);
}

// Suspends self (already queued, or waiting) and runs the next ready fiber, or returns to the
// worker's stack when there is none. Returns when self is resumed.
inline void Runner::switch_from(Fiber* self) {
  Fiber* next = pop();
  if (next == self) {
    self->state = State::Running;
    return;
  }
  Context to;
  if (next) {
    to = enter(next);
  } else {
    current_ = nullptr;
    to = main_ctx_;
  }
  void* fake = nullptr;
  before_switch(&fake, next);
  switch_context(&self->ctx, to);
  after_switch(fake);
}

// Runs fibers on one stack: the fiber that got the stack, then, each time the running one
// returns and the next ready fiber has not started yet, that one on the same stack without a
// switch (so a kernel without barriers runs every thread of a block on one stack). Otherwise
// the stack goes back to the pool and the next fiber resumes (or the worker, when none is ready).
void Runner::entry() {
  after_switch(nullptr);  // first time on this stack
  Runner* r = t_active;
  for (;;) {
    const char* what = nullptr;
    try {
      r->body_(r->closure_);
    } catch (const std::exception& e) {
      r->fail_message_ = e.what();  // copied before the handler ends
      what = "";
    } catch (...) {
      what = "an exception of unknown type";
    }
    if (what) r->fail_exception(*what ? what : nullptr);
    Fiber* self = r->current_;
    r->finish(self);
    Fiber* next = r->pop();
    if (next && next->stack == kNoStack) {
      next->stack = self->stack;
      r->make_current(next);
      continue;
    }
    r->free_stacks_.push_back(self->stack);  // nothing runs on it again before this switch
    Context to;
    if (next) {
      to = r->enter(next);
    } else {
      r->current_ = nullptr;
      to = r->main_ctx_;
    }
    r->before_switch(nullptr, next);
    switch_context(&r->dead_ctx_, to);
    __builtin_unreachable();
  }
}

void Runner::finish(Fiber* self) {
  self->state = State::Done;
  --live_;
  const uint32_t i = index(self), bit = 1u << (i & 31);
  Warp& wd = warps_[i >> 5];
  wd.done |= bit;
  wd.absent |= bit;
  for (uint32_t b = wd.waiting; b; b &= b - 1)
    if (wd.mask[__builtin_ctz(b)] & bit) fail_returned_while_waited(self, (i & ~31u) + __builtin_ctz(b));
}

void Runner::fail(const char* kind, std::string message) {
  failed_ = true;
  fail_kind_ = kind;
  fail_message_ = std::move(message);
  current_ = nullptr;
  before_switch(nullptr, nullptr);
  switch_context(&dead_ctx_, main_ctx_);  // the block is abandoned: this fiber never resumes
  __builtin_unreachable();
}

void Runner::fail_exception(const char* what) {
  fail("kernel exception", "an exception escaped " + thread_text(index(current_)) + " of " + block_text() + ": " +
                               (what ? std::string(what) : fail_message_) +
                               ". Kernels cannot throw (CUDA C++ Programming Guide, C++ Language Support: exception "
                               "handling is supported in host code only).");
}

void Runner::fail_returned_while_waited(const Fiber* self, uint32_t waiter) {
  const Warp& wd = warps_[waiter >> 5];
  const uint32_t l = waiter & 31;
  fail("warp divergence", thread_text(index(self)) + " of " + block_text() + " returned while " +
                              thread_text(waiter) + " waits for it in " + op_name(wd.op[l]) + "(mask " +
                              hex(wd.mask[l]) + ") at " + place(where_of(waiter)) + ". " + kWarpRule);
}

void Runner::fail_mixed_barrier() { fail("barrier divergence", mixed_barrier_message()); }

std::string Runner::mixed_barrier_message() const {
  // Group the threads by the __syncthreads() they wait at.
  std::vector<std::source_location> sites;
  std::vector<std::vector<uint32_t>> who;
  for (uint32_t i = 0; i < n_; ++i) {
    size_t k = 0;
    while (k < sites.size() && !same_place(sites[k], where_of(i))) ++k;
    if (k == sites.size()) {
      sites.push_back(where_of(i));
      who.emplace_back();
    }
    who[k].push_back(i);
  }
  std::string s = "the threads of " + block_text() + " reached different __syncthreads() calls:";
  for (size_t k = 0; k < sites.size(); ++k)
    s += (k ? "; " : " ") + std::to_string(who[k].size()) + " threads (" + ranges(who[k]) + ") at " +
         place(sites[k]);
  return s + ". " + kBarrierRule;
}

int Runner::barrier(BarrierOp op, int predicate, std::source_location where) {
  Fiber* self = current_;
  self->state = State::AtBarrier;
  self->warp->where[self->lane] = where;
  if (at_barrier_ == 0) {
    barrier_where_ = where;
    barrier_true_ = 0;
    barrier_mixed_ = false;
  } else if (!same_place(where, barrier_where_)) {
    barrier_mixed_ = true;
  }
  barrier_true_ += predicate != 0;
  if (++at_barrier_ == n_) {  // every thread of the block has arrived: release them all
    if (barrier_mixed_) fail_mixed_barrier();
    at_barrier_ = 0;
    if (tracking_) tracker_.barrier_done();
    switch (op) {
      case BarrierOp::Sync: barrier_result_ = 0; break;
      case BarrierOp::Count: barrier_result_ = static_cast<int>(barrier_true_); break;
      case BarrierOp::And: barrier_result_ = barrier_true_ == n_; break;
      case BarrierOp::Or: barrier_result_ = barrier_true_ > 0; break;
    }
    order_.all(n_, [this](uint32_t i) { push(&fibers_[i]); });
  }
  switch_from(self);
  return barrier_result_;  // read before any thread can reach the next barrier's release
}

void Runner::fail_warp_call(const Fiber* self, WarpOp op, uint32_t mask, int width, std::source_location where) {
  const uint32_t i = index(self), w = i >> 5, bit = 1u << (i & 31);
  const Warp& wd = warps_[w];
  std::string why;
  if (!(mask & bit)) {
    why = "the calling lane is not named in the mask";
  } else if (mask & ~wd.exists) {
    why = "the mask names lanes " + ranges(bits_of(mask & ~wd.exists)) + ", which do not exist: warp " +
          std::to_string(w) + " has only " + std::to_string(__builtin_popcount(wd.exists)) + " threads (blockDim " +
          dim(blockDim.x, blockDim.y, blockDim.z) + ")";
  } else if (mask & wd.done) {
    why = "the mask names lanes " + ranges(bits_of(mask & wd.done)) + ", which have returned";
  } else {
    fail("invalid warp operation", std::string(op_name(op)) + " at " + place(where) + " in " + thread_text(i) +
                                       " of " + block_text() + " has width " + std::to_string(width) +
                                       ", which must be a power of 2 from 1 to warpSize (CUDA C++ Programming "
                                       "Guide, Warp Shuffle Functions).");
  }
  fail("warp divergence", std::string(op_name(op)) + "(mask " + hex(mask) + ") at " + place(where) + " in " +
                              thread_text(i) + " of " + block_text() + ": " + why + ". " + kWarpRule);
}

void Runner::fail_warp_mismatch(uint32_t w, uint32_t mask, WarpOp op, uint32_t lane) {
  const Warp& wd = warps_[w];
  fail("warp divergence", "the lanes of warp " + std::to_string(w) + " of " + block_text() + " disagree: lane " +
                              std::to_string(lane) + " is in " + op_name(wd.op[lane]) + "(mask " +
                              hex(wd.mask[lane]) + ") at " + place(where_of(w * 32 + lane)) +
                              " while the lanes of mask " + hex(mask) + " are in " + op_name(op) + ". " + kWarpRule);
}

void Runner::fail_warp_source(uint32_t w, uint32_t lane, uint32_t mask, WarpOp op) {
  const Warp& wd = warps_[w];
  fail("warp divergence", std::string(op_name(op)) + "(mask " + hex(mask) + ") at " + place(where_of(w * 32 + lane)) +
                              " in " + thread_text(w * 32 + lane) + " of " + block_text() + " reads lane " +
                              std::to_string(wd.src[lane]) +
                              ", which is not named in the mask: the value is undefined (CUDA C++ Programming "
                              "Guide, Warp Shuffle Functions: threads may only read from threads that take part in "
                              "the shuffle).");
}

template <WarpOp kOp>
inline uint64_t Runner::warp(unsigned mask, uint64_t value, int arg, int width, std::source_location where) {
  Fiber* self = current_;
  const uint32_t lane = self->lane, bit = 1u << lane;
  Warp& wd = *self->warp;
  if (((~mask & bit) | (mask & wd.absent)) != 0 || (width != 32 && (width < 1 || width > 32 || (width & (width - 1)))))
    fail_warp_call(self, kOp, mask, width, where);
  // Source lanes (Programming Guide, Warp Shuffle Functions): within each group of `width` lanes;
  // up/down do not wrap (the lane keeps its own value); xor may read earlier groups, not later ones.
  int32_t src = -1;
  const int32_t l = static_cast<int32_t>(lane), base = l & ~(width - 1);
  if constexpr (kOp == WarpOp::Idx) {
    src = base + (arg & (width - 1));
  } else if constexpr (kOp == WarpOp::Up) {
    const int64_t s = int64_t(l) - int64_t(static_cast<uint32_t>(arg));
    src = s >= base ? static_cast<int32_t>(s) : l;
  } else if constexpr (kOp == WarpOp::Down) {
    const int64_t s = int64_t(l) + int64_t(static_cast<uint32_t>(arg));
    src = s < base + width ? static_cast<int32_t>(s) : l;
  } else if constexpr (kOp == WarpOp::Xor) {
    const int32_t s = l ^ arg;
    src = static_cast<uint32_t>(s) < static_cast<uint32_t>(base + width) ? s : l;
  }
  wd.op[lane] = kOp;
  wd.mask[lane] = mask;
  wd.src[lane] = static_cast<int8_t>(src);
  wd.value[lane] = value;
  wd.where[lane] = where;
  self->state = State::AtWarp;
  const uint32_t waiting = wd.waiting | bit;
  wd.waiting = waiting;
  if ((waiting & mask) == mask) complete_warp(wd, static_cast<uint32_t>(&wd - warps_.data()), mask, kOp);
  switch_from(self);
  return wd.result[lane];
}

// Every lane of mask has arrived: check that they agree, exchange, and queue them at the front,
// so that the warp goes on while its lanes' stacks are still in cache.
void Runner::complete_warp(Warp& wd, uint32_t w, uint32_t mask, WarpOp op) {
  Fiber* lanes = &fibers_[w * 32];
  if (tracking_) tracker_.warp_done(w);
  if (mask == ~0u && order_.order() == ThreadOrder::Forward && op != WarpOp::Ballot) {
    // The common case (a full warp shuffling): straight loops over the 32 lanes.
    uint32_t bad = 0;
    for (uint32_t j = 0; j < 32; ++j) bad |= (wd.mask[j] ^ mask) | static_cast<uint32_t>(wd.op[j] != op);
    if (bad) {
      for (uint32_t j = 0; j < 32; ++j)
        if (wd.mask[j] != mask || wd.op[j] != op) fail_warp_mismatch(w, mask, op, j);
    }
    if (op != WarpOp::Sync)
      for (uint32_t j = 0; j < 32; ++j) wd.result[j] = wd.value[wd.src[j] & 31];
    wd.waiting = 0;
    head_ -= 32;
    const uint32_t h = head_ & qmask_;
    if (h + 32 <= qmask_ + 1) {
      Fiber** q = &queue_[h];
      for (uint32_t j = 0; j < 32; ++j) q[j] = lanes + j;
    } else {
      for (uint32_t j = 0; j < 32; ++j) queue_[(head_ + j) & qmask_] = &lanes[j];
    }
    return;
  }
  for (uint32_t b = mask; b; b &= b - 1) {
    const uint32_t j = static_cast<uint32_t>(__builtin_ctz(b));
    if (wd.mask[j] != mask || wd.op[j] != op) fail_warp_mismatch(w, mask, op, j);
  }
  if (op == WarpOp::Ballot) {
    uint32_t ballot = 0;
    for (uint32_t b = mask; b; b &= b - 1)
      if (wd.value[__builtin_ctz(b)]) ballot |= b & (~b + 1);
    for (uint32_t b = mask; b; b &= b - 1) wd.result[__builtin_ctz(b)] = ballot;
  } else if (op != WarpOp::Sync) {
    for (uint32_t b = mask; b; b &= b - 1) {
      const uint32_t j = static_cast<uint32_t>(__builtin_ctz(b));
      const int32_t s = wd.src[j];
      if (!((mask >> s) & 1u)) fail_warp_source(w, j, mask, op);
      wd.result[j] = wd.value[s];
    }
  }
  wd.waiting &= ~mask;
  uint32_t order[32], n = 0;
  order_.lanes(mask, [&](uint32_t j) { order[n++] = j; });
  while (n > 0) push_front(&lanes[order[--n]]);
}

void Runner::report_stuck() {
  uint32_t waiting_warp = 0;
  std::vector<uint32_t> done;
  for (uint32_t i = 0; i < n_; ++i) {
    if (fibers_[i].state == State::AtWarp) ++waiting_warp;
    if (fibers_[i].state == State::Done) done.push_back(i);
  }
  const bool multi_dim = blockDim.y * blockDim.z > 1;
  const std::string linear = multi_dim ? " (linear thread indices x + y*blockDim.x + z*blockDim.x*blockDim.y)" : "";
  if (waiting_warp == 0 && at_barrier_ > 0) {
    report_violation("barrier divergence",
                     "__syncthreads() at " + place(barrier_where_) + " was reached by " + std::to_string(at_barrier_) +
                         " of " + std::to_string(n_) + " threads of " + block_text() + "; " +
                         std::to_string(done.size()) + " threads had returned (threads " + ranges(done) + linear +
                         "), so the barrier can never complete. " + kBarrierRule);
    return;
  }
  // Describe where each thread is, as runs of consecutive threads in the same place.
  auto same = [&](uint32_t a, uint32_t b) {
    const State sa = fibers_[a].state;
    if (fibers_[b].state != sa) return false;
    if (sa == State::Done) return true;
    if (!same_place(where_of(a), where_of(b))) return false;
    if (sa != State::AtWarp) return true;
    const Warp &wa = warps_[a >> 5], &wb = warps_[b >> 5];
    return wa.op[a & 31] == wb.op[b & 31] && wa.mask[a & 31] == wb.mask[b & 31];
  };
  std::string s = "no thread of " + block_text() + " can proceed:";
  for (uint32_t i = 0; i < n_;) {
    uint32_t j = i;
    while (j + 1 < n_ && same(i, j + 1)) ++j;
    s += i == 0 ? " threads " : "; threads ";
    s += std::to_string(i);
    if (j > i) {
      s += '-';
      s += std::to_string(j);
    }
    const State st = fibers_[i].state;
    if (st == State::Done)
      s += " have returned";
    else if (st == State::AtBarrier)
      s += " wait in __syncthreads() at " + place(where_of(i));
    else
      s += " wait in " + std::string(op_name(warps_[i >> 5].op[i & 31])) + "(mask " +
           hex(warps_[i >> 5].mask[i & 31]) + ") at " + place(where_of(i));
    i = j + 1;
  }
  report_violation("deadlock", s + linear + ". " + kBarrierRule + " " + kWarpRule);
}

bool Runner::run_block(uint64_t linear_block) {
  poison_shared_memory();  // shared memory is undefined at a block's start
  if (tracking_) tracker_.begin_block(linear_block);
  for (uint32_t i = 0; i < n_; ++i) {
    fibers_[i].state = State::Idle;
    fibers_[i].stack = kNoStack;
  }
  free_stacks_.clear();
  for (uint32_t k = n_; k-- > 0;) free_stacks_.push_back(static_cast<uint16_t>(k));
  for (Warp& w : warps_) {
    w.waiting = w.done = 0;
    w.absent = ~w.exists;
  }
  live_ = n_;
  at_barrier_ = 0;
  failed_ = false;
  head_ = tail_ = 0;
  order_.begin_block(setting_, name_hash_, linear_block);
  order_.all(n_, [this](uint32_t i) { push(&fibers_[i]); });
  Fiber* first = pop();
  const Context to = enter(first);
  void* fake = nullptr;
  before_switch(&fake, first);
  switch_context(&main_ctx_, to);
  after_switch(fake);
  current_ = nullptr;
  shared_block_done();
  if (failed_) {
    report_violation(fail_kind_, fail_message_);
    return false;
  }
  if (live_ != 0) {
    report_stuck();
    return false;
  }
  return true;
}

cudaError_t Runner::run(const detail::KernelSpec& spec, detail::ThreadBody body, const void* closure) {
  const dim3 b = spec.block, g = spec.grid;
  n_ = b.x * b.y * b.z;
  if (n_ == 0 || n_ > 1024 || g.x == 0 || g.y == 0 || g.z == 0) return cudaErrorInvalidConfiguration;
  spec_ = &spec;
  body_ = body;
  closure_ = closure;
  if (fibers_.size() < n_) {
    fibers_.resize(n_);
  }
  warps_.resize((n_ + 31) / 32);
  for (uint32_t i = 0; i < n_; ++i) {
    fibers_[i].tid = uint3{i % b.x, (i / b.x) % b.y, i / (b.x * b.y)};
    fibers_[i].warp = &warps_[i >> 5];
    fibers_[i].lane = static_cast<uint8_t>(i & 31);
  }
  for (Warp& w : warps_) w.exists = ~0u;
  if (n_ % 32) warps_.back().exists = (1u << (n_ % 32)) - 1;
  uint32_t cap = 1;
  while (cap < n_) cap <<= 1;
  if (queue_.size() < cap) queue_.resize(cap);
  qmask_ = cap - 1;
  stacks_.reserve(n_);
  setting_ = current_order();
  name_hash_ = hash_name(spec.name);
#ifdef VGPU_ASAN
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    void* bottom = nullptr;
    pthread_attr_getstack(&attr, &bottom, &main_size_);
    main_bottom_ = bottom;
    pthread_attr_destroy(&attr);
  }
#endif

  // Built-ins of this thread, restored afterwards (run_kernel_sync may run on a test's thread).
  const uint3 saved_tid = threadIdx, saved_bid = blockIdx;
  const dim3 saved_bdim = blockDim, saved_gdim = gridDim;
  blockDim = b;
  gridDim = g;
  const uint64_t total = uint64_t(g.x) * g.y * g.z;
  const BlockOrder blocks(setting_, name_hash_, total);
  cudaError_t result = cudaSuccess;
  writes_.clear();
  reads_.clear();
  t_write_log = &writes_;
  t_read_log = &reads_;
  tracking_ = access_check_launch(spec);
  if (tracking_) {
    tracker_.begin(spec, closure, stacks_, static_cast<uint32_t>(warps_.size()));
    t_access_tracker = &tracker_;
  }
  {
    CrashScope crash(spec, stacks_);
    t_active = this;
    for (uint64_t k = 0; k < total; ++k) {
      const uint64_t lin = blocks.at(k);
      blockIdx = uint3{static_cast<unsigned>(lin % g.x), static_cast<unsigned>((lin / g.x) % g.y),
                       static_cast<unsigned>(lin / (uint64_t(g.x) * g.y))};
      if (!run_block(lin)) {
        result = cudaErrorLaunchFailure;
        break;
      }
    }
    t_active = nullptr;
  }
  t_access_tracker = nullptr;
  t_write_log = nullptr;
  t_read_log = nullptr;
  writes_.finish();
  reads_.finish();
  tracked_ = tracking_ && tracker_.end();
  tracking_ = false;
  threadIdx = saved_tid;
  blockIdx = saved_bid;
  blockDim = saved_bdim;
  gridDim = saved_gdim;
  return result;
}

Runner& this_thread_runner() {
  static thread_local Runner runner;
  return runner;
}

void outside_kernel(const char* what, std::source_location where) {
  report_violation("device function outside a kernel", std::string(what) + " called at " + place(where) +
                                                           " outside a running kernel: device functions can only be "
                                                           "called by the threads of a kernel.");
}

}  // namespace

std::string describe_kernel(const detail::KernelSpec& spec) {
  std::string s = std::string("kernel ") + spec.name;
  if (spec.file) s += std::string(" (launched at ") + spec.file + ":" + std::to_string(spec.line) + ")";
  return s;
}

bool last_grid_tracked() { return this_thread_runner().tracked(); }
const AccessLog& last_grid_writes() { return this_thread_runner().writes(); }
const AccessLog& last_grid_reads() { return this_thread_runner().reads(); }

cudaError_t run_grid(const detail::KernelSpec& spec, detail::ThreadBody body, const void* closure) {
  if (t_active) {
    report_violation("nested launch", describe_kernel(spec) +
                                          " was launched from inside a running kernel; the vgpu does not support "
                                          "dynamic parallelism.");
    return cudaErrorLaunchFailure;
  }
  return this_thread_runner().run(spec, body, closure);
}

}  // namespace vgpu::kernel

namespace vgpu::detail {

int block_barrier(BarrierOp op, int predicate, std::source_location where) {
  kernel::Runner* r = kernel::t_active;
  if (!r || !r->in_fiber()) {
    kernel::outside_kernel("__syncthreads()", where);
    return 0;
  }
  return r->barrier(op, predicate, where);
}

void misaligned_access(const void* p, size_t bytes) {
  kernel::Runner* r = kernel::t_active;
  if (!r || !r->in_fiber()) return;  // host code: its loads take any alignment
  char addr[32];
  std::snprintf(addr, sizeof addr, "%p", p);
  report_violation("misaligned address",
                   kernel::describe_kernel(r->spec()) + ": block (" + std::to_string(blockIdx.x) + ", " +
                       std::to_string(blockIdx.y) + ", " + std::to_string(blockIdx.z) + ") thread (" +
                       std::to_string(threadIdx.x) + ", " + std::to_string(threadIdx.y) + ", " +
                       std::to_string(threadIdx.z) + ") makes a " + std::to_string(bytes) + "-byte access at " + addr +
                       ", not " + std::to_string(bytes) +
                       "-byte aligned: a GPU stops the kernel there (cudaErrorMisalignedAddress).");
}

uint64_t warp_exchange(WarpOp op, unsigned mask, uint64_t value, int arg, int width, std::source_location where) {
  kernel::Runner* r = kernel::t_active;
  if (!r || !r->in_fiber()) {
    kernel::outside_kernel(kernel::op_name(op), where);
    return value;
  }
  switch (op) {
    case WarpOp::Sync: return r->warp<WarpOp::Sync>(mask, value, arg, width, where);
    case WarpOp::Ballot: return r->warp<WarpOp::Ballot>(mask, value, arg, width, where);
    case WarpOp::Idx: return r->warp<WarpOp::Idx>(mask, value, arg, width, where);
    case WarpOp::Up: return r->warp<WarpOp::Up>(mask, value, arg, width, where);
    case WarpOp::Down: return r->warp<WarpOp::Down>(mask, value, arg, width, where);
    case WarpOp::Xor: return r->warp<WarpOp::Xor>(mask, value, arg, width, where);
  }
  return value;
}

}  // namespace vgpu::detail
