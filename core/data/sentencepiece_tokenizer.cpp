#include "core/data/sentencepiece_tokenizer.h"

#include <filesystem>
#include <fstream>

#include "core/common/error.h"
#include "core/common/one_line.h"

#ifdef PTDP_HAVE_SENTENCEPIECE
#include <sentencepiece_processor.h>
#endif

namespace ptdp {
namespace {

#ifdef PTDP_HAVE_SENTENCEPIECE
// A file the model can be read from: it exists, is a regular file, and opens.
void check_model_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::exists(status))
    usage_error("--tokenizer-model {}: cannot open: No such file or directory", path);
  if (!fs::is_regular_file(status)) usage_error("--tokenizer-model {}: not a regular file", path);
  if (!std::ifstream(path, std::ios::binary)) usage_error("--tokenizer-model {}: cannot open for reading", path);
}
#endif

}  // namespace

#ifdef PTDP_HAVE_SENTENCEPIECE

bool sentencepiece_available() { return true; }

struct SentencePieceTokenizer::Impl {
  sentencepiece::SentencePieceProcessor sp;
  std::string file_name;
  SpaceCut cut = SpaceCut::None;
};

namespace {

// Which cut at a space gives the same ids as the whole text, for every probe (None when neither).
Tokenizer::SpaceCut probe_space_cut(const sentencepiece::SentencePieceProcessor& sp) {
  auto ids = [&](const std::string& text) {
    std::vector<int> out;
    return sp.Encode(text, &out).ok() ? out : std::vector<int>{-1};
  };
  bool drop = true, keep = true;
  for (const std::string probe : {"hello world", "ab cd", "the quick brown fox", "1 2", "Program. This"}) {
    const size_t at = probe.find(' ');
    const std::vector<int> whole = ids(probe);
    std::vector<int> a = ids(probe.substr(0, at)), b = a;
    const std::vector<int> dropped = ids(probe.substr(at + 1)), kept = ids(probe.substr(at));
    a.insert(a.end(), dropped.begin(), dropped.end());
    b.insert(b.end(), kept.begin(), kept.end());
    drop = drop && a == whole;
    keep = keep && b == whole;
  }
  return drop ? Tokenizer::SpaceCut::Drop : keep ? Tokenizer::SpaceCut::Keep : Tokenizer::SpaceCut::None;
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_path) : impl_(std::make_unique<Impl>()) {
  check_model_file(model_path);
  const auto st = impl_->sp.Load(model_path);
  if (!st.ok()) {
    // A file that does not parse as a ModelProto (text, random bytes, a truncated model) reports
    // the failed ParseFromArray; one that parses but lacks the required pieces says which.
    const std::string why = st.message();
    if (why.find("ParseFromArray") != std::string::npos)
      usage_error("--tokenizer-model {}: not a SentencePiece model (the file does not parse as one; expected a "
                  ".model file written by spm_train, e.g. LLaMA's tokenizer.model)",
                  model_path);
    usage_error("--tokenizer-model {}: not a usable SentencePiece model (sentencepiece: {})", model_path,
                one_line(why));
  }
  if (impl_->sp.GetPieceSize() <= 0)
    usage_error("--tokenizer-model {}: not a usable SentencePiece model (it has no pieces)", model_path);
  impl_->file_name = std::filesystem::path(model_path).filename().string();
  std::vector<int> probe;
  if (const auto enc = impl_->sp.Encode("hello world", &probe); !enc.ok())
    usage_error("--tokenizer-model {}: not a usable SentencePiece model (it cannot encode 'hello world': {})",
                model_path, one_line(enc.message()));
  impl_->cut = probe_space_cut(impl_->sp);
}

Tokenizer::SpaceCut SentencePieceTokenizer::space_cut() const { return impl_->cut; }

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::string SentencePieceTokenizer::name() const { return "SentencePiece (" + impl_->file_name + ")"; }

int64_t SentencePieceTokenizer::vocab_size() const { return impl_->sp.GetPieceSize(); }

void SentencePieceTokenizer::encode(std::string_view text, std::vector<int32_t>& ids) const {
  std::vector<int> out;
  const auto st = impl_->sp.Encode(text, &out);
  // A model that loads but cannot encode (a damaged piece table) is bad input, named as such.
  if (!st.ok())
    usage_error("--tokenizer-model {}: SentencePiece cannot encode with this model (sentencepiece: {})",
                impl_->file_name, one_line(st.message()));
  ids.insert(ids.end(), out.begin(), out.end());
}

std::string SentencePieceTokenizer::decode(std::span<const int32_t> ids) const {
  const int n = impl_->sp.GetPieceSize();
  for (const int32_t id : ids)
    if (id < 0 || id >= n) usage_error("SentencePiece token {} is outside the vocabulary (0..{})", id, n - 1);
  std::string text;
  const auto st = impl_->sp.Decode(std::vector<int>(ids.begin(), ids.end()), &text);
  if (!st.ok()) throw RuntimeError("SentencePiece failed to decode: " + one_line(st.message()));
  return text;
}

int32_t SentencePieceTokenizer::eod_id() const {
  const int eos = impl_->sp.eos_id();
  return eos >= 0 && eos < impl_->sp.GetPieceSize() ? eos : -1;
}

int32_t SentencePieceTokenizer::bos_id() const {
  const int bos = impl_->sp.bos_id();
  return bos >= 0 && bos < impl_->sp.GetPieceSize() ? bos : -1;
}

#else  // no libsentencepiece in this build

bool sentencepiece_available() { return false; }

struct SentencePieceTokenizer::Impl {};

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_path) {
  usage_error("--tokenizer-model {}: this build has no SentencePiece (install libsentencepiece-dev, "
              "e.g. with scripts/setup.sh, and configure again)",
              model_path);
}
SentencePieceTokenizer::~SentencePieceTokenizer() = default;
std::string SentencePieceTokenizer::name() const { return "SentencePiece"; }
Tokenizer::SpaceCut SentencePieceTokenizer::space_cut() const { return SpaceCut::None; }
int64_t SentencePieceTokenizer::vocab_size() const { return 0; }
void SentencePieceTokenizer::encode(std::string_view, std::vector<int32_t>&) const {}
std::string SentencePieceTokenizer::decode(std::span<const int32_t>) const { return {}; }
int32_t SentencePieceTokenizer::eod_id() const { return -1; }
int32_t SentencePieceTokenizer::bos_id() const { return -1; }

#endif

}  // namespace ptdp
