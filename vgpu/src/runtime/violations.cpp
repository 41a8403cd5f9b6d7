// Violations: misuse the vgpu detects. Fatal by default (printed to stderr, then abort), collected
// instead while a CaptureViolations exists (harness tests of planted bugs).
#include <vgpu/runtime.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "runtime/protect.h"

namespace vgpu {
namespace {
struct Captures {
  std::mutex mu;
  int live = 0;                       // CaptureViolations alive (process-wide)
  std::vector<std::string> messages;  // since the first of them was created
};
Captures& captures() {
  static Captures* c = new Captures;  // never destroyed: workers may report during exit
  return *c;
}
}  // namespace

void report_violation(const std::string& kind, const std::string& message) {
  Captures& c = captures();
  std::unique_lock<std::mutex> lock(c.mu);
  if (c.live > 0) {
    c.messages.push_back(kind + ": " + message);
    return;
  }
  std::fprintf(stderr, "vgpu: %s: %s\n", kind.c_str(), message.c_str());
  std::fflush(stderr);
  std::abort();
}

CaptureViolations::CaptureViolations() {
  Captures& c = captures();
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.live++ == 0) c.messages.clear();
}

CaptureViolations::~CaptureViolations() {
  rt::end_lent_access();
  Captures& c = captures();
  std::lock_guard<std::mutex> lock(c.mu);
  --c.live;
}

std::vector<std::string> CaptureViolations::messages() const {
  Captures& c = captures();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.messages;
}

}  // namespace vgpu
