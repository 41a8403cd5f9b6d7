// Shared memory poison: device.h declares each __shared__ variable as a function-local
// thread_local tagged with abi_tag("vgpu_shared") (the tag is part of its symbol's name). The
// executor finds those variables once in the executable's symbol table and, before every block,
// fills the running worker thread's copy of each with 0xFF, so that a block reading shared memory
// it did not write (left over from the previous block on a GPU, or never written) sees NaNs and
// -1s rather than the previous block's values.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace vgpu::kernel {

// Fills this thread's copy of every __shared__ variable with 0xFF (a no-op when none was found).
void poison_shared_memory();

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
