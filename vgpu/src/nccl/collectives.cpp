// The NCCL operation calls (collectives, ncclSend, ncclRecv): argument checks and the bounds of
// every buffer, then queuing on the stream through the group machinery (group.cpp).
#include <sstream>

#include "nccl/comm.h"
#include "nccl/reduce.h"

namespace vgpu::nccl {
namespace {

struct Call {
  const char* api;
  Kind kind;
  const void* send;
  void* recv;
  size_t count;
  ncclDataType_t dtype;
  int redop;
  int root;  // root, or peer for send/recv
};

bool overlap(const void* a, size_t na, const void* b, size_t nb) {
  const char *x = static_cast<const char*>(a), *y = static_cast<const char*>(b);
  return na && nb && x < y + nb && y < x + na;
}

// The stream the operation goes to: a null stream is the legacy default stream of the
// communicator's device (NCCL runs its kernels on the communicator's device).
ncclResult_t resolve(const Call& c, const Handle& h, cudaStream_t* stream) {
  if (!*stream) {
    const int previous = current_device();
    if (previous != h.device) cudaSetDevice(h.device);
    *stream = resolve_stream(nullptr);
    if (previous != h.device) cudaSetDevice(previous);
  }
  const int dev = stream_device(*stream);
  if (dev < 0) return fail(ncclUnhandledCudaError, std::string(c.api) + ": invalid stream");
  if (dev != h.device) {
    std::ostringstream m;
    m << c.api << " was given a stream of device " << dev << ", but rank " << h.rank
      << " of the communicator is on device " << h.device
      << "; NCCL launches the operation on the communicator's device, in the given stream, so the stream must "
         "belong to that device.";
    report_violation("nccl wrong device", m.str());
    return fail(ncclUnhandledCudaError, m.str());
  }
  return ncclSuccess;
}

ncclResult_t post(const Call& c, ncclComm_t comm, cudaStream_t stream) {
  Site site = capture_site(c.api);
  Handle h;
  if (ncclResult_t r = lookup(comm, c.api, &h); r != ncclSuccess) return group_error(r);
  const std::string api = c.api;
  const size_t es = dtype_size(c.dtype);
  if (es == 0)
    return group_error(fail(ncclInvalidArgument, api + ": invalid datatype " + std::to_string(int(c.dtype))));
  if (has_redop(c.kind)) {
    if (c.redop < 0 || c.redop >= ncclNumOps)
      return group_error(fail(ncclInvalidArgument, api + ": invalid reduction operation " + std::to_string(c.redop) +
                                                       " (user-defined operations are not supported by the vgpu)"));
    if (!dtype_reducible(c.dtype))
      return group_error(
          fail(ncclInvalidArgument, api + ": reductions of " + dtype_name(c.dtype) + " are not supported by the vgpu"));
  }
  if ((has_root(c.kind) || is_p2p(c.kind)) && (c.root < 0 || c.root >= h.nranks))
    return group_error(fail(ncclInvalidArgument, api + (is_p2p(c.kind) ? ": peer " : ": root ") +
                                                     std::to_string(c.root) + " is not a rank of the communicator (" +
                                                     std::to_string(h.nranks) + " ranks)"));
  const size_t n = size_t(h.nranks);
  if (c.count > (SIZE_MAX / es) / n) return group_error(fail(ncclInvalidArgument, api + ": count too large"));
  const size_t bytes = c.count * es;

  // The buffers this rank's part reads and writes ("sendbuff"/"recvbuff" per NCCL's
  // collective pages: Broadcast's sendbuff and Reduce's recvbuff are used on the root only;
  // AllGather's recvbuff holds nranks*sendcount, ReduceScatter's sendbuff nranks*recvcount).
  Buffer bufs[2];
  const char* names[2];
  int nb = 0;
  auto use = [&](const void* p, size_t b, Access a, const char* name) {
    bufs[nb] = Buffer{p, b, a};
    names[nb++] = name;
  };
  const bool root = c.root == h.rank;
  switch (c.kind) {
    case Kind::AllReduce:
      use(c.send, bytes, Access::Read, "sendbuff");
      use(c.recv, bytes, Access::Write, "recvbuff");
      break;
    case Kind::Broadcast:
      if (root) use(c.send, bytes, Access::Read, "sendbuff");
      use(c.recv, bytes, Access::Write, "recvbuff");
      break;
    case Kind::Reduce:
      use(c.send, bytes, Access::Read, "sendbuff");
      if (root) use(c.recv, bytes, Access::Write, "recvbuff");
      break;
    case Kind::AllGather:
      use(c.send, bytes, Access::Read, "sendbuff");
      use(c.recv, bytes * n, Access::Write, "recvbuff");
      break;
    case Kind::ReduceScatter:
      use(c.send, bytes * n, Access::Read, "sendbuff");
      use(c.recv, bytes, Access::Write, "recvbuff");
      break;
    case Kind::Send:
      use(c.send, bytes, Access::Read, "sendbuff");
      break;
    case Kind::Recv:
      use(c.recv, bytes, Access::Write, "recvbuff");
      break;
  }
  for (int i = 0; i < nb; ++i) {
    if (bufs[i].bytes == 0) continue;
    const std::string what = api + " " + names[i] + " (rank " + std::to_string(h.rank) + ")";
    if (!bufs[i].ptr) return group_error(fail(ncclInvalidArgument, what + " is NULL"));
    // NCCL's buffers are device memory of the communicator's GPU; an overrun is a violation.
    if (!check_range(bufs[i].ptr, bufs[i].bytes, what))
      return group_error(fail(ncclInvalidArgument, what + ": " + std::to_string(bufs[i].bytes) +
                                                       " bytes do not lie inside one device allocation"));
  }
  // NCCL ("In-place Operations"): in-place means sendbuff == recvbuff for AllReduce, Broadcast
  // and Reduce, sendbuff == recvbuff + rank*sendcount for AllGather and recvbuff == sendbuff +
  // rank*recvcount for ReduceScatter; any other overlap gives undefined results on a GPU.
  if (nb == 2 && overlap(bufs[0].ptr, bufs[0].bytes, bufs[1].ptr, bufs[1].bytes)) {
    const char* s = static_cast<const char*>(bufs[0].ptr);
    const char* r = static_cast<const char*>(bufs[1].ptr);
    const size_t off = size_t(h.rank) * bytes;
    const bool in_place = c.kind == Kind::AllGather       ? s == r + off
                          : c.kind == Kind::ReduceScatter ? r == s + off
                                                          : s == r;
    if (!in_place) {
      std::ostringstream m;
      m << api << " (rank " << h.rank << "): sendbuff " << bufs[0].ptr << " (" << bufs[0].bytes
        << " bytes) and recvbuff " << bufs[1].ptr << " (" << bufs[1].bytes
        << " bytes) overlap without being NCCL's in-place layout ("
        << (c.kind == Kind::AllGather       ? "sendbuff == recvbuff + rank*sendcount"
            : c.kind == Kind::ReduceScatter ? "recvbuff == sendbuff + rank*recvcount"
                                            : "sendbuff == recvbuff")
        << "); the result would be undefined on a GPU.";
      report_violation("nccl overlapping buffers", m.str());
      return group_error(fail(ncclInvalidArgument, m.str()));
    }
  }
  if (ncclResult_t r = resolve(c, h, &stream); r != ncclSuccess) return group_error(r);
  Op op;
  op.kind = c.kind;
  op.send = c.send;
  op.recv = c.recv;
  op.count = c.count;
  op.dtype = c.dtype;
  op.redop = c.redop;
  op.root = c.root;
  return submit(h, stream, op, bufs, nb, std::move(site));
}

}  // namespace
}  // namespace vgpu::nccl

using vgpu::nccl::Call;
using vgpu::nccl::Kind;
using vgpu::nccl::post;

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  return post(Call{"ncclAllReduce", Kind::AllReduce, sendbuff, recvbuff, count, datatype, op, 0}, comm, stream);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return post(Call{"ncclBroadcast", Kind::Broadcast, sendbuff, recvbuff, count, datatype, ncclSum, root}, comm, stream);
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return post(Call{"ncclReduce", Kind::Reduce, sendbuff, recvbuff, count, datatype, op, root}, comm, stream);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return post(Call{"ncclAllGather", Kind::AllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0}, comm,
              stream);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return post(Call{"ncclReduceScatter", Kind::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0}, comm,
              stream);
}

// NCCL: "Send data from sendbuff to rank peer. Rank peer needs to call ncclRecv with the same
// datatype and the same count from this rank. This operation is blocking for the GPU."
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return post(Call{"ncclSend", Kind::Send, sendbuff, nullptr, count, datatype, ncclSum, peer}, comm, stream);
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return post(Call{"ncclRecv", Kind::Recv, nullptr, recvbuff, count, datatype, ncclSum, peer}, comm, stream);
}
