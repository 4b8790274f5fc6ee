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

namespace {

/// f32 values across bf16's range: normal and subnormal, both signs, with
/// every kind of low half (zero, one, a half, all ones).
std::vector<uint32_t> roundingInputs() {
  std::vector<uint32_t> inputs;
  for (uint32_t high : {0x0000u, 0x0001u, 0x007fu, 0x0080u, 0x3f80u, 0x3f81u,
                        0x3fffu, 0x4049u, 0x7f7eu, 0x7f7fu})
    for (uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xfffeu,
                         0xffffu, 0x1234u})
      for (uint32_t sign : {0u, 0x80000000u})
        inputs.push_back(sign | (high << 16) | low);
  return inputs;
}

} // namespace

/// Over all 2^16 random values, v rounds to the bf16 away from zero exactly
/// (low 16 bits) times and to the one towards zero otherwise: the rounded
/// value is v in expectation, exactly.
TEST(StochasticRounding, RoundsAwayWithTheProbabilityOfTheDistance) {
  for (uint32_t bits : roundingInputs()) {
    float value = fromBits(bits);
    uint16_t towards = static_cast<uint16_t>(bits >> 16);
    uint16_t away = static_cast<uint16_t>(towards + 1);
    uint32_t awayCount = 0;
    double sum = 0;
    for (uint32_t random = 0; random <= 0xffffu; ++random) {
      __nv_bfloat16 rounded;
      mpc_store_stochastic(&rounded, value, random);
      ASSERT_TRUE(rounded.bits == towards || rounded.bits == away)
          << std::hex << "input 0x" << bits << " gave 0x" << rounded.bits;
      awayCount += rounded.bits == away;
      sum += mpc_bf16_bits_to_f32(rounded.bits);
    }
    EXPECT_EQ(awayCount, bits & 0xffffu) << std::hex << "input 0x" << bits;
    // Exact in double: 2^16 terms of two neighbours 8 bits wide.
    if (std::isfinite(mpc_bf16_bits_to_f32(away)))
      EXPECT_EQ(sum, 65536.0 * static_cast<double>(value))
          << std::hex << "input 0x" << bits;
  }
}

/// inf and NaN are stored as rounding to nearest stores them; a value
/// exact in bf16 never moves.
TEST(StochasticRounding, SpecialAndExactValues) {
  for (float value : {INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 1.0f, -2.5f,
                      fromBits(0x00010000u)})
    for (uint32_t random : {0u, 1u, 0x8000u, 0xffffu}) {
      __nv_bfloat16 stochastic, nearest;
      mpc_store_stochastic(&stochastic, value, random);
      mpc_store(&nearest, value);
      EXPECT_EQ(stochastic.bits, nearest.bits) << value << " " << random;
    }
}

/// The rounding bits: a function of (key, index) alone, each of the 16
/// bits set about half the time, and another step's key draws other bits.
TEST(StochasticRounding, BitsAreKeyedBySeedStepAndElement) {
  unsigned long long key = mpc_rounding_key(7, 100);
  EXPECT_EQ(mpc_rounding_bits(key, 5), mpc_rounding_bits(key, 5));
  EXPECT_EQ(key, mpc_rounding_key(7, 100));
  unsigned long long nextStep = mpc_rounding_key(7, 101);
  unsigned long long otherSeed = mpc_rounding_key(8, 100);
  int sameNextStep = 0, sameOtherSeed = 0;
  int ones[16] = {};
  constexpr int count = 1 << 16;
  for (int index = 0; index < count; ++index) {
    unsigned int bits = mpc_rounding_bits(key, index);
    ASSERT_LE(bits, 0xffffu);
    for (int b = 0; b < 16; ++b)
      ones[b] += (bits >> b) & 1u;
    sameNextStep += bits == mpc_rounding_bits(nextStep, index);
    sameOtherSeed += bits == mpc_rounding_bits(otherSeed, index);
  }
  // Binomial(65536, 1/2): a standard deviation of 128.
  for (int b = 0; b < 16; ++b)
    EXPECT_NEAR(ones[b], count / 2, 1024) << "bit " << b;
  // Chance agreement is 1 in 2^16 an element.
  EXPECT_LT(sameNextStep, 16);
  EXPECT_LT(sameOtherSeed, 16);
}
