// libFuzzer target: the TOML hardware profile reader (core/sim/hardware.h). The input is the
// text of a profile, written to a NAME.toml file and read with load_profile (which calls
// parse_profile); what loads is then used as the performance model uses it.
// Expected: ptdp::UsageError, one line naming the file; anything else (a crash, a sanitizer report,
// another exception, a loaded profile that breaks its documented ranges) is a finding.
// Build and run: scripts/fuzz.sh (docs/ROBUSTNESS.md); seeds in fuzz/hardware_fuzz/.
#include <cstdint>
#include <exception>
#include <string>

#include "core/common/error.h"
#include "core/sim/hardware.h"
#include "fuzz/fuzz_util.h"

using ptdp::fuzz::finding;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ptdp::fuzz::scratch_path("fuzz.toml");
  ptdp::fuzz::write_scratch(path, data, size);
  try {
    const ptdp::sim::HardwareProfile hw = ptdp::sim::load_profile(path);
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
    ptdp::fuzz::check_usage_message(e.what(), path);
  } catch (const std::exception& e) {
    finding("unexpected exception", e.what());
  }
  return 0;
}
