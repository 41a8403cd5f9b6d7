// Fiber context switching (see context.h): a hand-written x86-64 switch, or boost::context.
#include "kernel/context.h"

#include <cstdint>

#if defined(__x86_64__) && defined(__linux__)

// switch: push the System V callee-saved registers, store rsp in *from (rdi), load rsp from
// `to` (rsi), pop the registers of the resumed fiber and return into it.
// start: a fresh fiber's first "return" lands here with r12 = entry; it calls entry() on an
// aligned stack (entry never returns); CFI marks it the outermost frame for debuggers.
asm(R"(
  .pushsection .text
  .p2align 4
  .globl vgpu_kernel_switch_context
  .hidden vgpu_kernel_switch_context
  .type vgpu_kernel_switch_context,@function
vgpu_kernel_switch_context:
  .cfi_startproc
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .cfi_endproc
  .size vgpu_kernel_switch_context,.-vgpu_kernel_switch_context

  .p2align 4
  .globl vgpu_kernel_fiber_start
  .hidden vgpu_kernel_fiber_start
  .type vgpu_kernel_fiber_start,@function
vgpu_kernel_fiber_start:
  .cfi_startproc
  .cfi_undefined rip
  callq *%r12
  ud2
  .cfi_endproc
  .size vgpu_kernel_fiber_start,.-vgpu_kernel_fiber_start
  .popsection
)");

extern "C" void vgpu_kernel_fiber_start();

namespace vgpu::kernel {

Context make_context(char* top, size_t, void (*entry)()) {
  // After the six pops and the ret, rsp must be 16-byte aligned at vgpu_kernel_fiber_start, so
  // that entry() sees the ABI's alignment after the call.
  const uintptr_t aligned = (reinterpret_cast<uintptr_t>(top) & ~uintptr_t(15)) - 16;
  auto* sp = reinterpret_cast<uint64_t*>(aligned - 7 * sizeof(uint64_t));
  sp[0] = 0;                                                     // r15
  sp[1] = 0;                                                     // r14
  sp[2] = 0;                                                     // r13
  sp[3] = reinterpret_cast<uint64_t>(entry);                     // r12
  sp[4] = 0;                                                     // rbx
  sp[5] = 0;                                                     // rbp
  sp[6] = reinterpret_cast<uint64_t>(&vgpu_kernel_fiber_start);  // return address
  return sp;
}

}  // namespace vgpu::kernel

#else

#include <boost/context/detail/fcontext.hpp>

namespace vgpu::kernel {
namespace {

namespace bctx = boost::context::detail;
void (*g_entry)() = nullptr;  // the executor has one entry function

void start(bctx::transfer_t t) {
  *static_cast<bctx::fcontext_t*>(t.data) = t.fctx;
  g_entry();
}

}  // namespace

Context make_context(char* top, size_t size, void (*entry)()) {
  g_entry = entry;
  return bctx::make_fcontext(top, size, &start);
}

void switch_context(Context* from, Context to) {
  bctx::transfer_t t = bctx::jump_fcontext(to, from);
  *static_cast<bctx::fcontext_t*>(t.data) = t.fctx;  // the context of whoever resumed us
}

}  // namespace vgpu::kernel

#endif
