// GPT-2's tokenizer files, as OpenAI published them and Megatron reads them: vocab.json
// (--vocab-file, a JSON object of token -> id) and merges.txt (--merge-file, one merge "LEFT RIGHT"
// a line). Tokens are byte-level text: each byte is written as one printable character.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace ptdp {

// The character that stands for each byte in GPT-2's tokens, as UTF-8 (bytes_to_unicode of
// OpenAI's encoder.py): '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF stand for their own byte, the
// other 68 bytes in order for U+0100 on (the space is U+0120, 'Ġ').
const std::array<std::string, 256>& gpt2_byte_symbols();

// The tokens of vocab.json by id. UsageError naming "--vocab-file PATH": missing or unreadable;
// not JSON; not an object of string -> integer; an id that is negative or above 2^31 - 2; two
// tokens with one id; ids that do not run 0..N-1 (a gap); no token at all.
std::vector<std::string> read_gpt2_vocab(const std::string& path);

struct Gpt2MergeLine {
  std::string left, right;
  int64_t line = 0;  // 1-based, for messages
};

// The merges of merges.txt in rank order. A first line starting with "#version" is skipped, and
// so are empty lines; every other line is two symbols separated by one space (a final \r is
// dropped). UsageError naming "--merge-file PATH line N": a line that is not two symbols.
std::vector<Gpt2MergeLine> read_gpt2_merges(const std::string& path);

}  // namespace ptdp
