#include "core/data/gpt2_bpe_tokenizer.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <functional>
#include <mutex>
#include <unordered_map>

#include "core/common/error.h"
#include "core/common/one_line.h"
#include "core/common/utf8.h"
#include "core/data/gpt2_bpe_files.h"
#include "core/data/gpt2_pretokenizer.h"

namespace ptdp {
namespace {

constexpr std::string_view kGpt2Eod = "<|endoftext|>";
constexpr size_t kGpt2CachedPieceBytes = 64;        // longer pieces are encoded each time
constexpr size_t kGpt2CacheEntries = size_t(1) << 18;  // then the cache starts over

struct Gpt2Merge {
  int32_t rank, result;
};

uint64_t gpt2_pair(int32_t left, int32_t right) { return uint64_t(uint32_t(left)) << 32 | uint32_t(right); }

struct Gpt2PieceHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// The bytes a token stands for, or false when one of its characters is not a GPT-2 byte character.
bool gpt2_token_bytes(std::string_view token, const std::unordered_map<std::string, int>& byte_of, std::string& out) {
  out.clear();
  while (!token.empty()) {
    const size_t n = utf8_sequence_length(token);
    if (n == 0) return false;
    const auto it = byte_of.find(std::string(token.substr(0, n)));
    if (it == byte_of.end()) return false;
    out.push_back(char(it->second));
    token.remove_prefix(n);
  }
  return true;
}

}  // namespace

struct Gpt2BpeTokenizer::Impl {
  Gpt2Pretokenizer pre;
  std::string name;
  std::vector<std::string> bytes;  // of each id
  std::vector<bool> byte_text;     // whether the id's token is GPT-2 byte characters
  std::vector<std::string> tokens;
  std::array<int32_t, 256> byte_ids{};
  std::unordered_map<uint64_t, Gpt2Merge> merges;
  int32_t eod = -1;

  // Encoding state, under `mu`.
  std::mutex mu;
  std::unordered_map<std::string, std::vector<int32_t>, Gpt2PieceHash, std::equal_to<>> cache;
  std::vector<size_t> ends;
  std::vector<int32_t> sym, next, prev, round, word;
  std::vector<std::pair<int32_t, int32_t>> heap;  // (rank, position): a min-heap

