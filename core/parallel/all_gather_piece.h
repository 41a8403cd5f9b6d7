// All-gather of this rank's piece of a buffer: `mine` (any view, of whole's dtype) is copied into
// a buffer of its own first, since all_gather's input must not overlap its output `whole`.
#pragma once
#include "core/backend/backend.h"
#include "core/comm/communicator.h"

namespace ptdp {

void all_gather_piece(Backend& be, Communicator& group, const Tensor& mine, Tensor& whole);

}  // namespace ptdp
