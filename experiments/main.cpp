// ptdp: the command line of the PTD-P training and reproduction suite (experiments/cli_main.cpp).
#include "experiments/commands.h"

int main(int argc, char** argv) { return ptdp::cli_main(argc, argv); }
