// Device memory the host cannot touch. On a GPU, host code that dereferences a device pointer
// faults; here device memory is host memory, so such code would run and pass. The views of device
// memory (arena.h) are therefore closed to every thread except while it works on the device's
// behalf: a stream item (kernels, copies, memsets, cuBLAS, NCCL), the runtime's own filling and
// checking of guard zones and poison, and a test helper that says it touches device memory on
// purpose (vgpu::HostTouchesDeviceMemory). Any other access faults and is reported as
// `host access to device memory` with the address, the allocation and the host's frames.
//
// Two mechanisms (VGPU_PROTECT, the README's "Host access" explains the choice):
//  - pkeys: the views carry a protection key; a thread's PKRU register says whether it may use
//    them, so the permission is per thread and costs one register write per scope (no syscall);
//  - mprotect (CPUs or kernels without protection keys): the views are PROT_NONE; a permitted
//    thread's first access to a 256 KiB chunk faults and the handler opens that chunk, and the
//    thread closes what it opened when its scope ends. Permission is per process while a chunk is
//    open: host code touching a chunk that device work on another thread has open at that moment
//    goes unseen (never a false report).
#pragma once
#include <csignal>
#include <cstddef>
#include <cstdint>

namespace vgpu::rt {

enum class Protection { Off, Pkeys, Mprotect };
// The mechanism in use (decided when the arena is reserved; Off before and without views).
Protection protection();
// Chooses the mechanism (VGPU_PROTECT: auto (default), pkeys, mprotect, 0) for `views` views of
// `view_bytes` bytes from `base`, mapped by the caller with protection_for_mapping(), and applies
// it. Called once, with the arena's lock held.
int protection_for_mapping();
void protect_views(char* base, size_t view_bytes, unsigned views);

// While one exists on a thread, that thread may touch device memory (nests). An item's
// (keep_open): with mprotect, what the item opened stays open until a host thread synchronises
// (host_synchronized), on the stream's worker or on the submitting thread alike, as the host
// reading a kernel's memory before synchronising with it is a race anyway; other scopes close
// what they opened when they end.
class DeviceAccess {
 public:
  explicit DeviceAccess(bool keep_open = false);
  ~DeviceAccess();
  DeviceAccess(const DeviceAccess&) = delete;
  DeviceAccess& operator=(const DeviceAccess&) = delete;
};
// While one exists, the thread is host code again although a DeviceAccess is open around it (a
// host function a stream runs, cudaLaunchHostFunc).
class HostCode {
 public:
  HostCode();
  ~HostCode();
  HostCode(const HostCode&) = delete;
  HostCode& operator=(const HostCode&) = delete;

 private:
  int saved_;
};
bool device_access_allowed();  // on this thread
// A thread the vgpu starts (a stream's worker) begins without access, whatever its creator had.
void start_without_device_access();
// mprotect: opens the chunks of [p, p + bytes) for this thread (inside a DeviceAccess) with one
// call, instead of a fault per chunk (an item's operands).
void open_ahead(const void* p, size_t bytes);
// mprotect: items keep what they open (each close is a TLB shootdown across CPUs); everything
// opened is closed, in one call, when a host thread has waited for device work
// (host_synchronized: a synchronisation, a blocking copy, a successful query), the moment from
// which host code may wrongly take device memory for its own. A stream worker is marked once
// (keep_open_between_items): no synchronisation of its own closes anything.
void keep_open_between_items();
void host_synchronized();

// After a host access was reported while violations are captured: the access goes on, as on a
// machine where it would have read garbage (this thread, until its next DeviceAccess ends or the
// capture ends).
void lend_device_access(const void* p, size_t bytes);
void end_lent_access();

// A SIGSEGV in device memory: opens a chunk for a permitted thread (mprotect), reports a host
// access (and, when captured, lends access). True when the access may be retried.
bool on_device_memory_fault(int sig, siginfo_t* info, void* ucontext);

}  // namespace vgpu::rt
