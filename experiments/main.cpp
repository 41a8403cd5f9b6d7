// ptdp: the command line of the PTD-P training and reproduction suite (experiments/cli_main.cpp).
#include "core/backend/cpu/blas_core.h"
#include "experiments/commands.h"

int main(int argc, char** argv) {
  ptdp::cpu::prefer_known_blas_core(argv);  // first: it may start the program again
  return ptdp::cli_main(argc, argv);
}
