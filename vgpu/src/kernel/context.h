// Fiber context switching for the executor. On x86-64 a minimal switch of our own (callee-saved
// registers, stack pointer, and a `ret`, which keeps the CPU's return-address predictor in step
// when all fibers run the same code: about 3x faster than boost::context's jump_fcontext, which
// also saves the x87/SSE control words and returns through an indirect jump). Elsewhere it is
// boost::context's fcontext.
#pragma once
#include <cstddef>

namespace vgpu::kernel {

using Context = void*;  // a suspended fiber: its saved stack pointer (x86-64) or fcontext_t

// The context of a fiber that starts by calling entry() on the stack below `top` (`size` bytes).
// entry() must never return; it ends by switching away for good.
Context make_context(char* top, size_t size, void (*entry)());

// Saves the running context into *from and resumes `to`; returns when something resumes *from.
// The MXCSR and x87 control words are not switched: kernels do not change them, so every fiber
// and the worker's own stack share the values the thread started with.
#if defined(__x86_64__) && defined(__linux__)
}  // namespace vgpu::kernel
extern "C" void vgpu_kernel_switch_context(void** from, void* to);  // context.cpp
namespace vgpu::kernel {
inline void switch_context(Context* from, Context to) { vgpu_kernel_switch_context(from, to); }
#else
void switch_context(Context* from, Context to);
#endif

}  // namespace vgpu::kernel
