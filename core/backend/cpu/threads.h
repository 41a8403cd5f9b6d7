// CPU threads of the calling rank: OpenMP loops and OpenBLAS calls made from this thread use n.
#pragma once

namespace ptdp {

void set_cpu_threads(int n);

}  // namespace ptdp
