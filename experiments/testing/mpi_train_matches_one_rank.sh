#!/usr/bin/env bash
# ctest: `mpirun -np 4 ptdp train --comm mpi --tp 2 --dp 2` prints the same loss at every
# iteration as `ptdp train` on one rank (the weights are compared in ptdp_mpi_tests).
set -euo pipefail
ptdp=$1
mpirun=$2
args=(train --model tiny --iters 3 --warmup 1 --micro-batch 2 --global-batch 8 --seed 21 --log-interval 1)
one=$("$ptdp" "${args[@]}" | grep '^ iteration' | sed 's/.*loss \([0-9.]*\).*/\1/')
four=$("$mpirun" --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 -np 4 \
         "$ptdp" "${args[@]}" --comm mpi --tp 2 --dp 2 | grep '^ iteration' | sed 's/.*loss \([0-9.]*\).*/\1/')
echo "one rank: " $one
echo "4 ranks:  " $four
[ -n "$one" ] && [ "$one" == "$four" ]
