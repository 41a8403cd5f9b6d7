#!/usr/bin/env bash
# throttle.sh COMMAND...: runs COMMAND stopped three quarters of the time (SIGSTOP 30 ms,
# SIGCONT 10 ms), as a node held back by its clocks would run: the slow node of a simulated fleet.
"$@" &
pid=$!
trap 'kill -CONT $pid 2>/dev/null; kill $pid 2>/dev/null' TERM INT
while kill -0 "$pid" 2>/dev/null; do
  kill -STOP "$pid" 2>/dev/null
  sleep 0.03
  kill -CONT "$pid" 2>/dev/null
  sleep 0.01
done
wait "$pid"
