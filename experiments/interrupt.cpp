#include "experiments/interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace ptdp {

namespace {

volatile sig_atomic_t g_policy = int(OnInterrupt::FinishTheIteration);
volatile sig_atomic_t g_signal = 0;     // FinishTheIteration: the first signal
volatile sig_atomic_t g_deferring = 0;  // inside deferring_interrupts
volatile sig_atomic_t g_held = 0;       // a signal whose exit waits for the deferral's end
char g_exit_message[1024];
volatile sig_atomic_t g_exit_message_len = 0;
std::atomic<int> g_stopped_after{-1};

void say(const char* text, size_t n) {
  const ssize_t written = ::write(2, text, n);
  (void)written;
}
void say(const char* text) { say(text, std::strlen(text)); }

// Ends the process for `sig` with the policy's line, or holds the exit while deferring.
void exit_for(int sig) {
  if (g_deferring) {
    g_held = sig;
    return;
  }
  if (g_policy == int(OnInterrupt::ExitAtOnce))
    say(g_exit_message, size_t(g_exit_message_len));
  else
    say(sig == SIGINT ? "\nptdp: SIGINT again: stopping at once\n" : "\nptdp: SIGTERM again: stopping at once\n");
  ::_exit(128 + sig);
}

void on_signal(int sig) {
  if (g_policy == int(OnInterrupt::ExitAtOnce) || g_signal != 0) return exit_for(sig);
  g_signal = sig;
  say(sig == SIGINT ? "\nptdp: SIGINT: stopping after the iteration in progress, then writing what was measured "
                      "(interrupt again to stop at once)\n"
                    : "\nptdp: SIGTERM: stopping after the iteration in progress, then writing what was measured "
                      "(a second SIGTERM stops at once)\n");
}

}  // namespace

void install_interrupt_handlers(OnInterrupt policy) {
  g_policy = int(policy);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // blocking calls go on; the training loop looks at the flag
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

void set_exit_message(const std::string& line) {
  g_exit_message_len = 0;  // a signal meanwhile says nothing rather than half a line
  const size_t n = std::min(line.size(), sizeof g_exit_message);
  std::memcpy(g_exit_message, line.data(), n);
  g_exit_message_len = sig_atomic_t(n);
}

int stop_signal() { return g_signal; }

void deferring_interrupts(const std::function<void()>& fn) {
  g_deferring = 1;
  try {
    fn();
  } catch (...) {
    g_deferring = 0;
    throw;
  }
  g_deferring = 0;
  if (g_held) exit_for(g_held);
}

void note_stopped_after(int iteration) { g_stopped_after.store(iteration); }
int stopped_after() { return g_stopped_after.load(); }

}  // namespace ptdp
