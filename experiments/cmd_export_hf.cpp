// `ptdp export-hf CHECKPOINT_DIR OUT_DIR`: a checkpoint (any t, p and --zero: its shards gathered
// into one model) as a Hugging Face model folder. The flags are checked here, the tokenizer the
// dataset was made with (preprocess's flags) gives config.json's bos and eos ids, and the mapping
// runs in the Python exporter (scripts/ptdp_checkpoint.py export-hf, docs/PYTORCH.md) under
// $PTDP_PYTHON, else /usr/bin/python3 (Debian's numpy), else python3; its errors are ptdp's.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/common/error.h"
#include "core/common/source_tree.h"
#include "core/data/tokenizer.h"

namespace ptdp {

namespace {

struct ExportFlags {
  std::string checkpoint, out, dtype = "f32";
  int64_t iteration = -1;
  double norm_eps = 0, rope_theta = 0;
  int divisible_by = 0;
  bool no_verify = false;
  TokenizerOptions tokenizer;
};

// The Python that runs the exporter: $PTDP_PYTHON, else Debian's (numpy from python3-numpy),
// else the first python3 on PATH.
std::string exporter_python() {
  if (const char* p = std::getenv("PTDP_PYTHON"); p && *p) return p;
  if (::access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  return "python3";
}

// The exporter's arguments for these flags (the tokenizer's ids, when it has them).
std::vector<std::string> exporter_args(const ExportFlags& f, const std::string& script) {
  std::vector<std::string> a = {exporter_python(), script, "export-hf", f.checkpoint, f.out, "--dtype", f.dtype};
  if (f.iteration >= 0) a.insert(a.end(), {"--iteration", std::to_string(f.iteration)});
  if (f.norm_eps > 0) a.insert(a.end(), {"--norm-epsilon", fmt::format("{}", f.norm_eps)});
  if (f.rope_theta > 0) a.insert(a.end(), {"--rope-theta", fmt::format("{}", f.rope_theta)});
  if (f.divisible_by > 0) a.insert(a.end(), {"--make-vocab-size-divisible-by", std::to_string(f.divisible_by)});
  if (f.no_verify) a.push_back("--no-verify");
  if (tokenizer_kind(f.tokenizer) != TokenizerKind::Bytes) {
    const std::unique_ptr<Tokenizer> t = make_tokenizer(f.tokenizer);
    if (t->bos_id() >= 0) a.insert(a.end(), {"--bos-token-id", std::to_string(t->bos_id())});
    if (t->eod_id() >= 0) a.insert(a.end(), {"--eos-token-id", std::to_string(t->eod_id())});
  }
  return a;
}

int cmd_export_hf(const ExportFlags& f) {
  const std::filesystem::path script = source_tree() / "scripts" / "ptdp_checkpoint.py";
  std::error_code ec;
  if (source_tree().empty() || !std::filesystem::is_regular_file(script, ec))
    throw std::runtime_error(fmt::format("export-hf runs {} from ptdp's source tree, which is not there: run "
                                         "python3 scripts/ptdp_checkpoint.py export-hf from a checkout",
                                         script.string()));
  std::vector<std::string> args = exporter_args(f, script.string());
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  ::setenv("PTDP_EXPORT_PROG", "ptdp", 1);  // the exporter's errors as ptdp's: "ptdp: error: ...", exit 2
  std::fflush(stdout);
  ::execvp(argv[0], argv.data());
  throw std::runtime_error(fmt::format("export-hf: cannot run {}: {} (set PTDP_PYTHON to a Python 3 with numpy)",
                                       args[0], std::strerror(errno)));
}

}  // namespace

std::pair<CLI::App*, std::function<int()>> add_export_hf_command(CLI::App& app) {
  auto f = std::make_shared<ExportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "export-hf", "checkpoint -> Hugging Face model folder (config.json, model.safetensors) that transformers' "
                   "AutoModelForCausalLM loads; a sharded save (t, p > 1, --zero) is gathered into one model");
  cmd->add_option("checkpoint", f->checkpoint, "a --save directory")->required();
  cmd->add_option("out", f->out, "the model folder to write (created; config.json and model.safetensors replaced)")
      ->required();
  cmd->add_option("--iteration", f->iteration, "the iteration to export (default: the latest)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--dtype", f->dtype, "f32 (the master weights as they are), bf16 or f16")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}))
      ->capture_default_str();
  cmd->add_option("--norm-epsilon", f->norm_eps,
                  "the run's norm epsilon, for checkpoints older than format version 7 (which do not record it)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--rope-theta", f->rope_theta, "llama: the run's rotary base, as --norm-epsilon")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--make-vocab-size-divisible-by", f->divisible_by,
                  "the run's vocabulary padding, for checkpoints older than format version 9")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--tokenizer-type", f->tokenizer.type,
                  "the tokenizer the dataset was made with (ptdp preprocess's flags): config.json's bos_token_id and "
                  "eos_token_id are its ids (default: none, written as null)");
  cmd->add_option("--tokenizer-model", f->tokenizer.model, "SentencePiece .model file (its bos and eos)");
  cmd->add_option("--vocab-file", f->tokenizer.vocab_file, "GPT-2's vocab.json (bos = eos = <|endoftext|>)");
  cmd->add_option("--merge-file", f->tokenizer.merge_file, "GPT-2's merges.txt");
  cmd->add_flag("--no-verify", f->no_verify, "skip the shards' checksums (pure Python: about 1 s per 5 MB)");
  return {cmd, [f]() { return cmd_export_hf(*f); }};
}

}  // namespace ptdp
