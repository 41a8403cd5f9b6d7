#include "core/data/gpt2_bpe_files.h"

#include <nlohmann/json.hpp>

#include <limits>
#include <sstream>

#include "core/common/error.h"
#include "core/common/one_line.h"
#include "core/common/regular_file.h"
#include "core/common/utf8.h"

namespace ptdp {
namespace {

bool gpt2_stands_for_itself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

const char* gpt2_json_kind(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::boolean: return "a boolean";
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::number_float: return "a number that is not an integer";
    default: return "a number";
  }
}

}  // namespace

const std::array<std::string, 256>& gpt2_byte_symbols() {
  static const std::array<std::string, 256> symbols = [] {
    std::array<std::string, 256> s;
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) append_utf8(s[size_t(b)], gpt2_stands_for_itself(b) ? char32_t(b) : next++);
    return s;
  }();
  return symbols;
}

std::vector<std::string> read_gpt2_vocab(const std::string& path) {
  const std::string text = read_regular_file(path, "--vocab-file");
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    usage_error("--vocab-file {}: not JSON (at byte {}); expected GPT-2's vocab.json, an object of token -> id", path,
                e.byte);
  }
  if (!vocab.is_object())
    usage_error("--vocab-file {}: {} is not a JSON object of token -> id (GPT-2's vocab.json)", path,
                gpt2_json_kind(vocab));
  if (vocab.empty()) usage_error("--vocab-file {}: the object has no token", path);
  constexpr int64_t kMaxId = std::numeric_limits<int32_t>::max() - 1;
  std::vector<std::string> tokens(vocab.size());
  std::vector<bool> seen(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer())
      usage_error("--vocab-file {}: token '{}' has {} as its id; ids are integers", path, one_line(token),
                  gpt2_json_kind(id));
    const int64_t v = id.is_number_unsigned() && id.get<uint64_t>() > uint64_t(kMaxId) ? kMaxId + 1 : id.get<int64_t>();
    if (v < 0 || v > kMaxId)
      usage_error("--vocab-file {}: token '{}' has id {}; ids run from 0 to at most {}", path, one_line(token),
                  id.dump(), kMaxId);
    if (size_t(v) >= vocab.size())
      usage_error("--vocab-file {}: token '{}' has id {}, but {} tokens have ids 0..{} (ids must run 0..N-1 without a "
                  "gap)",
                  path, one_line(token), v, vocab.size(), vocab.size() - 1);
    if (seen[size_t(v)])
      usage_error("--vocab-file {}: tokens '{}' and '{}' both have id {}", path, one_line(tokens[size_t(v)]),
                  one_line(token), v);
    seen[size_t(v)] = true;
    tokens[size_t(v)] = token;
  }
  return tokens;
}

std::vector<Gpt2MergeLine> read_gpt2_merges(const std::string& path) {
  const std::string text = read_regular_file(path, "--merge-file");
  std::vector<Gpt2MergeLine> merges;
  std::istringstream in(text);
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if ((n == 1 && line.rfind("#version", 0) == 0) || line.empty()) continue;
    const size_t space = line.find(' ');
    if (space == 0 || space == std::string::npos || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string::npos)
      usage_error("--merge-file {} line {}: '{}' is not a merge (two symbols separated by one space, as in GPT-2's "
                  "merges.txt)",
                  path, n, one_line(line));
    merges.push_back({line.substr(0, space), line.substr(space + 1), n});
  }
  return merges;
}

}  // namespace ptdp
