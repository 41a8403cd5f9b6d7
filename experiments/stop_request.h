// SIGINT and SIGTERM during `ptdp train`: the first signal asks the run to stop after the
// iteration in progress (every rank stops after the same one: the request travels with the
// iteration's all-reduce), save a checkpoint when --save is given, write the loss log and the
// result row of what was measured, say so, and exit 128 + the signal (130, 143). A second
// signal ends the process at once with that code.
#pragma once

namespace ptdp {

// Installs the handlers (idempotent). Until then stop_signal() stays 0.
void install_stop_handlers();

// The signal received (SIGINT or SIGTERM), 0 when none.
int stop_signal();

// The run stopped early after `iteration` (world rank 0 records it); stopped_after() is -1
// when the run went to its end.
void note_stopped_after(int iteration);
int stopped_after();

}  // namespace ptdp
