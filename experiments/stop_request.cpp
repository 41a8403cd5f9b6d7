#include "experiments/stop_request.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace ptdp {

namespace {

volatile sig_atomic_t g_signal = 0;
std::atomic<int> g_stopped_after{-1};

void say(const char* text) {
  const ssize_t n = ::write(2, text, std::strlen(text));
  (void)n;
}

void on_stop_signal(int sig) {
  if (g_signal != 0) {  // the second: at once
    say(sig == SIGINT ? "\nptdp: SIGINT again: stopping at once\n" : "\nptdp: SIGTERM again: stopping at once\n");
    ::_exit(128 + sig);
  }
  g_signal = sig;
  say(sig == SIGINT ? "\nptdp: SIGINT: stopping after the iteration in progress, then writing what was measured "
                      "(interrupt again to stop at once)\n"
                    : "\nptdp: SIGTERM: stopping after the iteration in progress, then writing what was measured "
                      "(a second SIGTERM stops at once)\n");
}

}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // blocking calls go on; the training loop looks at the flag
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

int stop_signal() { return g_signal; }

void note_stopped_after(int iteration) { g_stopped_after.store(iteration); }
int stopped_after() { return g_stopped_after.load(); }

}  // namespace ptdp
