// DType conversions (round to nearest even, specials), tensor views and the caching allocator.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/tensor/allocator.h"
#include "core/tensor/tensor.h"

namespace ptdp {
namespace {

TEST(DTypeConversion, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f).bits, 0x3F80);
  // 1 + 2^-8 lies exactly between two bf16 values (1 and 1 + 2^-7): ties go to the even one.
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(bf16_to_float(float_to_bf16(-2.5f)), -2.5f);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(bf16_to_float(float_to_bf16(std::numeric_limits<float>::infinity()))));
}

TEST(DTypeConversion, F16RoundTripsAndHandlesRangeEnds) {
  for (float v : {0.0f, 1.0f, -1.5f, 65504.0f, 0.000061035156f /* 2^-14, smallest normal */})
    EXPECT_EQ(f16_to_float(float_to_f16(v)), v) << v;
  EXPECT_EQ(f16_to_float(float_to_f16(std::ldexp(1.0f, -24))), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_float(float_to_f16(std::ldexp(1.0f, -26))), 0.0f);                    // underflows
  EXPECT_TRUE(std::isinf(f16_to_float(float_to_f16(70000.0f))));                          // overflows
  EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(std::numeric_limits<float>::quiet_NaN()))));
  // 1 + 2^-11 is half-way between 1 and 1 + 2^-10: ties to even.
  EXPECT_EQ(f16_to_float(float_to_f16(1.0f + std::ldexp(1.0f, -11))), 1.0f);
  EXPECT_EQ(f16_to_float(float_to_f16(1.0f + 3 * std::ldexp(1.0f, -11))), 1.0f + std::ldexp(1.0f, -9));
}

TEST(DTypeConversion, ParseNamesTheFlagOnBadInput) {
  EXPECT_EQ(parse_dtype("bf16", "--precision"), DType::BF16);
  try {
    parse_dtype("f8", "--precision");
    FAIL() << "f8 was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--precision 'f8'"), std::string::npos) << e.what();
  }
}

TEST(Tensor, ViewsShareStorageAndCopyConverts) {
  Tensor t = Tensor::zeros({4, 3}, DType::F32);
  Tensor row = t.slice_rows(1, 3);
  EXPECT_EQ(row.shape(), (Shape{2, 3}));
  row.data<float>()[0] = 7.0f;
  EXPECT_EQ(t.data<float>()[3], 7.0f);
  Tensor h = Tensor::empty({4, 3}, DType::BF16);
  h.copy_from(t);
  Tensor back = Tensor::empty({12}, DType::F64);
  back.copy_from(h);
  EXPECT_EQ(back.data<double>()[3], 7.0);
  EXPECT_THROW(t.view(10, {3}), RuntimeError);
  EXPECT_THROW(t.data<double>(), RuntimeError);
}

TEST(CachingHostAllocator, ReusesFreedBlocksAndTracksThePeak) {
  CachingHostAllocator a;
  void* p = a.allocate(1000);
  EXPECT_EQ(a.bytes_in_use(), 1024u);
  a.deallocate(p, 1000);
  EXPECT_EQ(a.bytes_in_use(), 0u);
  void* q = a.allocate(1000);
  EXPECT_EQ(q, p);  // the cached block comes back
  void* r = a.allocate(5000);
  EXPECT_EQ(a.peak_bytes_in_use(), 1024u + 5120u);
  a.deallocate(q, 1000);
  a.deallocate(r, 5000);
  a.reset_peak();
  EXPECT_EQ(a.peak_bytes_in_use(), 0u);
}

}  // namespace
}  // namespace ptdp
