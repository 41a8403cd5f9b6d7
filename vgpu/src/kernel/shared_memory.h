// Shared memory poison: device.h declares each __shared__ variable as a function-local
// thread_local tagged with abi_tag("vgpu_shared") (the tag is part of its symbol's name). The
// executor finds those variables once in the executable's symbol table and, before every block,
// fills the running worker thread's copy of each with 0xFF, so that a block reading shared memory
// it did not write (left over from the previous block on a GPU, or never written) sees NaNs and
// -1s rather than the previous block's values.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace vgpu::kernel {

// Before a block: fills with 0xFF this thread's copy of every __shared__ variable that a block
// may have written since the last fill (a no-op when none was found). What an instrumented
// kernel writes there is noted by the access hooks (note_shared_write), so only that span is
// filled again; the whole of it is filled on a thread's first block and after a block that
// noted no write at all (an uninstrumented kernel, whose stores are not seen).
void poison_shared_memory();
// After a block (run on this thread since the last poison_shared_memory()).
void shared_block_done();

// The writes noted on this thread: the span of its __shared__ variables to fill again, as offsets
// from `lo_addr` (none while lo >= hi; all of them before the thread's first fill, and after a
// block that noted no write; nothing is in range before the first fill).
struct SharedWrites {
  uintptr_t lo_addr = 0;
  size_t span = 0;
  size_t lo = 0, hi = SIZE_MAX;
  uint64_t count = 0;  // every write noted, in or out of shared memory
};
extern constinit thread_local SharedWrites t_shared_writes __attribute__((tls_model("initial-exec")));
inline void note_shared_write(const void* p, size_t n) {
  SharedWrites& w = t_shared_writes;
  ++w.count;
  const size_t off = reinterpret_cast<uintptr_t>(p) - w.lo_addr;
  if (off < w.span) {
    if (off < w.lo) w.lo = off;
    if (off + n > w.hi) w.hi = off + n;
  }
}

// How many __shared__ variables (and bytes) poison_shared_memory() fills; -1 when the
// executable's symbol table could not be read (poisoning is then off).
long shared_variables_found();
// (Those no red zone follows: vgpu::unguarded_shared_variables(), vgpu/runtime.h.)
size_t shared_bytes_found();

// This thread's copy of the __shared__ variables, and of the executable's whole TLS block (which
// also holds threadIdx and the other built-ins), for the access checks (access_check.h). Empty
// when the symbol table could not be read.
struct SharedVariable {
  char* addr;
  size_t bytes;
  const std::string* name;  // demangled symbol: "float* block_sum<float>(float)::partial[abi:vgpu_shared]"
};
struct ThreadSharedMemory {
  char* tls_lo = nullptr;
  char* tls_hi = nullptr;
  std::vector<SharedVariable> variables;  // sorted by address
};
ThreadSharedMemory this_thread_shared_memory();

}  // namespace vgpu::kernel
