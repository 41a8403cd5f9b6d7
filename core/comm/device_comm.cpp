#include "core/comm/device_comm.h"

namespace ptdp {

namespace {

class DeviceComm final : public Communicator {
 public:
  DeviceComm(std::shared_ptr<Communicator> inner, Backend& be, Device place)
      : inner_(std::move(inner)), be_(be), place_(place) {
    timeout_ = inner_->timeout();
  }

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string backend() const override { return inner_->backend(); }

  void all_reduce(Tensor& x, ReduceOp op) override { all_reduce_async(x, op).wait(); }
  void all_gather(const Tensor& in, Tensor& out) override {
    settle();
    Tensor i = there(in), o = room_for(out);
    inner_->all_gather(i, o);
    back(o, out);
  }
  void reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) override {
    reduce_scatter_async(in, out, op).wait();
  }
  CommHandle reduce_scatter_async(const Tensor& in, Tensor& out, ReduceOp op) override {
    settle();
    Tensor i = there(in), o = room_for(out);
    CommHandle h = inner_->reduce_scatter_async(i, o, op);
    return CommHandle([this, h, i, o, out]() mutable {  // keeps the staged input until done
      h.wait();
      if (o.raw() != out.raw()) back(o, out);
    });
  }
  void broadcast(Tensor& x, int root) override {
    settle();
    Tensor t = there(x);
    inner_->broadcast(t, root);
    back(t, x);
  }
  void send(const Tensor& x, int peer, int tag) override { isend(x, peer, tag).wait(); }
  void recv(Tensor& x, int peer, int tag) override { irecv(x, peer, tag).wait(); }
  void barrier() override {
    settle();
    inner_->barrier();
  }

  CommHandle all_reduce_async(Tensor& x, ReduceOp op) override {
    settle();
    Tensor t = there(x);
    CommHandle h = inner_->all_reduce_async(t, op);
    if (t.raw() == x.raw()) return h;
    return CommHandle([this, h, t, x]() mutable {
      h.wait();
      back(t, x);
    });
  }
  CommHandle isend(const Tensor& x, int peer, int tag) override {
    settle();
    Tensor t = there(x);
    CommHandle h = inner_->isend(t, peer, tag);
    return CommHandle([h, t]() mutable { h.wait(); });  // keeps the temporary until sent
  }
  CommHandle irecv(Tensor& x, int peer, int tag) override {
    Tensor t = room_for(x);
    CommHandle h = inner_->irecv(t, peer, tag);
    if (t.raw() == x.raw()) return h;
    return CommHandle([this, h, t, x]() mutable {
      h.wait();
      back(t, x);
    });
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    settle();
    return std::make_unique<DeviceComm>(std::shared_ptr<Communicator>(inner_->split(color, key)), be_, place_);
  }
  void abort(const std::string& why) override { inner_->abort(why); }

 private:
  // A host communicator reads finished data: the rank's queued compute is waited for. A device
  // one (nccl) orders itself after the compute stream, without the host waiting.
  void settle() {
    if (place_ == Device::CPU) be_.synchronize();
  }
  // x where the inner communicator needs it: x itself, or a copy.
  Tensor there(const Tensor& x) { return place_ == Device::CPU ? to_host(be_, x) : to_backend(be_, x); }
  // A buffer for x's values where the inner communicator needs it (x itself when there).
  Tensor room_for(const Tensor& x) {
    if (x.device() == place_) return x;
    return place_ == Device::CPU ? Tensor::empty(x.shape(), x.dtype()) : be_.empty(x.shape(), x.dtype());
  }
  // Copies the result t back into x (nothing when t is x).
  void back(const Tensor& t, Tensor& x) {
    if (t.raw() != x.raw()) be_.copy(x, t);
  }

  std::shared_ptr<Communicator> inner_;
  Backend& be_;
  Device place_;
};

}  // namespace

std::unique_ptr<Communicator> make_device_comm(std::unique_ptr<Communicator> inner, Backend& be, Device place) {
  return std::make_unique<DeviceComm>(std::shared_ptr<Communicator>(std::move(inner)), be, place);
}

std::unique_ptr<Communicator> make_device_comm(Communicator& inner, Backend& be, Device place) {
  return std::make_unique<DeviceComm>(std::shared_ptr<Communicator>(&inner, [](Communicator*) {}), be, place);
}

}  // namespace ptdp
