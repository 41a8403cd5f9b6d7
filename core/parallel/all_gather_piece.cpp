#include "core/parallel/all_gather_piece.h"

namespace ptdp {

void all_gather_piece(Backend& be, Communicator& group, const Tensor& mine, Tensor& whole) {
  Tensor own = be.empty({mine.numel()}, mine.dtype());
  be.copy(own, mine);
  group.all_gather(own, whole);
}

}  // namespace ptdp
