//===- half_test.cpp - f16/bf16 conversions against a reference -*- C++ -*-===//
//
// runtime/half.h is checked against a reference written independently, in
// double arithmetic (scale to an integer count of quanta, round with
// nearbyint, re-encode), on every half bit pattern, on every midpoint
// between neighbouring halves (where ties-to-even decides), on a million
// random fp32 patterns, and on named hard cases.
//
//===----------------------------------------------------------------------===//

#include "runtime/half.h"

#include <gtest/gtest.h>

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

namespace {

// ----------------------------------------------------------------------------
// Reference

uint32_t f32_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float f32_from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// A binary float format with `mantissa_bits` stored fraction bits and the
// given exponent range, decoded and encoded with double arithmetic.
struct format {
  int mantissa_bits;
  int exponent_bits;
  int bias() const { return (1 << (exponent_bits - 1)) - 1; }
  int max_exponent_field() const { return (1 << exponent_bits) - 1; }

  double decode(uint32_t bits) const {
    uint32_t mantissa = bits & ((1u << mantissa_bits) - 1);
    uint32_t exponent = (bits >> mantissa_bits) & max_exponent_field();
    bool negative = (bits >> (mantissa_bits + exponent_bits)) & 1;
    double magnitude;
    if (exponent == static_cast<uint32_t>(max_exponent_field()))
      magnitude = mantissa ? NAN : INFINITY;
    else if (exponent == 0)
      magnitude = std::ldexp(mantissa, 1 - bias() - mantissa_bits);
    else
      magnitude =
          std::ldexp((1u << mantissa_bits) + mantissa,
                     static_cast<int>(exponent) - bias() - mantissa_bits);
    return negative ? -magnitude : magnitude;
  }

  // Non-NaN values only; NaN handling is tested on its own.
  uint32_t encode(double value) const {
    uint32_t sign =
        std::signbit(value) ? 1u << (mantissa_bits + exponent_bits) : 0u;
    double magnitude = std::fabs(value);
    uint32_t inf = static_cast<uint32_t>(max_exponent_field()) << mantissa_bits;
    if (std::isinf(magnitude))
      return sign | inf;
    int min_exponent = 1 - bias(); // exponent of the smallest normal
    int exponent;
    std::frexp(magnitude,
               &exponent); // magnitude = m * 2^exponent, m in [.5, 1)
    exponent -= 1;
    if (magnitude == 0.0 || exponent < min_exponent)
      exponent = min_exponent;
    // Quanta of this binade; the division by a power of two is exact.
    double quantum = std::ldexp(1.0, exponent - mantissa_bits);
    double count = std::nearbyint(magnitude / quantum); // ties to even
    uint32_t bits;
    if (exponent == min_exponent && count < std::ldexp(1.0, mantissa_bits)) {
      bits = static_cast<uint32_t>(count); // subnormal (or zero)
    } else {
      if (count == std::ldexp(1.0, mantissa_bits + 1)) { // rounded up a binade
        count /= 2;
        exponent += 1;
      }
      int field = exponent + bias();
      if (field >= max_exponent_field())
        return sign | inf;
      bits = (static_cast<uint32_t>(field) << mantissa_bits) |
             (static_cast<uint32_t>(count) - (1u << mantissa_bits));
    }
    return sign | bits;
  }
};

const format F16{10, 5};
const format BF16{7, 8};

class HalfTest : public ::testing::Test {
protected:
  void SetUp() override { ASSERT_EQ(std::fegetround(), FE_TONEAREST); }
};

// ----------------------------------------------------------------------------
// f16

TEST_F(HalfTest, F16DecodesEveryPattern) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    double expected = F16.decode(bits);
    float actual = mpc_f16_bits_to_f32(static_cast<uint16_t>(bits));
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(actual)) << std::hex << bits;
      // Quiet, sign and payload kept (shifted into the fp32 fraction).
      uint32_t wide = f32_bits(actual);
      EXPECT_EQ(wide >> 31, bits >> 15) << std::hex << bits;
      EXPECT_EQ(wide & 0x00400000u, 0x00400000u) << std::hex << bits;
      EXPECT_EQ((wide >> 13) & 0x1ffu, bits & 0x1ffu) << std::hex << bits;
    } else {
      ASSERT_EQ(static_cast<double>(actual), expected) << std::hex << bits;
      ASSERT_EQ(std::signbit(actual), std::signbit(expected)) << bits;
    }
  }
}

TEST_F(HalfTest, F16RoundTripsEveryNonNaNPattern) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    if ((bits & 0x7c00) == 0x7c00 && (bits & 0x3ff))
      continue;
    ASSERT_EQ(mpc_f32_to_f16_bits(mpc_f16_bits_to_f32(bits)), bits)
        << std::hex << bits;
  }
}

