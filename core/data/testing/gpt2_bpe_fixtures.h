// Reads the fixtures that scripts/gpt2_bpe_fixtures.py writes into core/data/testdata/gpt2_bpe/:
// a small GPT-2 vocabulary (vocab.json, merges.txt), test texts with the ids transformers gives
// for them (expected.txt), and a document of those texts (text.txt).
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/data/gpt2_pretokenizer.h"
#include "core/data/testing/fixture_records.h"

namespace ptdp::testing {

inline std::string gpt2_fixture(const std::string& name) {
  return std::string(PTDP_SOURCE_DIR) + "/core/data/testdata/gpt2_bpe/" + name;
}

// Why the GPT-2 tests cannot run in this build ("" when they can).
inline std::string gpt2_unavailable() {
  return gpt2_bpe_available() ? "" : "this build has no PCRE2 (libpcre2-dev): GPT-2 BPE is refused";
}

struct Gpt2Case {
  std::string name, text;      // text: the bytes given to the tokenizer
  std::vector<int32_t> ids;    // what ptdp must give
  std::vector<int32_t> transformers;  // GPT2Tokenizer.encode's ids where they differ, else empty
};

struct Gpt2Fixtures {
  std::vector<Gpt2Case> cases;  // by name
  int64_t vocab_size = 0;
  int32_t eod = -1;
  std::vector<int32_t> document_ids;  // of text.txt

  const Gpt2Case& at(const std::string& name) const {
    for (const Gpt2Case& c : cases)
      if (c.name == name) return c;
    throw std::runtime_error("no GPT-2 fixture case " + name);
  }
};

inline Gpt2Fixtures read_gpt2_fixtures() {
  const FixtureRecords records = FixtureRecords::at_path(gpt2_fixture("expected.txt"));
  const auto ids = [&](const std::string& key) {
    const std::vector<int64_t> v = records.ints(key);
    return std::vector<int32_t>(v.begin(), v.end());
  };
  Gpt2Fixtures f;
  f.vocab_size = records.scalar("vocab_size");
  f.eod = int32_t(records.scalar("eod"));
  f.document_ids = ids("text.txt.ids");
  for (const std::string& key : records.keys_with_prefix("")) {
    if (!key.ends_with(".text")) continue;
    const std::string name = key.substr(0, key.size() - 5), hex = records.strings(key).at(0);
    Gpt2Case c{name, "", ids(name + ".ids"), {}};
    for (size_t i = 0; i + 1 < hex.size(); i += 2)
      c.text.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    if (records.has(name + ".transformers")) c.transformers = ids(name + ".transformers");
    f.cases.push_back(std::move(c));
  }
  return f;
}

}  // namespace ptdp::testing
