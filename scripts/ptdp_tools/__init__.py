"""ptdp's Python tools: the code behind the commands in scripts/*.py and plots/*.py.

Each command there is a thin entry point that calls the `main` of one module here. Modules by
concern, bottom up: a module imports those listed above it and the modules of its own folder, the
standard library, and third-party libraries only where they are used (so that every module
imports without them):

  repo              the repository's root folder and git sha (provenance)
  schema            the result CSV's columns and configuration key, and every configuration
                    field (results/fields.json, from `ptdp fields --json`)
  atomic            files written whole or not at all (temporary file, fsync, rename)
  cli               argument parsers whose errors are one line and exit code 2
  tables            rows of dicts as CSV text
  data              Megatron .bin/.idx datasets and ptdp's sample order
  checkpoint/       the checkpoint shard reader, the parameter layout, the Hugging Face export
                    and the `ptdp_checkpoint.py` command
  compare_pytorch/  ptdp against the same models in PyTorch (`compare_pytorch.py`)
  gbench_to_csv     Google Benchmark JSON as CSV
  gpu_summary       a GPU session's summary (`gpu_session.sh`)
  fatbin            a library's CUDA device code listed and cut to one architecture
                    (`nccl_for_device.sh`)
  nccl_versions     the version of each NCCL library found (`gpu_session.sh`'s probe)
  calibrate         a hardware profile's GEMM curve fitted to benchmark results
  doc_test/         the documents' checks (`doc_test.py`, ctest Docs.*)
  plots/            the paper's figures, the throughput history and its change points, loss curves
  fixtures/         generators of the test fixtures (Megatron's sample order, GPT-2 BPE, histories)

package_test.py checks the import graph (no cycle, nothing imported from below in this list) and
that every entry point only calls its module's main.
"""
