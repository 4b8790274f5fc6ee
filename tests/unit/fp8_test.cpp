//===- fp8_test.cpp - e4m3 / e5m2 conversions against the spec ------------===//
//
// runtime/device/mpc_fp8.h against a reference written here from the OCP
// FP8 specification, the slow way: decode each of the 256 codes from its
// fields, and round an input to the nearest finite value by searching them
// all (ties to the even code), then apply the format's overflow rule. Every
// bf16 input is checked (2^16), and a sweep of f32 inputs that covers every
// exponent and every rounding case (the bits below the kept mantissa at,
// above and below one half). Where the CUDA toolkit is installed, the same
// inputs are checked against cuda_fp8.h's own conversions (its host code,
// which the GPU's cvt instructions match), so both targets agree bit for bit.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/mpc_fp8.h"
#include "runtime/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#ifdef MPC_TEST_CUDA_FP8_H
#include <cuda_fp8.h>
#endif

namespace {

/// A format as the spec defines it.
struct Format {
  int exponentBits, mantissaBits, bias;
  bool hasInfinity; // e5m2; e4m3 (FN) has none and saturates
};
constexpr Format e4m3{4, 3, 7, false};
constexpr Format e5m2{5, 2, 15, true};

bool isNanCode(const Format &format, uint8_t code) {
  int exponent = (code & 0x7f) >> format.mantissaBits;
  int mantissa = code & ((1 << format.mantissaBits) - 1);
  int maxExponent = (1 << format.exponentBits) - 1;
  if (format.hasInfinity)
    return exponent == maxExponent && mantissa != 0;
  return exponent == maxExponent && mantissa == (1 << format.mantissaBits) - 1;
}

bool isInfCode(const Format &format, uint8_t code) {
  int exponent = (code & 0x7f) >> format.mantissaBits;
  int mantissa = code & ((1 << format.mantissaBits) - 1);
  return format.hasInfinity && exponent == (1 << format.exponentBits) - 1 &&
         mantissa == 0;
}

/// The value of a finite code, from its fields (double: exact).
double decode(const Format &format, uint8_t code) {
  int exponent = (code & 0x7f) >> format.mantissaBits;
  int mantissa = code & ((1 << format.mantissaBits) - 1);
  double fraction = mantissa / double(1 << format.mantissaBits);
  double magnitude = exponent == 0
                         ? std::ldexp(fraction, 1 - format.bias)
                         : std::ldexp(1.0 + fraction, exponent - format.bias);
  return (code & 0x80) ? -magnitude : magnitude;
}

/// The non-negative finite values of a format, indexed by code, and its
/// largest finite code.
struct FiniteValues {
  std::vector<double> values;
  explicit FiniteValues(const Format &format) {
    for (int code = 0; code < 0x80; ++code)
      if (!isNanCode(format, code) && !isInfCode(format, code))
        values.push_back(decode(format, code));
  }
};

/// The spec's conversion of `x`, searching every non-negative finite code.
uint8_t reference(const Format &format, const FiniteValues &finite, float x) {
  if (std::isnan(x))
    return 0x7f; // cuda_fp8.h's one NaN code; any NaN code is the spec's
  uint8_t sign = std::signbit(x) ? 0x80 : 0;
  double magnitude = std::fabs(double(x));
  const std::vector<double> &values = finite.values;
  int best = 0;
  double bestDistance = INFINITY;
  for (int code = 0; code < int(values.size()); ++code) {
    double distance = std::fabs(values[code] - magnitude);
    // Codes ascend with their values, so on a tie the lower code is met
    // first; the even one wins.
    if (distance < bestDistance ||
        (distance == bestDistance && (code & 1) == 0)) {
      best = code;
      bestDistance = distance;
    }
  }
  // Beyond the largest finite value M the next value up would be
  // M + ulp(M): a magnitude at least halfway there overflows (the tie goes
  // to the even code, which is that next value's).
  int largest = int(values.size()) - 1;
  double ulp = values[largest] - values[largest - 1];
  if (magnitude >= values[largest] + ulp / 2)
    best = format.hasInfinity ? largest + 1 : largest;
  return sign | static_cast<uint8_t>(best);
}

/// Every bf16 value, then f32 values that cover each exponent and sign,
/// every combination of the top 11 mantissa bits, and low bits that put
/// the rounded-off part just below, at and just above a half.
std::vector<float> inputs() {
  std::vector<float> values;
  for (uint32_t bits = 0; bits < 0x10000u; ++bits)
    values.push_back(mpc_bf16_bits_to_f32(static_cast<uint16_t>(bits)));
  const uint32_t lowBits[] = {0x000u, 0x001u, 0x7ffu, 0x800u, 0x801u, 0xfffu};
  for (uint32_t high = 0; high < (1u << 20); ++high)
    for (uint32_t low : lowBits) {
      uint32_t bits = (high << 12) | low;
      float value;
      std::memcpy(&value, &bits, sizeof(value));
      values.push_back(value);
    }
  return values;
}

struct Converter {
  const char *name;
  Format format;
  uint8_t (*encode)(float);
  float (*decode)(uint8_t);
};
const Converter converters[] = {
    {"e4m3", e4m3, mpc_f32_to_e4m3_bits, mpc_e4m3_bits_to_f32},
    {"e5m2", e5m2, mpc_f32_to_e5m2_bits, mpc_e5m2_bits_to_f32},
};

TEST(Fp8, DecodesEveryCodeAsTheSpecDefinesIt) {
  for (const Converter &converter : converters)
    for (int code = 0; code < 256; ++code) {
      float value = converter.decode(static_cast<uint8_t>(code));
      SCOPED_TRACE(testing::Message() << converter.name << " code " << code);
      uint8_t magnitude = code & 0x7f;
      if (isNanCode(converter.format, magnitude)) {
        EXPECT_TRUE(std::isnan(value));
      } else if (isInfCode(converter.format, magnitude)) {
        EXPECT_EQ(value, (code & 0x80) ? -INFINITY : INFINITY);
      } else {
        EXPECT_EQ(double(value), decode(converter.format, code));
        EXPECT_EQ(std::signbit(value), (code & 0x80) != 0);
        // Every finite code converts back to itself.
        EXPECT_EQ(converter.encode(value), code);
      }
    }
}

TEST(Fp8, SpecialValues) {
  EXPECT_EQ(mpc_e4m3_bits_to_f32(0x7e), 448.0f);
  EXPECT_EQ(mpc_e5m2_bits_to_f32(0x7b), 57344.0f);
  EXPECT_EQ(mpc_e4m3_bits_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(mpc_e5m2_bits_to_f32(0x01), std::ldexp(1.0f, -16));
  // e4m3 saturates, infinities too; e5m2 overflows to inf.
  EXPECT_EQ(mpc_f32_to_e4m3_bits(INFINITY), 0x7e);
  EXPECT_EQ(mpc_f32_to_e4m3_bits(-1e6f), 0xfe);
  EXPECT_EQ(mpc_f32_to_e4m3_bits(464.0f), 0x7e);   // the tie goes to even
  EXPECT_EQ(mpc_f32_to_e5m2_bits(61440.0f), 0x7c); // the tie goes to inf
  EXPECT_EQ(mpc_f32_to_e5m2_bits(61439.0f), 0x7b);
  EXPECT_EQ(mpc_f32_to_e5m2_bits(-INFINITY), 0xfc);
  // Half the smallest subnormal ties to zero, keeping the sign.
  EXPECT_EQ(mpc_f32_to_e4m3_bits(-std::ldexp(1.0f, -10)), 0x80);
  EXPECT_EQ(mpc_f32_to_e4m3_bits(std::ldexp(1.5f, -10)), 0x01);
  EXPECT_EQ(mpc_f32_to_e5m2_bits(NAN), 0x7f);
  EXPECT_EQ(mpc_f32_to_e4m3_bits(-NAN), 0x7f);
}

TEST(Fp8, RoundsEveryBf16AndTheF32SweepAsTheSpec) {
  std::vector<float> values = inputs();
  for (const Converter &converter : converters) {
    FiniteValues finite(converter.format);
    int64_t mismatches = 0;
    for (float value : values) {
      uint8_t got = converter.encode(value);
      uint8_t want = reference(converter.format, finite, value);
      if (got != want && mismatches++ < 10)
        ADD_FAILURE() << converter.name << "(" << value << " = 0x" << std::hex
                      <<
            [&] {
              uint32_t bits;
              std::memcpy(&bits, &value, 4);
              return bits;
            }() << "): got 0x"
                      << int(got) << ", the spec gives 0x" << int(want);
    }
    EXPECT_EQ(mismatches, 0) << converter.name;
  }
}

#ifdef MPC_TEST_CUDA_FP8_H
TEST(Fp8, MatchesCudaFp8HeaderBitForBit) {
  std::vector<float> values = inputs();
  for (float value : values) {
    ASSERT_EQ(mpc_f32_to_e4m3_bits(value),
              __nv_cvt_float_to_fp8(value, __NV_SATFINITE, __NV_E4M3))
        << value;
    ASSERT_EQ(mpc_f32_to_e5m2_bits(value),
              __nv_cvt_float_to_fp8(value, __NV_NOSAT, __NV_E5M2))
        << value;
  }
  // Decoding: through cuda_fp8.h's half, which holds every FP8 value.
  for (int code = 0; code < 256; ++code) {
    auto viaHalf = [&](__nv_fp8_interpretation_t format) {
      __half_raw half = __nv_cvt_fp8_to_halfraw(
          static_cast<__nv_fp8_storage_t>(code), format);
      return mpc_f16_bits_to_f32(half.x);
    };
    float e4 = mpc_e4m3_bits_to_f32(code), e5 = mpc_e5m2_bits_to_f32(code);
    if (std::isnan(e4))
      EXPECT_TRUE(std::isnan(viaHalf(__NV_E4M3))) << code;
    else
      EXPECT_EQ(e4, viaHalf(__NV_E4M3)) << code;
    if (std::isnan(e5))
      EXPECT_TRUE(std::isnan(viaHalf(__NV_E5M2))) << code;
    else
      EXPECT_EQ(e5, viaHalf(__NV_E5M2)) << code;
  }
}
#endif

} // namespace
