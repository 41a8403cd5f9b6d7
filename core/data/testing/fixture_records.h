// Reads the fixture text files scripts/megatron_fixtures.py writes into
// core/data/testdata/megatron/ (and scripts/gpt2_bpe_fixtures.py into core/data/testdata/gpt2_bpe/):
// one record a line, "NAME v0 v1 ...", '#' lines are comments.
#pragma once
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace ptdp::testing {

inline std::string megatron_fixture_path(const std::string& name) {
  return std::string(PTDP_SOURCE_DIR) + "/core/data/testdata/megatron/" + name;
}

class FixtureRecords {
 public:
  // The records of core/data/testdata/megatron/NAME.
  explicit FixtureRecords(const std::string& name) : FixtureRecords(megatron_fixture_path(name), 0) {}
  // The records of the file at `path`.
  static FixtureRecords at_path(const std::string& path) { return FixtureRecords(path, 0); }

  bool has(const std::string& key) const { return records_.count(key) != 0; }
  const std::vector<std::string>& strings(const std::string& key) const {
    auto it = records_.find(key);
    if (it == records_.end()) throw std::runtime_error(path_ + ": no record " + key);
    return it->second;
  }
  std::vector<int64_t> ints(const std::string& key) const {
    std::vector<int64_t> out;
    for (const auto& s : strings(key)) out.push_back(static_cast<int64_t>(std::stoull(s[0] == '-' ? s.substr(1) : s)) * (s[0] == '-' ? -1 : 1));
    return out;
  }
  std::vector<uint64_t> uints(const std::string& key) const {
    std::vector<uint64_t> out;
    for (const auto& s : strings(key)) out.push_back(std::stoull(s));
    return out;
  }
  std::vector<double> doubles(const std::string& key) const {
    std::vector<double> out;
    for (const auto& s : strings(key)) out.push_back(std::stod(s));
    return out;
  }
  int64_t scalar(const std::string& key) const { return ints(key).at(0); }
  std::vector<std::string> keys_with_prefix(const std::string& prefix) const {
    std::vector<std::string> out;
    for (const auto& [k, v] : records_)
      if (k.rfind(prefix, 0) == 0) out.push_back(k);
    return out;
  }

 private:
  FixtureRecords(const std::string& path, int) : path_(path) {
    std::ifstream in(path_);
    if (!in) throw std::runtime_error("cannot open fixture " + path_);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream fields(line);
      std::string key, v;
      fields >> key;
      auto& values = records_[key];
      while (fields >> v) values.push_back(v);
    }
  }

  std::string path_;
  std::map<std::string, std::vector<std::string>> records_;
};

}  // namespace ptdp::testing
