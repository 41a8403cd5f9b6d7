#!/usr/bin/env bash
# throttle.sh COMMAND...: runs COMMAND stopped nine tenths of the time (SIGSTOP 45 ms, SIGCONT
# 5 ms), as a node held back by its clocks would run: the slow node of a simulated fleet. (A
# quarter of the time running was not enough: the fleet's other processes share two cores, and
# under another job's load they ran as slowly as the throttled one.)
"$@" &
pid=$!
# The loop at a higher priority than the work (root may raise it; otherwise it stays): a loop that
# waits for a core while the command runs would let it run a whole measurement unthrottled.
renice -n -10 -p $$ >/dev/null 2>&1 || true
trap 'kill -CONT $pid 2>/dev/null; kill $pid 2>/dev/null' TERM INT
while kill -0 "$pid" 2>/dev/null; do
  kill -STOP "$pid" 2>/dev/null
  sleep 0.045
  kill -CONT "$pid" 2>/dev/null
  sleep 0.005
done
wait "$pid"
