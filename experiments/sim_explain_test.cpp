// `ptdp simulate --explain`: the cost model's kernel list, each item with its time, printed after
// the per-layer lines, whose totals it repeats; the rest of the output stays as without it.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "experiments/testing/cli_runner.h"

namespace ptdp {
namespace {

using testing::CliResult;
using testing::lines_of;
using testing::run_ptdp;
using testing::TempDir;
using Args = std::vector<std::string>;

const Args kGpt3 = {"simulate", "--model", "gpt3-175b", "--tp", "8", "--pp", "12", "--dp", "8", "--global-batch",
                    "1536", "--recompute", "full", "--hardware", "a100-selene"};

// The text after `key` on the line that holds it.
std::string after(const std::string& text, const std::string& key) {
  for (const std::string& line : lines_of(text))
    if (const size_t at = line.find(key); at != std::string::npos) return line.substr(at + key.size());
  ADD_FAILURE() << "no line with '" << key << "' in\n" << text;
  return "";
}

TEST(SimExplain, ListsEveryKernelAndRepeatsThePassTotals) {
  TempDir dir;
  for (const char* stack : {"megatron-2021", "mcore", "ptdp"}) {
    Args plain = kGpt3;
    plain.insert(plain.end(), {"--stack", stack});
    Args explain = plain;
    explain.push_back("--explain");
    const CliResult p = run_ptdp(dir, plain), e = run_ptdp(dir, explain);
    ASSERT_EQ(p.exit_code, 0) << p.err;
    ASSERT_EQ(e.exit_code, 0) << e.err;
    // Without the list, the output is the plain run's, line for line.
    std::string rest;
    int kernels = 0;
    for (const std::string& line : lines_of(e.out)) {
      if (line.starts_with("    ") && line[4] != ' ') ++kernels;  // a kernel or a total, indented by 4
      else if (!line.starts_with("  kernels of one micro-batch")) rest += line + "\n";
    }
    EXPECT_EQ(rest, p.out) << stack;
    EXPECT_GT(kernels, 40) << stack;
    // The list's totals are the per-layer lines above it.
    EXPECT_EQ(after(e.out, "    layer forward: "), after(p.out, "one micro-batch, ms: forward ")) << stack;
    EXPECT_EQ(after(e.out, "    layer recompute: "), after(p.out, "  recompute ")) << stack;
    EXPECT_EQ(after(e.out, "    layer backward: "), after(p.out, "  backward ")) << stack;
    EXPECT_NE(e.out.find("output layer forward: "), std::string::npos) << stack;
  }
}

TEST(SimExplain, ThePtdpStackNamesTheBackendOpOfEachKernel) {
  TempDir dir;
  Args args = kGpt3;
  args.insert(args.end(), {"--stack", "ptdp", "--explain"});
  const CliResult r = run_ptdp(dir, args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* op : {"[layernorm_forward]", "[linear_forward]", "[attention_forward]", "[add_]",
                         "[linear_gelu_forward]", "[linear_backward]", "[linear_gelu_backward]", "[attention_backward]",
                         "[layernorm_backward]", "[add_layernorm_forward]"})
    EXPECT_NE(r.out.find(op), std::string::npos) << op << " in\n" << r.out;
  EXPECT_NE(r.out.find("all-reduce of 50.33 MB"), std::string::npos) << r.out;  // b s h fp16 over t = 8
  EXPECT_EQ(r.out.find("gelu again"), std::string::npos) << r.out;
  // --recompute-activation: the GeLU's output rebuilt at the start of the layer's backward, its pass
  // reading fc's output and writing the activation (b s 4h/t each).
  std::replace(args.begin(), args.end(), std::string("full"), std::string("selective"));  // full refuses it
  args.push_back("--recompute-activation");
  const CliResult again = run_ptdp(dir, args);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("backward  fc                         gelu again"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("[gelu_forward]"), std::string::npos) << again.out;
}

}  // namespace
}  // namespace ptdp
