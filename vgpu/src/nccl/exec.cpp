// NCCL data movement: runs a matched operation over the ranks' device buffers (inputs checked
// initialised, outputs marked written) and reports mismatched arguments with every rank's call.
#include <cstring>
#include <sstream>

#include "kernel/raw_memory.h"
#include "runtime/arena.h"
#include "nccl/comm.h"
#include "nccl/reduce.h"

namespace vgpu::nccl {
namespace {

std::string rank_operand(const char* api, const char* operand, int rank) {
  return std::string(api) + " " + operand + " of rank " + std::to_string(rank);
}

// Reusable per executing thread, so the steady state allocates nothing.
std::vector<char>& scratch(size_t bytes) {
  thread_local std::vector<char> s;
  if (s.size() < bytes) s.resize(bytes);
  return s;
}

class DeviceExecutor final : public Executor {
 public:
  // Results are the same bits on every rank: each output is computed once, combining the ranks'
  // inputs in rank order, and copied to every rank that receives it.
  void collective(const Op* const* p, int n) override {
    const Op& a = *p[0];
    const char* api = kind_name(a.kind);
    const size_t es = dtype_size(a.dtype), bytes = a.count * es;
    if (bytes == 0) return;
    thread_local std::vector<const void*> in;
    in.resize(size_t(n));
    switch (a.kind) {
      case Kind::AllReduce:
      case Kind::Reduce: {
        for (int r = 0; r < n; ++r) {
          check_initialized(p[r]->send, bytes, rank_operand(api, "sendbuff", r));
          in[size_t(r)] = vgpu::rt::untag(p[r]->send);  // view 0: open to the runtime (runtime/protect.h)
        }
        char* out = scratch(bytes).data();
        reduce(a.dtype, a.redop, in.data(), n, out, a.count);
        for (int r = 0; r < n; ++r) {
          if (a.kind == Kind::Reduce && r != a.root) continue;  // "recvbuff ... only used on rank root"
          vgpu::kernel::raw_memcpy(p[r]->recv, out, bytes);
          mark_initialized(p[r]->recv, bytes);
        }
        return;
      }
      case Kind::Broadcast: {
        const void* src = p[a.root]->send;  // "sendbuff ... only used on rank root"
        check_initialized(src, bytes, rank_operand(api, "sendbuff", a.root));
        for (int r = 0; r < n; ++r) {
          if (p[r]->recv != src) vgpu::kernel::raw_memmove(p[r]->recv, src, bytes);
          mark_initialized(p[r]->recv, bytes);
        }
        return;
      }
      case Kind::AllGather: {
        // In place (sendbuff == recvbuff + rank*sendcount) works: rank q's input lies in chunk q of
        // its own output, which no other copy writes.
        for (int q = 0; q < n; ++q) {
          const void* src = p[q]->send;
          check_initialized(src, bytes, rank_operand(api, "sendbuff", q));
          for (int r = 0; r < n; ++r) {
            char* dst = static_cast<char*>(p[r]->recv) + size_t(q) * bytes;
            if (dst != src) vgpu::kernel::raw_memmove(dst, src, bytes);
          }
        }
        for (int r = 0; r < n; ++r) mark_initialized(p[r]->recv, size_t(n) * bytes);
        return;
      }
      case Kind::ReduceScatter: {
        // In place (recvbuff == sendbuff + rank*recvcount) works: chunk r of every input is read
        // only for rank r's output, computed into scratch before it is written.
        for (int r = 0; r < n; ++r) check_initialized(p[r]->send, size_t(n) * bytes, rank_operand(api, "sendbuff", r));
        char* out = scratch(bytes).data();
        for (int r = 0; r < n; ++r) {
          for (int q = 0; q < n; ++q) in[size_t(q)] = vgpu::rt::untag(static_cast<const char*>(p[q]->send) + size_t(r) * bytes);
          reduce(a.dtype, a.redop, in.data(), n, out, a.count);
          vgpu::kernel::raw_memcpy(p[r]->recv, out, bytes);
          mark_initialized(p[r]->recv, bytes);
        }
        return;
      }
      default:
        return;
    }
  }

  void transfer(const Op& send, int src, const Op& recv, int dst) override {
    const size_t bytes = send.count * dtype_size(send.dtype);
    if (bytes == 0) return;
    check_initialized(send.send, bytes, rank_operand("ncclSend", "sendbuff", src));
    if (recv.recv != send.send) vgpu::kernel::raw_memmove(recv.recv, send.send, bytes);
    mark_initialized(recv.recv, bytes);
    (void)dst;
  }

  std::string mismatch(const Op* const* parts, const int* ranks, int k, const std::string& reason) override {
    const bool p2p = is_p2p(parts[0]->kind);
    std::ostringstream m;
    if (p2p) {
      m << "ncclSend from rank " << ranks[0] << " and the ncclRecv of rank " << ranks[1]
        << " it matches (send/receive #" << parts[0]->seq << " between them) disagree: " << reason
        << ". NCCL: the peer \"needs to call ncclRecv with the same datatype and the same count\" (sends and "
           "receives between two ranks match in the order they are issued).";
    } else {
      m << "collective #" << parts[0]->seq << " on a communicator of " << k
        << " ranks has arguments that differ between the ranks: " << reason
        << ". NCCL matches collectives by the order each rank issues them on the communicator, and every rank "
           "must call the same collective with the same count, datatype, reduction op and root.";
    }
    for (int i = 0; i < k; ++i)
      m << "\n    rank " << ranks[i] << ": " << describe_args(*parts[i]) << " called at "
        << (parts[i]->site ? parts[i]->site->describe() : std::string("?"));
    m << "\n    The communicator's asynchronous error (ncclCommGetAsyncError) is now ncclInvalidUsage.";
    const std::string msg = m.str();
    report_violation(p2p ? "mismatched send/recv" : "mismatched collective", msg);
    note_async_error(msg);
    return msg;
  }
};

}  // namespace

Executor& device_executor() {
  static DeviceExecutor* e = new DeviceExecutor;  // never destroyed: workers may run during exit
  return *e;
}

}  // namespace vgpu::nccl
