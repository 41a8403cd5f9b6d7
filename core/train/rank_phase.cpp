#include "core/train/rank_phase.h"

#include "core/comm/agreement.h"
#include "core/common/one_line.h"

namespace ptdp {

void rank_phase(Communicator& launched, const std::function<void()>& fn) {
  if (launched.backend() == "mpi") return agree(launched, fn);
  fn();
  launched.barrier();
}

void stop_others_if_processes(Communicator& launched, const std::exception& e) {
  if (launched.backend() == "mpi" && launched.size() > 1 && !dynamic_cast<const AgreedError*>(&e))
    launched.abort(one_line(e.what()));
}

}  // namespace ptdp
