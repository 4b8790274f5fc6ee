//===- device_shim_test.cpp - the cpu shim converts as the runtime does ---===//
//
// Generated kernels on the cpu target convert through the CUDA-named
// functions of runtime/device/mpc_device.h; the runtime converts inputs,
// parameters and checkpoints through runtime/half.h. Both must round the
// same way, or a value would change between a checkpoint and a kernel.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/mpc_device.h"
#include "runtime/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

uint32_t bitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float fromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

/// Every 16-bit pattern widens to the same f32, NaNs included bit for bit.
TEST(DeviceShim, WideningMatchesRuntimeForEveryPattern) {
  for (uint32_t pattern = 0; pattern <= 0xffffu; ++pattern) {
    uint16_t bits = static_cast<uint16_t>(pattern);
    __half h{bits};
    __nv_bfloat16 b{bits};
    ASSERT_EQ(bitsOf(__half2float(h)), bitsOf(mpc_f16_bits_to_f32(bits)))
        << "f16 pattern " << pattern;
    ASSERT_EQ(bitsOf(__bfloat162float(b)), bitsOf(mpc_bf16_bits_to_f32(bits)))
        << "bf16 pattern " << pattern;
  }
}

/// Narrowing agrees on a sweep through every exponent with mantissas that
/// sit on, just below, just above and exactly halfway between 16-bit
/// neighbours, plus the special values.
TEST(DeviceShim, NarrowingMatchesRuntime) {
  int checked = 0;
  for (uint32_t sign = 0; sign < 2; ++sign)
    for (uint32_t exponent = 0; exponent < 256; ++exponent)
      for (uint32_t low : {0x0000u, 0x0001u, 0x0fffu, 0x1000u, 0x1001u,
                           0x7fffu, 0x8000u, 0x8001u, 0xffffu})
        for (uint32_t high : {0x000u, 0x001u, 0x3ffu, 0x400u, 0x7ffu}) {
          uint32_t mantissa = ((high << 13) | (low & 0x1fffu)) & 0x7fffffu;
          uint32_t bf16Mantissa = ((high << 16) | low) & 0x7fffffu;
          for (uint32_t m : {mantissa, bf16Mantissa}) {
            float value = fromBits((sign << 31) | (exponent << 23) | m);
            ASSERT_EQ(__float2half_rn(value).bits, mpc_f32_to_f16_bits(value))
                << "f16 of " << value;
            ASSERT_EQ(__float2bfloat16_rn(value).bits,
                      mpc_f32_to_bf16_bits(value))
                << "bf16 of " << value;
            ++checked;
          }
        }
  EXPECT_GT(checked, 40000);
}

TEST(DeviceShim, TrickyValues) {
  // Largest finite f16; halfway to the next binade rounds to inf.
  EXPECT_EQ(__float2half_rn(65504.0f).bits, 0x7bffu);
  EXPECT_EQ(__float2half_rn(65520.0f).bits, 0x7c00u);
  EXPECT_EQ(__float2half_rn(65519.99f).bits, 0x7bffu);
  // Smallest subnormal; 1e-8 underflows to zero.
  EXPECT_EQ(__float2half_rn(5.9604645e-8f).bits, 0x0001u);
  EXPECT_EQ(__float2half_rn(1e-8f).bits, 0x0000u);
  EXPECT_EQ(__float2half_rn(-0.0f).bits, 0x8000u);
  // bf16: ties to even, and NaN stays a NaN.
  EXPECT_EQ(__float2bfloat16_rn(fromBits(0x3f808000u)).bits, 0x3f80u);
  EXPECT_EQ(__float2bfloat16_rn(fromBits(0x3f818000u)).bits, 0x3f82u);
  EXPECT_TRUE(std::isnan(__bfloat162float(__float2bfloat16_rn(NAN))));
}

} // namespace

/// mpc_sum::add_run is one `+=` after another, bit for bit, whatever the
/// run's length and wherever in the cascade's blocks of 8 it starts: runs
/// of every length to 200 after a first run of every length to 20, over
/// values of mixed magnitude and sign (so that the order shows), and with
/// a NaN, an infinity and a sum that starts from a value.
TEST(DeviceShim, SumRunsGiveTheBitsOfOneAddAfterAnother) {
  std::vector<float> values(420);
  uint32_t state = 12345u;
  for (float &value : values) {
    state = state * 1664525u + 1013904223u;
    value = std::ldexp(static_cast<float>(static_cast<int32_t>(state) >> 8),
                       static_cast<int>(state % 40u) - 40);
  }
  auto term = [&](long long i) { return values[static_cast<size_t>(i)]; };
  for (long long first = 0; first <= 20; ++first)
    for (long long second = 0; second <= 200; ++second) {
      mpc_sum one = 0.0f, runs = 0.0f;
      for (long long i = 0; i < first + second; ++i)
        one += term(i);
      runs.add_run(first, term);
      runs.add_run(second, [&](long long i) { return term(first + i); });
      ASSERT_EQ(bitsOf(static_cast<float>(one)),
                bitsOf(static_cast<float>(runs)))
          << first << " then " << second;
    }
  for (float special : {NAN, INFINITY}) {
    std::vector<float> with = values;
    with[130] = special;
    mpc_sum one = 1.5f, run = 1.5f;
    for (float value : with)
      one += value;
    run.add_run(static_cast<long long>(with.size()), [&](long long i) {
      return with[static_cast<size_t>(i)];
    });
    EXPECT_EQ(bitsOf(static_cast<float>(one)), bitsOf(static_cast<float>(run)));
  }
}
