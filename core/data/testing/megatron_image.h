// Test helper: a Megatron MMIDIDX dataset image (.idx and .bin bytes) built by hand from
// the spec, field by field, so tests can pin the format and corrupt any field.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/data/testing/data_test_util.h"

namespace ptdp::testing {

struct Image {
  std::string magic = std::string("MMIDIDX\0\0", 9);
  uint64_t version = 1;
  uint8_t code = 8;  // uint16
  std::vector<int32_t> lengths{3, 1, 2};
  std::vector<int64_t> pointers{0, 6, 8};
  std::vector<int64_t> docs{0, 2, 3};  // document 0 = sequences 0,1; document 1 = sequence 2
  std::vector<uint16_t> tokens{10, 11, 12, 500, 65535, 0};

  std::vector<uint8_t> idx() const {
    Bytes b;
    b.raw(magic.data(), magic.size()).put(version).put(code);
    b.put<uint64_t>(lengths.size()).put<uint64_t>(docs.size());
    for (auto v : lengths) b.put(v);
    for (auto v : pointers) b.put(v);
    for (auto v : docs) b.put(v);
    return b.data;
  }
  std::vector<uint8_t> bin() const {
    Bytes b;
    for (auto t : tokens) b.put(t);
    return b.data;
  }
  std::string write(const TempDir& dir) const {
    const std::string prefix = dir.file("ds");
    write_file(prefix + ".idx", idx());
    write_file(prefix + ".bin", bin());
    return prefix;
  }
};


}  // namespace ptdp::testing
