// SIGINT and SIGTERM in ptdp's long commands: one handler, and what a first signal does in each.
// A signal that ends the process writes its line to stderr and exits 128 + the signal (130, 143);
// inside deferring_interrupts() that exit waits until the work there is done.
//   FinishTheIteration (`ptdp train`): the first signal asks the run to stop after the iteration
//     in progress (stop_signal(); every rank stops after the same one: the request travels with
//     the iteration's all-reduce), save a checkpoint when --save is given, write the loss log and
//     the result row of what was measured, say so, and exit 128 + the signal; a second signal
//     ends the process at once.
//   ExitAtOnce (`ptdp reproduce`): the first signal ends the process, saying exit_message().
#pragma once
#include <functional>
#include <string>

namespace ptdp {

enum class OnInterrupt { FinishTheIteration, ExitAtOnce };

// Installs the handler for SIGINT and SIGTERM (again: the policy changes). Until then
// stop_signal() stays 0 and a signal does what it does by default.
void install_interrupt_handlers(OnInterrupt policy);

// ExitAtOnce: the line a signal writes as it ends the process (none until set).
void set_exit_message(const std::string& line);

// FinishTheIteration: the signal received (SIGINT or SIGTERM), 0 when none.
int stop_signal();

// Runs fn with the exit a signal causes held back until fn returns (a result row being written
// is finished first). When fn throws, the exception goes on and a held signal waits for the end
// of the next deferring_interrupts whose fn returns.
void deferring_interrupts(const std::function<void()>& fn);

// The run stopped early after `iteration` (world rank 0 records it); stopped_after() is -1
// when the run went to its end.
void note_stopped_after(int iteration);
int stopped_after();

}  // namespace ptdp
