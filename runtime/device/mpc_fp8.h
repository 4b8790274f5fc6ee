/*===- mpc_fp8.h - FP8 (OCP e4m3 and e5m2) conversions on the host -*- C++
 *-*-===*
 *
 * Bit-exact conversions between fp32 and the two FP8 formats of the OCP
 * 8-bit floating point specification (v1.0), for the cpu target's kernels
 * (mpc_device.h), the block emulator and the runtime's GEMM. On the GPU
 * the kernels use cuda_fp8.h instead; these functions give the same bits:
 *
 * - e4m3 (E4M3FN): 4 exponent bits (bias 7), 3 mantissa bits, no infinity;
 *   S.1111.111 is NaN, the largest finite value is 448, the smallest
 *   subnormal 2^-9. Conversion saturates: a finite value beyond 448 and
 *   ±inf become ±448 (cuda_fp8.h's __NV_SATFINITE).
 * - e5m2: 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like: ±inf is
 *   S.11111.00, NaN S.11111.xx, the largest finite value 57344, the
 *   smallest subnormal 2^-16. Conversion overflows to ±inf, as IEEE's
 *   round to nearest does (cuda_fp8.h's __NV_NOSAT): gradients are e5m2,
 *   and an infinity is what the loss scaler's finite check looks for.
 *
 * Both round to nearest, ties to even, subnormals kept; the sign of zero
 * is kept; every NaN becomes the one code 0x7f (a NaN in both formats),
 * as cuda_fp8.h's __nv_cvt_float_to_fp8 writes it.
 *
 *===----------------------------------------------------------------------===*/

#ifndef MPC_RUNTIME_DEVICE_MPC_FP8_H
#define MPC_RUNTIME_DEVICE_MPC_FP8_H

#include <cstdint>
#include <cstring>

namespace mpc_fp8_detail {

/// One FP8 format: `Mantissa` explicit mantissa bits, exponent bias
/// `Bias`, the code of the largest finite magnitude, and what a magnitude
/// beyond it becomes.
template <int Mantissa, int Bias, uint8_t MaxFinite, uint8_t Overflow>
inline uint8_t from_f32(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) // NaN: one canonical code, as cuda_fp8.h's
    return 0x7fu;              // __nv_cvt_float_to_fp8 writes it
  // The f32 exponent of the smallest normal FP8 value, 1 - Bias; below it
  // the FP8 value is subnormal, a multiple of 2^(1 - Bias - Mantissa).
  const int minNormalExponent = 1 - Bias;
  int exponent = static_cast<int>(magnitude >> 23) - 127;
  uint32_t rounded;
  if (exponent >= minNormalExponent) {
    // Keep Mantissa bits of the f32 mantissa; the rest round to nearest
    // even. A carry out of the mantissa moves into the exponent, which is
    // the right result.
    const int shift = 23 - Mantissa;
    uint32_t kept = magnitude >> shift;
    uint32_t rest = magnitude & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    kept += (rest > half || (rest == half && (kept & 1u))) ? 1u : 0u;
    // Rebias: f32's exponent field minus FP8's, in units of the mantissa.
    uint32_t rebias = static_cast<uint32_t>(127 - Bias) << Mantissa;
    rounded = kept - rebias;
    if (rounded > MaxFinite)
      return sign | Overflow;
  } else {
    // Subnormal (or zero): the significand with its leading one (f32
    // subnormals are far below half of FP8's smallest value and round to
    // zero with the rest) in units of FP8's smallest subnormal.
    if (magnitude < 0x00800000u)
      return sign;
    uint32_t significand = (magnitude & 0x007fffffu) | 0x00800000u;
    int shift = 23 - Mantissa + (minNormalExponent - exponent);
    if (shift > 25) // below half the smallest subnormal: zero
      return sign;
    uint32_t kept = significand >> shift;
    uint32_t rest = significand & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    kept += (rest > half || (rest == half && (kept & 1u))) ? 1u : 0u;
    rounded = kept; // 1 << Mantissa is the smallest normal: also right
  }
  return sign | static_cast<uint8_t>(rounded);
}

template <int Mantissa, int Bias> inline float to_f32(uint8_t code) {
  uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  uint32_t exponent = (code & 0x7fu) >> Mantissa;
  uint32_t mantissa = code & ((1u << Mantissa) - 1u);
  const uint32_t maxExponent = (1u << (7 - Mantissa)) - 1u;
  uint32_t bits;
  if (exponent == maxExponent && (Mantissa == 3 ? mantissa == 7u : true)) {
    if (Mantissa == 3 || mantissa != 0) // NaN (quiet, payload kept)
      bits = sign | 0x7fc00000u | (mantissa << (23 - Mantissa));
    else // e5m2's infinity
      bits = sign | 0x7f800000u;
  } else if (exponent == 0) {
    // mantissa · 2^(1 - Bias - Mantissa), exact in f32.
    float magnitude = static_cast<float>(mantissa);
    for (int i = 0; i < Bias - 1 + Mantissa; ++i)
      magnitude *= 0.5f;
    std::memcpy(&bits, &magnitude, sizeof(bits));
    bits |= sign;
  } else {
    bits =
        sign | ((exponent - Bias + 127u) << 23) | (mantissa << (23 - Mantissa));
  }
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

} // namespace mpc_fp8_detail

/// fp32 -> e4m3 bits: nearest even, saturating at ±448 (±inf too).
static inline uint8_t mpc_f32_to_e4m3_bits(float value) {
  return mpc_fp8_detail::from_f32<3, 7, 0x7e, 0x7e>(value);
}
/// fp32 -> e5m2 bits: nearest even, overflow to ±inf.
static inline uint8_t mpc_f32_to_e5m2_bits(float value) {
  return mpc_fp8_detail::from_f32<2, 15, 0x7b, 0x7c>(value);
}
/// e4m3 bits -> fp32 (exact).
static inline float mpc_e4m3_bits_to_f32(uint8_t code) {
  return mpc_fp8_detail::to_f32<3, 7>(code);
}
/// e5m2 bits -> fp32 (exact).
static inline float mpc_e5m2_bits_to_f32(uint8_t code) {
  return mpc_fp8_detail::to_f32<2, 15>(code);
}

#endif // MPC_RUNTIME_DEVICE_MPC_FP8_H