// Halfway between two neighbours the result is the even one; one fp32 ulp
// either side decides the other way.
TEST_F(HalfTest, F16MidpointsTieToEven) {
  for (uint32_t bits = 0; bits < 0x7bff; ++bits) {
    for (uint32_t sign : {0u, 0x8000u}) {
      float low = mpc_f16_bits_to_f32(sign | bits);
      float high = mpc_f16_bits_to_f32(sign | (bits + 1));
      float mid = static_cast<float>(
          (static_cast<double>(low) + static_cast<double>(high)) / 2);
      ASSERT_EQ(static_cast<double>(mid),
                (static_cast<double>(low) + static_cast<double>(high)) / 2)
          << "midpoint not exact in fp32";
      uint32_t even = (bits & 1) ? bits + 1 : bits;
      ASSERT_EQ(mpc_f32_to_f16_bits(mid), sign | even) << std::hex << bits;
      ASSERT_EQ(mpc_f32_to_f16_bits(std::nextafter(mid, low)), sign | bits);
      ASSERT_EQ(mpc_f32_to_f16_bits(std::nextafter(mid, high)),
                sign | (bits + 1));
    }
  }
}

TEST_F(HalfTest, F16MatchesReferenceOnRandomFloats) {
  std::mt19937 generator(1234);
  for (int i = 0; i < 1000000; ++i) {
    uint32_t bits = generator();
    // Half of them near the f16 range, where the interesting cases are.
    if (i % 2)
      bits = (bits & 0x807fffffu) | ((100u + generator() % 50u) << 23);
    float value = f32_from_bits(bits);
    if (std::isnan(value))
      continue;
    ASSERT_EQ(mpc_f32_to_f16_bits(value), F16.encode(value))
        << std::hex << bits;
  }
}

TEST_F(HalfTest, F16HardCases) {
  struct {
    float value;
    uint16_t bits;
  } cases[] = {
      {65504.0f, 0x7bff},  // largest finite
      {65519.99f, 0x7bff}, // just below the midpoint to inf
      {65520.0f, 0x7c00},  // the midpoint: 0x7bff is odd, so up to inf
      {1e6f, 0x7c00},      // overflow
      {-65520.0f, 0xfc00},
      {6e-8f, 0x0001},    // rounds to the smallest subnormal
      {5.96e-8f, 0x0001}, // the smallest subnormal, 2^-24
      {0x1p-24f, 0x0001},
      {2.98e-8f, 0x0000},        // just under half of it
      {0x1p-25f, 0x0000},        // exactly half: ties to even (0)
      {0x1.000002p-25f, 0x0001}, // just over half
      {0x1.8p-24f, 0x0002},      // 1.5 quanta: ties to even (2)
      {1e-8f, 0x0000},
      {6.1035156e-05f, 0x0400}, // smallest normal, 2^-14
      {0x1.ff8p-15f, 0x03ff},   // largest subnormal
      {0x1.ffcp-15f, 0x0400},   // ... + half a quantum: ties up to the normal
      {-0.0f, 0x8000},
      {0.0f, 0x0000},
      {1.0f, 0x3c00},
      {-2.0f, 0xc000},
      {INFINITY, 0x7c00},
      {-INFINITY, 0xfc00},
  };
  for (const auto &c : cases) {
    EXPECT_EQ(mpc_f32_to_f16_bits(c.value), c.bits) << c.value;
    EXPECT_EQ(F16.encode(c.value), c.bits) << "reference, " << c.value;
  }
}

TEST_F(HalfTest, F16NaNStaysQuietNaNWithSignAndPayload) {
  struct {
    uint32_t f32;
    uint16_t f16;
  } cases[] = {
      {0x7fc00000u, 0x7e00}, // canonical quiet NaN
      {0xffc00000u, 0xfe00}, // sign kept
      {0x7fc12345u, 0x7e09}, // top payload bits kept
      {0x7f800001u, 0x7e00}, // signalling, payload only in low bits: not inf
      {0xff800001u, 0xfe00},
      {0x7fa00000u, 0x7f00}, // signalling with a high payload: quieted
  };
  for (const auto &c : cases) {
    uint16_t bits = mpc_f32_to_f16_bits(f32_from_bits(c.f32));
    EXPECT_EQ(bits, c.f16) << std::hex << c.f32;
    EXPECT_TRUE(std::isnan(mpc_f16_bits_to_f32(bits)));
  }
}

// ----------------------------------------------------------------------------
// bf16