  size_t encode(std::string_view text, bool head_only, std::vector<int32_t>& ids);
  void encode_piece(std::string_view piece, std::vector<int32_t>& ids);
  void bpe(std::string_view piece, std::vector<int32_t>& ids);
  const Gpt2Merge* merge_of(int32_t left, int32_t right) const {
    const auto it = merges.find(gpt2_pair(left, right));
    return it == merges.end() ? nullptr : &it->second;
  }
};

Gpt2BpeTokenizer::Gpt2BpeTokenizer(const std::string& vocab_file, const std::string& merge_file) {
  if (!gpt2_bpe_available())
    usage_error("--tokenizer-type GPT2BPETokenizer: this build has no PCRE2 (libpcre2-dev), which GPT-2's "
                "pre-tokenizer needs; install it (e.g. with scripts/setup.sh) and configure again");
  impl_ = std::make_unique<Impl>();
  Impl& m = *impl_;
  m.tokens = read_gpt2_vocab(vocab_file);
  const std::vector<Gpt2MergeLine> merges = read_gpt2_merges(merge_file);
  namespace fs = std::filesystem;
  m.name = "GPT-2 BPE (" + fs::path(vocab_file).filename().string() + ", " + fs::path(merge_file).filename().string() +
           ")";

  std::unordered_map<std::string, int32_t> id_of;
  id_of.reserve(m.tokens.size());
  for (size_t id = 0; id < m.tokens.size(); ++id) id_of.emplace(m.tokens[id], int32_t(id));
  std::unordered_map<std::string, int> byte_of;
  for (int b = 0; b < 256; ++b) {
    const std::string& symbol = gpt2_byte_symbols()[size_t(b)];
    byte_of.emplace(symbol, b);
    const auto it = id_of.find(symbol);
    if (it == id_of.end())
      usage_error("--vocab-file {}: no token for byte 0x{:02x} ('{}'); GPT-2's byte-level vocabulary has one for each "
                  "of the 256 bytes",
                  vocab_file, b, one_line(symbol));
    m.byte_ids[size_t(b)] = it->second;
  }
  m.bytes.resize(m.tokens.size());
  m.byte_text.resize(m.tokens.size());
  for (size_t id = 0; id < m.tokens.size(); ++id)
    m.byte_text[id] = gpt2_token_bytes(m.tokens[id], byte_of, m.bytes[id]);

  m.merges.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const Gpt2MergeLine& g = merges[rank];
    const auto left = id_of.find(g.left), right = id_of.find(g.right), joined = id_of.find(g.left + g.right);
    for (const auto& [it, symbol] : {std::pair{left, &g.left}, std::pair{right, &g.right}})
      if (it == id_of.end())
        usage_error("--merge-file {} line {}: symbol '{}' of '{} {}' is not a token of --vocab-file {}", merge_file,
                    g.line, one_line(*symbol), one_line(g.left), one_line(g.right), vocab_file);
    if (joined == id_of.end())
      usage_error("--merge-file {} line {}: '{} {}' makes '{}', which is not a token of --vocab-file {}", merge_file,
                  g.line, one_line(g.left), one_line(g.right), one_line(g.left + g.right), vocab_file);
    m.merges[gpt2_pair(left->second, right->second)] = {int32_t(rank), joined->second};
  }
  if (const auto it = id_of.find(std::string(kGpt2Eod)); it != id_of.end()) m.eod = it->second;
}

Gpt2BpeTokenizer::~Gpt2BpeTokenizer() = default;

std::string Gpt2BpeTokenizer::name() const { return impl_->name; }

int64_t Gpt2BpeTokenizer::vocab_size() const { return int64_t(impl_->tokens.size()); }

int32_t Gpt2BpeTokenizer::eod_id() const { return impl_->eod; }

void Gpt2BpeTokenizer::encode(std::string_view text, std::vector<int32_t>& ids) const {
  if (first_invalid_utf8(text) != std::string_view::npos) {
    impl_->encode(replace_invalid_utf8(text), false, ids);
    return;
  }
  impl_->encode(text, false, ids);
}

size_t Gpt2BpeTokenizer::encode_head(std::string_view text, std::vector<int32_t>& ids) const {
  text.remove_suffix(utf8_cut_tail(text));  // a character cut by the end waits for the next call
  if (first_invalid_utf8(text) == std::string_view::npos) return impl_->encode(text, true, ids);
  // Encoded as encode() does, with U+FFFD; the head's length is mapped back to the bytes given.
  std::string fixed;
  std::vector<std::pair<size_t, size_t>> after;  // (offset in fixed, offset in text) after each U+FFFD
  for (size_t at = 0;;) {
    const size_t bad = first_invalid_utf8(text.substr(at));
    if (bad == std::string_view::npos) {
      fixed.append(text.substr(at));
      break;
    }
    fixed.append(text.substr(at, bad)).append(kUtf8Replacement);
    at += bad + utf8_maximal_subpart(text.substr(at + bad));
    after.emplace_back(fixed.size(), at);
  }
  const size_t head = impl_->encode(fixed, true, ids);
  size_t mapped = head;
  for (const auto& [f, t] : after)
    if (f <= head) mapped = t + (head - f);
  return mapped;
}

std::string Gpt2BpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  for (const int32_t id : ids) {
    if (id < 0 || id >= vocab_size())
      usage_error("GPT-2 BPE token {} is outside the vocabulary (0..{})", id, vocab_size() - 1);
    if (!impl_->byte_text[size_t(id)])
      usage_error("GPT-2 BPE token {} ('{}') is not written in GPT-2's byte characters: it has no bytes to decode to",
                  id, one_line(impl_->tokens[size_t(id)]));
    text += impl_->bytes[size_t(id)];
  }
  return text;
}

