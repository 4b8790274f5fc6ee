//===- half.h - f16 and bf16 conversions on the host ------------*- C++ -*-===//
//
// Bit-level conversions between fp32 and the two half formats, for the
// runtime (parameter init, get/set, GEMM packing) and its tests. Everything
// rounds to nearest, ties to even, as the GPU's cvt.rn does, so a value
// converted on the host equals the same value converted by a kernel.
//
// - f16 goes through the compiler's _Float16, which g++ 12 converts exactly
//   (IEEE binary16: overflow to inf, subnormals, NaN kept). Where F16C is
//   enabled (the GEMM's AVX2 build) it is one instruction; elsewhere a
//   libgcc call.
// - bf16 is done in software: g++ 12 has no __bf16 type.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_RUNTIME_HALF_H
#define MPC_RUNTIME_HALF_H

#include "runtime/mpc_runtime.h"

#include <cstdint>
#include <cstring>

#if !defined(__FLT16_MANT_DIG__)
#error "mpc's runtime needs the _Float16 type (g++ >= 12 on x86-64 or aarch64)"
#endif

// ----------------------------------------------------------------------------
// f16 (IEEE binary16)

static inline uint16_t mpc_f32_to_f16_bits(float value) {
  _Float16 half = static_cast<_Float16>(value);
  uint16_t bits;
  std::memcpy(&bits, &half, sizeof(bits));
  return bits;
}

static inline float mpc_f16_bits_to_f32(uint16_t bits) {
  _Float16 half;
  std::memcpy(&half, &bits, sizeof(half));
  return static_cast<float>(half);
}

// ----------------------------------------------------------------------------
// bf16: the top 16 bits of an fp32

static inline uint16_t mpc_f32_to_bf16_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    // NaN: truncating could clear every payload bit and give inf, so keep
    // the sign and the top payload bits and set the quiet bit.
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  // Round to nearest even: add 0x7fff, plus one more when the kept part is
  // odd, and let the carry ripple. A carry out of the largest finite bf16
  // lands on the exponent of inf, which is the right overflow result.
  uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding_bias) >> 16);
}

static inline float mpc_bf16_bits_to_f32(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

// ----------------------------------------------------------------------------
// Elements of a float dtype (f32, f16 or bf16), as fp32. `data` may have
// any alignment (a safetensors file aligns its tensors to nothing), so the
// elements are copied, not dereferenced.

static inline float mpc_load_as_f32(mpc_dtype dtype, const void *data,
                                    int64_t index) {
  const unsigned char *bytes = static_cast<const unsigned char *>(data);
  if (dtype == MPC_F16 || dtype == MPC_BF16) {
    uint16_t bits;
    std::memcpy(&bits, bytes + index * 2, sizeof(bits));
    return dtype == MPC_F16 ? mpc_f16_bits_to_f32(bits)
                            : mpc_bf16_bits_to_f32(bits);
  }
  float value;
  std::memcpy(&value, bytes + index * 4, sizeof(value));
  return value;
}

/// Rounds `value` to `dtype` (nearest even) and stores it.
static inline void mpc_store_from_f32(mpc_dtype dtype, void *data,
                                      int64_t index, float value) {
  unsigned char *bytes = static_cast<unsigned char *>(data);
  if (dtype == MPC_F16 || dtype == MPC_BF16) {
    uint16_t bits = dtype == MPC_F16 ? mpc_f32_to_f16_bits(value)
                                     : mpc_f32_to_bf16_bits(value);
    std::memcpy(bytes + index * 2, &bits, sizeof(bits));
    return;
  }
  std::memcpy(bytes + index * 4, &value, sizeof(value));
}

#endif // MPC_RUNTIME_HALF_H