TEST_F(HalfTest, BF16DecodesEveryPattern) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    float actual = mpc_bf16_bits_to_f32(static_cast<uint16_t>(bits));
    ASSERT_EQ(f32_bits(actual), bits << 16);
    double expected = BF16.decode(bits);
    if (!std::isnan(expected)) {
      ASSERT_EQ(static_cast<double>(actual), expected) << std::hex << bits;
    }
  }
}

TEST_F(HalfTest, BF16RoundTripsEveryNonNaNPattern) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    if ((bits & 0x7f80) == 0x7f80 && (bits & 0x7f))
      continue;
    ASSERT_EQ(mpc_f32_to_bf16_bits(mpc_bf16_bits_to_f32(bits)), bits)
        << std::hex << bits;
  }
}

TEST_F(HalfTest, BF16MidpointsTieToEven) {
  for (uint32_t bits = 0; bits < 0x7f7f; ++bits) {
    for (uint32_t sign : {0u, 0x8000u}) {
      uint32_t mid_bits = ((sign | bits) << 16) | 0x8000u; // exact midpoint
      float mid = f32_from_bits(mid_bits);
      uint32_t even = (bits & 1) ? bits + 1 : bits;
      ASSERT_EQ(mpc_f32_to_bf16_bits(mid), sign | even) << std::hex << bits;
      ASSERT_EQ(mpc_f32_to_bf16_bits(f32_from_bits(mid_bits - 1)), sign | bits);
      ASSERT_EQ(mpc_f32_to_bf16_bits(f32_from_bits(mid_bits + 1)),
                sign | (bits + 1));
    }
  }
}

TEST_F(HalfTest, BF16MatchesReferenceOnRandomFloats) {
  std::mt19937 generator(99);
  for (int i = 0; i < 1000000; ++i) {
    float value = f32_from_bits(generator());
    if (std::isnan(value))
      continue;
    ASSERT_EQ(mpc_f32_to_bf16_bits(value), BF16.encode(value))
        << std::hex << f32_bits(value);
  }
}

TEST_F(HalfTest, BF16HardCases) {
  struct {
    uint32_t f32;
    uint16_t bf16;
  } cases[] = {
      {0x3f808000u, 0x3f80}, // 1 + 2^-8: halfway, ties to even (down)
      {0x3f818000u, 0x3f82}, // 1 + 3 * 2^-8: halfway, ties to even (up)
      {0x3f808001u, 0x3f81}, // just over halfway
      {0x7f7f0000u, 0x7f7f}, // largest finite bf16, 3.3895314e38
      {0x7f7f7fffu, 0x7f7f}, // just under the midpoint to inf
      {0x7f7f8000u, 0x7f80}, // the midpoint: 0x7f7f is odd, so up to inf
      {0x7f7fffffu, 0x7f80}, // FLT_MAX overflows
      {0xff7fffffu, 0xff80}, {0x00000001u, 0x0000}, // smallest fp32 subnormal
      {0x00008000u, 0x0000}, // half of the smallest bf16 subnormal: even (0)
      {0x00018000u, 0x0002}, // 1.5 quanta: even (2)
      {0x80000000u, 0x8000}, // -0
      {0x7f800000u, 0x7f80}, // inf
      {0xff800000u, 0xff80},
  };
  for (const auto &c : cases) {
    EXPECT_EQ(mpc_f32_to_bf16_bits(f32_from_bits(c.f32)), c.bf16)
        << std::hex << c.f32;
    EXPECT_EQ(BF16.encode(f32_from_bits(c.f32)), c.bf16)
        << "reference, " << std::hex << c.f32;
  }
  EXPECT_EQ(mpc_bf16_bits_to_f32(0x7f7f), 3.3895313892515355e38f);
}

TEST_F(HalfTest, BF16NaNStaysQuietNaNWithSign) {
  struct {
    uint32_t f32;
    uint16_t bf16;
  } cases[] = {
      {0x7fc00000u, 0x7fc0},
      {0xffc00000u, 0xffc0},
      {0x7f800001u, 0x7fc0}, // payload only in dropped bits: still NaN
      {0xff800001u, 0xffc0},
      {0x7fab0000u, 0x7feb}, // payload kept, quiet bit set
      {0x7fffffffu, 0x7fff}, // would round up into the sign without care
  };
  for (const auto &c : cases) {
    uint16_t bits = mpc_f32_to_bf16_bits(f32_from_bits(c.f32));
    EXPECT_EQ(bits, c.bf16) << std::hex << c.f32;
    EXPECT_TRUE(std::isnan(mpc_bf16_bits_to_f32(bits)));
  }
}

} // namespace