size_t Gpt2BpeTokenizer::Impl::encode(std::string_view text, bool head_only, std::vector<int32_t>& ids) {
  const std::lock_guard<std::mutex> lock(mu);
  ends.clear();
  pre.split(text, ends);
  const size_t stop = head_only ? gpt2_stable_head(text, ends) : text.size();
  size_t begin = 0;
  for (const size_t end : ends) {
    if (end > stop) break;
    encode_piece(text.substr(begin, end - begin), ids);
    begin = end;
  }
  return stop;
}

void Gpt2BpeTokenizer::Impl::encode_piece(std::string_view piece, std::vector<int32_t>& ids) {
  if (piece.size() == 1) {
    ids.push_back(byte_ids[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (piece.size() > kGpt2CachedPieceBytes) {
    bpe(piece, ids);
    return;
  }
  if (const auto it = cache.find(piece); it != cache.end()) {
    ids.insert(ids.end(), it->second.begin(), it->second.end());
    return;
  }
  word.clear();
  bpe(piece, word);
  ids.insert(ids.end(), word.begin(), word.end());
  if (cache.size() >= kGpt2CacheEntries) cache.clear();
  cache.emplace(std::string(piece), word);
}

// The symbols of the piece (its bytes' tokens) in a linked list by position; the merge of lowest
// rank among adjacent pairs joins each of its occurrences from left to right (a symbol joined
// into its left neighbour is gone), as encoder.py's loop does, in rounds of one rank taken from a
// heap of (rank, position): a long piece costs n log n, not n^2. A join makes new pairs with its
// neighbours, never one of the same rank (the joined symbol is longer than either half).
void Gpt2BpeTokenizer::Impl::bpe(std::string_view piece, std::vector<int32_t>& ids) {
  const auto n = int32_t(piece.size());
  sym.resize(size_t(n));
  next.resize(size_t(n));
  prev.resize(size_t(n));
  heap.clear();
  for (int32_t i = 0; i < n; ++i) {
    sym[size_t(i)] = byte_ids[static_cast<unsigned char>(piece[size_t(i)])];
    next[size_t(i)] = i + 1;
    prev[size_t(i)] = i - 1;
  }
  const auto pair_at = [&](int32_t pos) -> const Gpt2Merge* {
    const int32_t q = next[size_t(pos)];
    return q < n ? merge_of(sym[size_t(pos)], sym[size_t(q)]) : nullptr;
  };
  const auto push = [&](int32_t pos) {
    if (const Gpt2Merge* m = pair_at(pos)) {
      heap.emplace_back(m->rank, pos);
      std::push_heap(heap.begin(), heap.end(), std::greater<>{});
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const int32_t rank = heap.front().first;
    round.clear();
    while (!heap.empty() && heap.front().first == rank) {
      round.push_back(heap.front().second);  // in increasing position
      std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
      heap.pop_back();
    }
    for (const int32_t pos : round) {
      if (sym[size_t(pos)] < 0) continue;  // joined into its left neighbour in this round
      const Gpt2Merge* m = pair_at(pos);
      if (m == nullptr || m->rank != rank) continue;  // the pair changed since it was pushed
      const int32_t q = next[size_t(pos)];
      sym[size_t(pos)] = m->result;
      sym[size_t(q)] = -1;
      next[size_t(pos)] = next[size_t(q)];
      if (next[size_t(q)] < n) prev[size_t(next[size_t(q)])] = pos;
      if (prev[size_t(pos)] >= 0) push(prev[size_t(pos)]);
      push(pos);
    }
  }
  for (int32_t i = 0; i < n; i = next[size_t(i)]) ids.push_back(sym[size_t(i)]);
}

}  // namespace ptdp
