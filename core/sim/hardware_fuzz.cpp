// libFuzzer target: the TOML hardware profile reader (core/sim/hardware.h). The input is the
// text of a profile, written to a NAME.toml file and read with load_profile (which calls
// parse_profile); what loads is then used as the performance model uses it.
// Expected: ptdp::UsageError, one line naming the file; anything else (a crash, a sanitizer report,
// another exception, a loaded profile that breaks its documented ranges) is a finding.
// Build and run: scripts/fuzz.sh (docs/ROBUSTNESS.md); seeds in fuzz/hardware_fuzz/.
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>

#include "core/common/error.h"
#include "core/sim/hardware.h"

namespace {

// One file in a private folder per process, removed at exit. Kept in static buffers: an atexit
// handler runs after the destructors of later function statics.
char g_dir[64], g_path[96];

std::string toml_path() {
  if (g_dir[0] == '\0') {
    std::strcpy(g_dir, "/tmp/ptdp_hw_fuzz.XXXXXX");
    if (!::mkdtemp(g_dir)) std::abort();
    std::snprintf(g_path, sizeof g_path, "%s/fuzz.toml", g_dir);
    std::atexit([] {
      ::unlink(g_path);
      ::rmdir(g_dir);
    });
  }
  return g_path;
}

[[noreturn]] void finding(const char* what, const std::string& msg) {
  std::fprintf(stderr, "FINDING: %s: %s\n", what, msg.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FILE* f = std::fopen(toml_path().c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  try {
    const ptdp::sim::HardwareProfile hw = ptdp::sim::load_profile(toml_path());
    // The documented ranges of what loaded.
    if (hw.gpus_per_node < 1 || hw.nics_per_node < 1) finding("range", "gpus or nics per node below 1");
    if (!(hw.peak(hw.default_precision) > 0)) finding("range", "default precision without a peak");
    if (!(hw.memory_bytes > hw.reserved_bytes)) finding("range", "reserved memory not below capacity");
    for (const auto& p : hw.gemm_points)
      if (p.m <= 0 || p.n <= 0 || p.k <= 0 || !(p.tflops > 0)) finding("range", "gemm point not positive");
    // As the cost model uses it: GEMM efficiency at a few shapes.
    for (double m : {1.0, 128.0, 8192.0}) {
      const double e = hw.gemm.efficiency(m, m, m);
      if (!(e >= 0 && e <= 1)) finding("range", "GEMM efficiency outside [0, 1]");
    }
  } catch (const ptdp::UsageError& e) {
    const std::string_view msg(e.what());
    if (msg.find(toml_path()) == std::string_view::npos) finding("UsageError without the file name", e.what());
    if (msg.find('\n') != std::string_view::npos) finding("UsageError of more than one line", e.what());
  } catch (const std::exception& e) {
    finding("unexpected exception", e.what());
  }
  return 0;
}
