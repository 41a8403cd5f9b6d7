// Test helpers for SentencePiece tokenizers: train a small BPE model with spm_train at test time
// (the real LLaMA tokenizer.model is not available here) and encode with spm_encode, the tools of
// Debian's `sentencepiece` package.
#pragma once
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/data/testing/data_test_util.h"
#include "core/data/sentencepiece_tokenizer.h"

namespace ptdp::testing {

// The text the models are trained on and encode.
inline const char* const kGpl3 = "/usr/share/common-licenses/GPL-3";

// The path of executable NAME on PATH, or "".
inline std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  std::string d;
  while (std::getline(dirs, d, ':')) {
    const std::string f = (d.empty() ? std::string(".") : d) + "/" + name;
    if (::access(f.c_str(), X_OK) == 0) return f;
  }
  return "";
}

// Why the SentencePiece tools cannot be used here ("" when they can).
inline std::string spm_tools_missing() {
  if (find_on_path("spm_train").empty() || find_on_path("spm_encode").empty())
    return "spm_train/spm_encode not found (apt-get install sentencepiece, or scripts/setup.sh)";
  if (!std::filesystem::exists(kGpl3)) return std::string(kGpl3) + " not found (Debian's base-files)";
  return "";
}

// Why SentencePiece cannot be tested here, the library or the tools ("" when it can).
inline std::string spm_unavailable() {
  if (!sentencepiece_available()) return "this build has no SentencePiece (libsentencepiece-dev)";
  return spm_tools_missing();
}

// Trains a 512-piece BPE model on GPL-3 into DIR/NAME.model and returns its path.
// llama_like: LLaMA's settings (no normalisation, whitespace kept, byte fallback), so that
// decode(encode(line)) gives every line back exactly; otherwise spm_train's defaults (nmt_nfkc,
// extra whitespace removed). Throws when spm_train fails.
inline std::string train_spm_model(const TempDir& dir, const std::string& name, bool llama_like) {
  const std::string prefix = dir.file(name);
  std::string cmd = find_on_path("spm_train") + " --input=" + kGpl3 + " --model_prefix=" + prefix +
                    " --vocab_size=512 --model_type=bpe";
  if (llama_like) cmd += " --normalization_rule_name=identity --remove_extra_whitespaces=false --byte_fallback=true";
  cmd += " > " + prefix + ".log 2>&1";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("spm_train failed: " + cmd);
  return prefix + ".model";
}

// spm_encode --output_format=id of TEXT_PATH with MODEL, every line's ids in order.
inline std::vector<int32_t> spm_encode_ids(const TempDir& dir, const std::string& model, const std::string& text_path) {
  const std::string out = dir.file("spm_encode.out");
  const std::string cmd =
      find_on_path("spm_encode") + " --model=" + model + " --output_format=id < " + text_path + " > " + out;
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("spm_encode failed: " + cmd);
  std::ifstream in(out);
  std::vector<int32_t> ids;
  for (int64_t id; in >> id;) ids.push_back(static_cast<int32_t>(id));
  return ids;
}

// The lines of a text file, without their '\n'.
inline std::vector<std::string> file_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

}  // namespace ptdp::testing
