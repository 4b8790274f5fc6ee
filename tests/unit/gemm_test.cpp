//===- gemm_test.cpp - mpc_rt_gemm against an fp64 reference ----*- C++ -*-===//
//
// llm.c's kernel-test recipe: a CPU reference (naive, fp64), then validate
// every output element within a bound derived from fp32 accumulation and the
// output's rounding, then a benchmark (disabled by default; run with
// --gtest_also_run_disabled_tests --gtest_filter='*Benchmark*').
//
//===----------------------------------------------------------------------===//

#include "runtime/device/mpc_device.h" // mpc_gelu_tanh, as kernels compute it
#include "runtime/device/mpc_fp8.h"
#include "runtime/gemm.h"
#include "runtime/half.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

// ----------------------------------------------------------------------------
// Typed host buffers

// `count` elements of one dtype, stored as the GEMM reads them.
struct typed_buffer {
  mpc_dtype dtype;
  std::vector<unsigned char> bytes;

  typed_buffer(mpc_dtype type, size_t count)
      : dtype(type), bytes(count * mpc_dtype_size(type)) {}

  float get(size_t index) const {
    uint16_t half;
    float value;
    switch (dtype) {
    case MPC_F16:
      std::memcpy(&half, &bytes[index * 2], 2);
      return mpc_f16_bits_to_f32(half);
    case MPC_BF16:
      std::memcpy(&half, &bytes[index * 2], 2);
      return mpc_bf16_bits_to_f32(half);
    default:
      std::memcpy(&value, &bytes[index * 4], 4);
      return value;
    }
  }

  void set(size_t index, float value) {
    uint16_t half;
    switch (dtype) {
    case MPC_F16:
      half = mpc_f32_to_f16_bits(value);
      std::memcpy(&bytes[index * 2], &half, 2);
      break;
    case MPC_BF16:
      half = mpc_f32_to_bf16_bits(value);
      std::memcpy(&bytes[index * 2], &half, 2);
      break;
    default:
      std::memcpy(&bytes[index * 4], &value, 4);
      break;
    }
  }

  size_t size() const { return bytes.size() / mpc_dtype_size(dtype); }
  void *data() { return bytes.data(); }
};

void fill_random(typed_buffer &buffer, std::mt19937 &generator) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (size_t i = 0; i < buffer.size(); ++i)
    buffer.set(i, uniform(generator));
}

const char *type_name(mpc_dtype dtype) {
  return dtype == MPC_F32 ? "f32" : dtype == MPC_F16 ? "f16" : "bf16";
}

// Relative rounding error of one conversion to the output dtype.
double output_epsilon(mpc_dtype dtype) {
  return dtype == MPC_F32 ? 0x1p-24 : dtype == MPC_F16 ? 0x1p-11 : 0x1p-8;
}

// ----------------------------------------------------------------------------
// One case: build inputs, run, compare with fp64

struct gemm_case {
  mpc_dtype a_type = MPC_F32, b_type = MPC_F32, c_type = MPC_F32;
  bool trans_a = false, trans_b = false;
  int64_t m = 1, n = 1, k = 1, batch = 1;
  int64_t pad = 0; // extra elements per row, to test pitches > width
  float alpha = 1.0f, beta = 0.0f;
  bool nan_in_c = false; // C starts as NaN (beta must be 0)

  std::string describe() const {
    char text[256];
    std::snprintf(text, sizeof(text),
                  "%s.%s->%s trans=(%d,%d) m=%lld n=%lld k=%lld batch=%lld "
                  "pad=%lld alpha=%g beta=%g",
                  type_name(a_type), type_name(b_type), type_name(c_type),
                  trans_a, trans_b, (long long)m, (long long)n, (long long)k,
                  (long long)batch, (long long)pad, alpha, beta);
    return text;
  }
};

void run_case(const gemm_case &test, uint32_t seed = 7) {
  SCOPED_TRACE(test.describe());
  std::mt19937 generator(seed);
  // Stored shapes: A is m x k (k x m when transposed), B is k x n (n x k).
  int64_t a_rows = test.trans_a ? test.k : test.m;
  int64_t a_cols = test.trans_a ? test.m : test.k;
  int64_t b_rows = test.trans_b ? test.n : test.k;
  int64_t b_cols = test.trans_b ? test.k : test.n;
  int64_t lda = a_cols + test.pad, ldb = b_cols + test.pad,
          ldc = test.n + test.pad;
  int64_t stride_a = a_rows * lda + test.pad, stride_b = b_rows * ldb,
          stride_c = test.m * ldc + 3;
  typed_buffer a(test.a_type, static_cast<size_t>(stride_a * test.batch));
  typed_buffer b(test.b_type, static_cast<size_t>(stride_b * test.batch));
  typed_buffer c(test.c_type, static_cast<size_t>(stride_c * test.batch));
  fill_random(a, generator);
  fill_random(b, generator);
  fill_random(c, generator);
  if (test.nan_in_c)
    for (size_t i = 0; i < c.size(); ++i)
      c.set(i, NAN);
  typed_buffer c_before = c;

  ASSERT_EQ(mpc_rt_gemm(test.a_type, test.b_type, test.c_type, test.trans_a,
                        test.trans_b, test.m, test.n, test.k, test.alpha,
                        a.data(), lda, stride_a, b.data(), ldb, stride_b,
                        test.beta, c.data(), ldc, stride_c, test.batch),
            MPC_OK)
      << mpc_last_error();

  for (int64_t batch = 0; batch < test.batch; ++batch) {
    for (int64_t i = 0; i < test.m; ++i) {
      for (int64_t j = 0; j < test.n; ++j) {
        double sum = 0.0, magnitude = 0.0;
        for (int64_t p = 0; p < test.k; ++p) {
          int64_t a_index =
              batch * stride_a + (test.trans_a ? p * lda + i : i * lda + p);
          int64_t b_index =
              batch * stride_b + (test.trans_b ? j * ldb + p : p * ldb + j);
          double product = static_cast<double>(a.get(a_index)) *
                           static_cast<double>(b.get(b_index));
          sum += product;
          magnitude += std::fabs(product);
        }
        size_t c_index = static_cast<size_t>(batch * stride_c + i * ldc + j);
        double old_c = c_before.get(c_index);
        double expected = test.alpha * sum;
        double bound_magnitude = std::fabs(test.alpha) * magnitude;
        if (test.beta != 0.0f) {
          expected += test.beta * old_c;
          bound_magnitude += std::fabs(test.beta * old_c);
        }
        // fp32 accumulation: at most ~k roundings of partial sums, each
        // within 2^-24 of the running magnitude; then one output rounding.
        double tolerance =
            (static_cast<double>(test.k) + 4) * 0x1p-24 * bound_magnitude +
            output_epsilon(test.c_type) * std::fabs(expected) + 1e-30;
        double actual = c.get(c_index);
        ASSERT_LE(std::fabs(actual - expected), tolerance)
            << "batch " << batch << " C[" << i << "][" << j << "] = " << actual
            << ", expected " << expected;
      }
    }
  }
  // Elements between rows (pitch padding) and between batch entries are
  // not C's and must not change.
  for (int64_t batch = 0; batch < test.batch; ++batch)
    for (int64_t i = 0; i < stride_c; ++i) {
      bool inside = i < test.m * ldc && i % ldc < test.n;
      size_t index = static_cast<size_t>(batch * stride_c + i);
      if (!inside) {
        ASSERT_EQ(std::memcmp(&c.bytes[index * mpc_dtype_size(c.dtype)],
                              &c_before.bytes[index * mpc_dtype_size(c.dtype)],
                              mpc_dtype_size(c.dtype)),
                  0)
            << "padding element " << i << " of batch " << batch << " changed";
      }
    }
}

// ----------------------------------------------------------------------------
// Tests

const char *isa_name(mpcrt::gemm_isa isa) {
  switch (isa) {
  case mpcrt::gemm_isa::avx512:
    return "avx512";
  case mpcrt::gemm_isa::avx2:
    return "avx2";
  default:
    return "baseline";
  }
}

// Runs `body` with each build of the kernel the CPU runs (AVX-512, AVX2,
// the baseline SSE2 one).
template <typename Body> void for_each_kernel(Body body) {
  for (mpcrt::gemm_isa isa : {mpcrt::gemm_isa::avx512, mpcrt::gemm_isa::avx2,
                              mpcrt::gemm_isa::baseline}) {
    mpcrt::gemm_limit_isa(isa);
    if (mpcrt::gemm_current_isa() == isa) {
      SCOPED_TRACE(isa_name(isa));
      body();
    }
  }
  mpcrt::gemm_limit_isa(mpcrt::gemm_isa::avx512);
}

// The AVX-512 kernel accumulates each element of C as the AVX2 one does
// (one fused multiply-add per depth, the same depth blocks), so models
// train to the same bits on either machine: every output byte agrees, over
// edge panels, depths across KC, f16/bf16 operands and outputs, beta.
TEST(Gemm, Avx512GivesTheBitsOfAvx2) {
  mpcrt::gemm_limit_isa(mpcrt::gemm_isa::avx512);
  if (mpcrt::gemm_current_isa() != mpcrt::gemm_isa::avx512)
    GTEST_SKIP() << "this CPU has no AVX-512";
  const int64_t shapes[][3] = {{1, 1, 1},   {7, 33, 65},   {65, 7, 300},
                               {33, 65, 7}, {13, 95, 513}, {130, 70, 300},
                               {6, 32, 256}};
  std::mt19937 generator(11);
  for (mpc_dtype in : {MPC_F32, MPC_F16, MPC_BF16})
    for (mpc_dtype out : {MPC_F32, MPC_BF16})
      for (const auto &shape : shapes)
        for (int transposes = 0; transposes < 4; ++transposes) {
          int64_t m = shape[0], n = shape[1], k = shape[2];
          bool ta = transposes & 1, tb = transposes & 2;
          typed_buffer a(in, size_t(m * k)), b(in, size_t(k * n));
          fill_random(a, generator);
          fill_random(b, generator);
          typed_buffer c0(out, size_t(m * n));
          fill_random(c0, generator);
          std::vector<unsigned char> results[2];
          for (int wide = 0; wide < 2; ++wide) {
            mpcrt::gemm_limit_isa(wide ? mpcrt::gemm_isa::avx512
                                       : mpcrt::gemm_isa::avx2);
            typed_buffer c = c0;
            mpc_rt_gemm(in, in, out, ta, tb, m, n, k, 1.0f, a.data(),
                        ta ? m : k, 0, b.data(), tb ? k : n, 0, 0.5f, c.data(),
                        n, 0, 1);
            results[wide] = c.bytes;
          }
          ASSERT_EQ(results[0], results[1])
              << type_name(in) << "->" << type_name(out) << " " << m << "x" << n
              << "x" << k << " transposes " << transposes;
        }
  mpcrt::gemm_limit_isa(mpcrt::gemm_isa::avx512);
}

TEST(Gemm, AllTransposesOddSizes) {
  for_each_kernel([&] {
    const int64_t sizes[][3] = {{1, 1, 1},   {7, 33, 65},  {65, 7, 33},
                                {33, 65, 7}, {1, 17, 300}, {130, 70, 300},
                                {6, 16, 256}};
    for (bool trans_a : {false, true})
      for (bool trans_b : {false, true})
        for (const auto &size : sizes) {
          gemm_case test;
          test.trans_a = trans_a;
          test.trans_b = trans_b;
          test.m = size[0];
          test.n = size[1];
          test.k = size[2];
          run_case(test);
        }
  });
}

TEST(Gemm, BatchedWithPitchesAndStrides) {
  for_each_kernel([&] {
    for (bool trans_a : {false, true})
      for (bool trans_b : {false, true}) {
        gemm_case test;
        test.trans_a = trans_a;
        test.trans_b = trans_b;
        test.m = 13;
        test.n = 21;
        test.k = 34;
        test.batch = 3;
        test.pad = 5;
        test.alpha = 0.75f;
        test.beta = 0.5f;
        run_case(test);
      }
  });
}

TEST(Gemm, AlphaBeta) {
  for_each_kernel([&] {
    for (float alpha : {1.0f, -2.5f, 0.125f})
      for (float beta : {0.0f, 1.0f, -0.5f}) {
        gemm_case test;
        test.m = 9;
        test.n = 40;
        test.k = 11;
        test.alpha = alpha;
        test.beta = beta;
        run_case(test);
      }
  });
}

TEST(Gemm, HalfInputsAndOutputs) {
  for_each_kernel([&] {
    const mpc_dtype types[] = {MPC_F32, MPC_F16, MPC_BF16};
    for (mpc_dtype a_type : types)
      for (mpc_dtype b_type : types)
        for (mpc_dtype c_type : types)
          for (bool trans : {false, true}) {
            gemm_case test;
            test.a_type = a_type;
            test.b_type = b_type;
            test.c_type = c_type;
            test.trans_a = trans;
            test.trans_b = !trans;
            test.m = 19;
            test.n = 23;
            test.k = 45;
            test.batch = 2;
            test.beta = 0.25f;
            run_case(test);
          }
  });
}

// A half C is accumulated in fp32 over the whole depth and rounded once,
// also when the depth spans several packed blocks (k > 256).
TEST(Gemm, HalfOutputRoundsOnceOverDeepSums) {
  for_each_kernel([&] {
    for (mpc_dtype c_type : {MPC_F16, MPC_BF16}) {
      gemm_case test;
      test.a_type = MPC_BF16;
      test.b_type = MPC_F16;
      test.c_type = c_type;
      test.m = 250; // more than one fp32 tile of rows
      test.n = 18;
      test.k = 700;
      test.alpha = 0.5f;
      test.beta = 1.0f;
      run_case(test);
    }
  });
}

TEST(Gemm, WideOutputSpansColumnBlocks) {
  for_each_kernel([&] {
    gemm_case test;
    test.m = 3;
    test.n = 2100; // more than one 2048-column block of packed B
    test.k = 5;
    test.trans_b = true;
    run_case(test);
    test.c_type = MPC_F16;
    run_case(test);
  });
}

TEST(Gemm, BetaZeroNeverReadsC) {
  for_each_kernel([&] {
    for (mpc_dtype c_type : {MPC_F32, MPC_F16, MPC_BF16}) {
      gemm_case test;
      test.c_type = c_type;
      test.m = 8;
      test.n = 17;
      test.k = 300;
      test.batch = 2;
      test.nan_in_c = true;
      run_case(test);
    }
  });
}

TEST(Gemm, AlphaZeroOrEmptyDepthScalesC) {
  for_each_kernel([&] {
    // A and B are never read: null pointers and NaNs are both fine.
    std::vector<float> c = {1.0f, 2.0f, 3.0f, 4.0f};
    ASSERT_EQ(mpc_rt_gemm(MPC_F32, MPC_F32, MPC_F32, 0, 0, 2, 2, 3, 0.0f,
                          nullptr, 3, 0, nullptr, 2, 0, 0.5f, c.data(), 2, 0,
                          1),
              MPC_OK);
    EXPECT_EQ(c, (std::vector<float>{0.5f, 1.0f, 1.5f, 2.0f}));
    std::vector<float> nan_a(6, NAN);
    ASSERT_EQ(mpc_rt_gemm(MPC_F32, MPC_F32, MPC_F32, 0, 0, 2, 2, 0, 1.0f,
                          nan_a.data(), 1, 0, nan_a.data(), 2, 0, 2.0f,
                          c.data(), 2, 0, 1),
              MPC_OK);
    EXPECT_EQ(c, (std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f}));
    std::vector<float> nan_c(4, NAN);
    ASSERT_EQ(mpc_rt_gemm(MPC_F32, MPC_F32, MPC_F32, 0, 0, 2, 2, 3, 0.0f,
                          nan_a.data(), 3, 0, nan_a.data(), 2, 0, 0.0f,
                          nan_c.data(), 2, 0, 1),
              MPC_OK);
    EXPECT_EQ(nan_c, (std::vector<float>(4, 0.0f)));
  });
}

TEST(Gemm, EmptyShapesDoNothing) {
  for_each_kernel([&] {
    float c = 42.0f;
    EXPECT_EQ(mpc_rt_gemm(MPC_F32, MPC_F32, MPC_F32, 0, 0, 0, 1, 1, 1.0f,
                          nullptr, 1, 0, nullptr, 1, 0, 0.0f, &c, 1, 0, 1),
              MPC_OK);
    EXPECT_EQ(mpc_rt_gemm(MPC_F32, MPC_F32, MPC_F32, 0, 0, 1, 1, 1, 1.0f,
                          nullptr, 1, 0, nullptr, 1, 0, 0.0f, &c, 1, 0, 0),
              MPC_OK);
    EXPECT_EQ(c, 42.0f);
  });
}

TEST(Gemm, RejectsBadArguments) {
  for_each_kernel([&] {
    float a[16] = {}, b[16] = {}, c[16] = {};
    auto call = [&](mpc_dtype a_type, int64_t m, int64_t lda, int64_t ldc,
                    const float *a_ptr, float *c_ptr) {
      return mpc_rt_gemm(a_type, MPC_F32, MPC_F32, 0, 0, m, 2, 2, 1.0f, a_ptr,
                         lda, 0, b, 2, 0, 0.0f, c_ptr, ldc, 0, 1);
    };
    EXPECT_EQ(call(MPC_F32, 2, 2, 2, a, c), MPC_OK);
    EXPECT_EQ(call(MPC_I32, 2, 2, 2, a, c), MPC_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(mpc_last_error()).find("a_type"), std::string::npos)
        << mpc_last_error();
    EXPECT_EQ(call(static_cast<mpc_dtype>(7), 2, 2, 2, a, c),
              MPC_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(call(MPC_F32, -1, 2, 2, a, c), MPC_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(mpc_last_error()).find("negative"),
              std::string::npos);
    EXPECT_EQ(call(MPC_F32, 2, 1, 2, a, c), MPC_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(mpc_last_error()).find("lda"), std::string::npos);
    EXPECT_EQ(call(MPC_F32, 2, 2, 1, a, c), MPC_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(mpc_last_error()).find("ldc"), std::string::npos);
    EXPECT_EQ(call(MPC_F32, 2, 2, 2, nullptr, c), MPC_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(mpc_last_error()).find("a is null"),
              std::string::npos);
    EXPECT_EQ(call(MPC_F32, 2, 2, 2, a, nullptr), MPC_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(mpc_rt_gemm(MPC_F32, MPC_F32, MPC_F32, 0, 0, 2, 2, 2, 1.0f, a, 2,
                          -4, b, 2, 0, 0.0f, c, 2, 0, 2),
              MPC_ERROR_INVALID_ARGUMENT);
  });
}

// ----------------------------------------------------------------------------
// mpc_rt_gemm_scaled: FP8 operands, dequantized by their inverse scales

// Random finite FP8 codes of both signs.
std::vector<uint8_t> random_fp8(int64_t count, bool e4m3,
                                std::mt19937 &generator) {
  std::vector<uint8_t> codes(count);
  std::uniform_int_distribution<int> code(0, 255);
  for (uint8_t &c : codes) {
    do
      c = static_cast<uint8_t>(code(generator));
    while (!std::isfinite(e4m3 ? mpc_e4m3_bits_to_f32(c)
                               : mpc_e5m2_bits_to_f32(c)));
  }
  return codes;
}

TEST(GemmScaled, Fp8ProductsDequantizedBeforeTheBiasAndOneRounding) {
  std::mt19937 generator(11);
  const int64_t m = 13, n = 17, k = 40;
  for (bool trans_a : {false, true})
    for (mpc_dtype c_type : {MPC_F32, MPC_BF16}) {
      SCOPED_TRACE(testing::Message() << "trans_a " << trans_a << ", c "
                                      << (c_type == MPC_F32 ? "f32" : "bf16"));
      // A e4m3 (an activation), B e5m2 (a gradient), stored n x k: TN.
      std::vector<uint8_t> a = random_fp8(m * k, true, generator);
      std::vector<uint8_t> b = random_fp8(n * k, false, generator);
      const float a_scale_inv = 0.125f, b_scale_inv = 1.0f / 4096.0f;
      std::vector<uint16_t> bias(n);
      for (int64_t j = 0; j < n; ++j)
        bias[j] = mpc_f32_to_bf16_bits(0.25f * static_cast<float>(j) - 2.0f);
      std::vector<float> c32(m * n, NAN);
      std::vector<uint16_t> c16(m * n, 0xffff);
      void *c = c_type == MPC_F32 ? static_cast<void *>(c32.data())
                                  : static_cast<void *>(c16.data());
      const void *bias_ptr = c_type == MPC_BF16 ? bias.data() : nullptr;
      ASSERT_EQ(mpc_rt_gemm_scaled(MPC_F8E4M3, MPC_F8E5M2, c_type, trans_a, 1,
                                   m, n, k, a.data(), trans_a ? m : k,
                                   &a_scale_inv, b.data(), k, &b_scale_inv,
                                   bias_ptr, c, n),
                MPC_OK)
          << mpc_last_error();
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0, magnitude = 0;
          for (int64_t p = 0; p < k; ++p) {
            double product = double(mpc_e4m3_bits_to_f32(
                                 trans_a ? a[p * m + i] : a[i * k + p])) *
                             mpc_e5m2_bits_to_f32(b[j * k + p]);
            sum += product;
            magnitude += std::fabs(product);
          }
          double scale = double(a_scale_inv) * b_scale_inv;
          double want =
              sum * scale + (bias_ptr ? mpc_bf16_bits_to_f32(bias[j]) : 0.0);
          // f32 accumulation of k exact products, then (bf16) one rounding.
          double bound = k * std::ldexp(magnitude * scale, -24);
          double got = c_type == MPC_F32 ? c32[i * n + j]
                                         : mpc_bf16_bits_to_f32(c16[i * n + j]);
          if (c_type == MPC_BF16)
            bound += std::ldexp(std::fabs(want), -8);
          ASSERT_NEAR(got, want, bound) << "(" << i << ", " << j << ")";
        }
    }
}

TEST(GemmScaled, RejectsANullScale) {
  uint8_t a[4] = {}, b[4] = {};
  float c[4], scale = 1.0f;
  EXPECT_EQ(mpc_rt_gemm_scaled(MPC_F8E4M3, MPC_F8E4M3, MPC_F32, 0, 0, 2, 2, 2,
                               a, 2, nullptr, b, 2, &scale, nullptr, c, 2),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mpc_last_error()).find("a_scale_inv is null"),
            std::string::npos)
      << mpc_last_error();
  // FP8 is an operand type, never C's.
  EXPECT_EQ(mpc_rt_gemm_scaled(MPC_F8E4M3, MPC_F8E4M3, MPC_F8E4M3, 0, 0, 2, 2,
                               2, a, 2, &scale, b, 2, &scale, nullptr, c, 2),
            MPC_ERROR_INVALID_ARGUMENT);
}

// ----------------------------------------------------------------------------
// mpc_rt_gemm_bias: a linear layer's GEMM with its bias fused

// The unfused computation codegen emitted before the fused call: every row
// of every C[b] filled with the bias, then mpc_rt_gemm accumulating onto it.
void fill_then_accumulate(const gemm_case &test, const void *a, int64_t lda,
                          int64_t stride_a, const void *b, int64_t ldb,
                          int64_t stride_b, const typed_buffer &bias,
                          typed_buffer &c, int64_t ldc, int64_t stride_c) {
  size_t element = mpc_dtype_size(test.c_type);
  for (int64_t matrix = 0; matrix < test.batch; ++matrix)
    for (int64_t row = 0; row < test.m; ++row)
      std::memcpy(&c.bytes[(matrix * stride_c + row * ldc) * element],
                  bias.bytes.data(), test.n * element);
  ASSERT_EQ(mpc_rt_gemm(test.a_type, test.b_type, test.c_type, test.trans_a,
                        test.trans_b, test.m, test.n, test.k, test.alpha, a,
                        lda, stride_a, b, ldb, stride_b, 1.0f, c.data(), ldc,
                        stride_c, test.batch),
            MPC_OK);
}

TEST(GemmBias, EqualsBiasFillThenAccumulateBitForBit) {
  const mpc_dtype types[][2] = {{MPC_F32, MPC_F32},
                                {MPC_F16, MPC_F16},
                                {MPC_BF16, MPC_BF16},
                                {MPC_F16, MPC_F32},
                                {MPC_BF16, MPC_F32}};
  // k = 300 spans two depth blocks (KC = 256) of the blocked kernel.
  const int64_t sizes[][3] = {{1, 1, 1}, {7, 33, 65}, {13, 21, 300}};
  for_each_kernel([&] {
    for (const auto &type : types)
      for (bool trans_a : {false, true})
        for (bool trans_b : {false, true})
          for (const auto &size : sizes) {
            gemm_case test;
            test.a_type = test.b_type = type[0];
            test.c_type = type[1];
            test.trans_a = trans_a;
            test.trans_b = trans_b;
            test.m = size[0];
            test.n = size[1];
            test.k = size[2];
            test.batch = 2;
            test.pad = 3;
            test.alpha = 0.75f;
            SCOPED_TRACE(test.describe());
            std::mt19937 generator(11);
            int64_t a_rows = trans_a ? test.k : test.m;
            int64_t a_cols = trans_a ? test.m : test.k;
            int64_t b_rows = trans_b ? test.n : test.k;
            int64_t b_cols = trans_b ? test.k : test.n;
            int64_t lda = a_cols + test.pad, ldb = b_cols + test.pad,
                    ldc = test.n + test.pad;
            int64_t stride_a = a_rows * lda, stride_b = b_rows * ldb,
                    stride_c = test.m * ldc + 1;
            typed_buffer a(test.a_type, stride_a * test.batch);
            typed_buffer b(test.b_type, stride_b * test.batch);
            typed_buffer bias(test.c_type, test.n);
            fill_random(a, generator);
            fill_random(b, generator);
            fill_random(bias, generator);
            // C is never read: NaN everywhere, pitch padding included, which
            // both computations must leave alone.
            typed_buffer fused(test.c_type, stride_c * test.batch);
            for (size_t i = 0; i < fused.size(); ++i)
              fused.set(i, NAN);
            typed_buffer unfused = fused;
            ASSERT_EQ(mpc_rt_gemm_bias(test.a_type, test.b_type, test.c_type,
                                       trans_a, trans_b, test.m, test.n,
                                       test.k, test.alpha, a.data(), lda,
                                       stride_a, b.data(), ldb, stride_b,
                                       bias.bytes.data(), fused.data(), ldc,
                                       stride_c, test.batch),
                      MPC_OK)
                << mpc_last_error();
            fill_then_accumulate(test, a.data(), lda, stride_a, b.data(), ldb,
                                 stride_b, bias, unfused, ldc, stride_c);
            EXPECT_TRUE(fused.bytes == unfused.bytes);
          }
  });
}

// The bias is added to the fp32 sum before the one rounding to f16, not to
// the rounded product: 1 * 2048 + 1 * 1 = 2049 is a tie between the f16
// neighbours 2048 and 2050 (rounded to even: 2048, and 2048 + 0.5 rounds
// back to 2048), while 2049 + 0.5 rounds to 2050.
TEST(GemmBias, AddsTheBiasBeforeRoundingToHalf) {
  for_each_kernel([&] {
    typed_buffer a(MPC_F16, 2), b(MPC_F16, 2), bias(MPC_F16, 1);
    a.set(0, 1.0f);
    a.set(1, 1.0f);
    b.set(0, 2048.0f);
    b.set(1, 1.0f);
    bias.set(0, 0.5f);
    typed_buffer product(MPC_F16, 1), fused(MPC_F16, 1), unfused(MPC_F16, 1);
    ASSERT_EQ(mpc_rt_gemm(MPC_F16, MPC_F16, MPC_F16, 0, 0, 1, 1, 2, 1.0f,
                          a.data(), 2, 0, b.data(), 1, 0, 0.0f, product.data(),
                          1, 0, 1),
              MPC_OK);
    EXPECT_EQ(product.get(0), 2048.0f);
    // Rounding twice (product, then product + bias) would give 2048.
    EXPECT_EQ(mpc_f32_to_f16_bits(product.get(0) + bias.get(0)),
              mpc_f32_to_f16_bits(2048.0f));
    ASSERT_EQ(mpc_rt_gemm_bias(MPC_F16, MPC_F16, MPC_F16, 0, 0, 1, 1, 2, 1.0f,
                               a.data(), 2, 0, b.data(), 1, 0,
                               bias.bytes.data(), fused.data(), 1, 0, 1),
              MPC_OK);
    EXPECT_EQ(fused.get(0), 2050.0f);
    gemm_case test;
    test.a_type = test.b_type = test.c_type = MPC_F16;
    test.k = 2;
    fill_then_accumulate(test, a.data(), 2, 0, b.data(), 1, 0, bias, unfused,
                         1, 0);
    EXPECT_TRUE(fused.bytes == unfused.bytes);
  });
}

TEST(GemmBias, RejectsANullBias) {
  float a[4] = {}, b[4] = {}, c[4] = {};
  EXPECT_EQ(mpc_rt_gemm_bias(MPC_F32, MPC_F32, MPC_F32, 0, 0, 2, 2, 2, 1.0f, a,
                             2, 0, b, 2, 0, nullptr, c, 2, 0, 1),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mpc_last_error()).find("mpc_rt_gemm_bias: bias is null"),
            std::string::npos)
      << mpc_last_error();
  EXPECT_EQ(mpc_rt_gemm_bias(MPC_F32, MPC_F32, MPC_F32, 0, 0, 2, 2, 2, 1.0f, a,
                             1, 0, b, 2, 0, c, c, 2, 0, 1),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mpc_last_error()).find("mpc_rt_gemm_bias: lda"),
            std::string::npos)
      << mpc_last_error();
}

// ----------------------------------------------------------------------------
// mpc_rt_gemm_bias_gelu: a linear layer's GEMM with its bias and a tanh GELU
// fused, as cuBLASLt's GELU_AUX_BIAS epilogue computes them

// For f32 outputs the fused call gives what the unfused steps gave: C from
// mpc_rt_gemm_bias, and the GELU kernel's value of it (mpc_gelu_tanh).
TEST(GemmBiasGelu, F32EqualsTheGemmThenTheGeluKernelBitForBit) {
  for_each_kernel([&] {
    std::mt19937 generator(11);
    const int64_t m = 37, n = 24, k = 300;
    typed_buffer a(MPC_F32, m * k), b(MPC_F32, n * k), bias(MPC_F32, n);
    fill_random(a, generator);
    fill_random(b, generator);
    fill_random(bias, generator);
    typed_buffer expected(MPC_F32, m * n), pre(MPC_F32, m * n),
        out(MPC_F32, m * n);
    ASSERT_EQ(mpc_rt_gemm_bias(MPC_F32, MPC_F32, MPC_F32, 0, 1, m, n, k, 1.0f,
                               a.data(), k, 0, b.data(), k, 0,
                               bias.bytes.data(), expected.data(), n, 0, 1),
              MPC_OK);
    ASSERT_EQ(mpc_rt_gemm_bias_gelu(MPC_F32, MPC_F32, MPC_F32, 0, 1, m, n, k,
                                    1.0f, a.data(), k, 0, b.data(), k, 0,
                                    bias.bytes.data(), pre.data(), n, 0, 1,
                                    out.data()),
              MPC_OK)
        << mpc_last_error();
    EXPECT_TRUE(pre.bytes == expected.bytes);
    for (int64_t i = 0; i < m * n; ++i) {
      float gelu = mpc_gelu_tanh(expected.get(i));
      ASSERT_EQ(std::memcmp(&out.bytes[i * 4], &gelu, 4), 0) << "element " << i;
    }
  });
}

// Half outputs: both are rounded once from the fp32 sum, the GELU taken of
// the unrounded sum (as the epilogue does), so the output can differ from
// GELU of the rounded GELU input the unfused kernel read.
TEST(GemmBiasGelu, HalfRoundsBothOutputsOnceFromTheSum) {
  for (mpc_dtype half : {MPC_F16, MPC_BF16}) {
    SCOPED_TRACE(type_name(half));
    std::mt19937 generator(12);
    const int64_t m = 64, n = 32, k = 48;
    typed_buffer a(half, m * k), b(half, n * k), bias(half, n);
    fill_random(a, generator);
    fill_random(b, generator);
    fill_random(bias, generator);
    typed_buffer sums(MPC_F32, m * n), pre(half, m * n), out(half, m * n);
    // The fp32 sums by the same kernel: onto the bias, written as f32.
    for (int64_t i = 0; i < m * n; ++i)
      sums.set(i, bias.get(i % n));
    ASSERT_EQ(mpc_rt_gemm(half, half, MPC_F32, 0, 1, m, n, k, 1.0f, a.data(),
                          k, 0, b.data(), k, 0, 1.0f, sums.data(), n, 0, 1),
              MPC_OK);
    ASSERT_EQ(mpc_rt_gemm_bias_gelu(half, half, half, 0, 1, m, n, k, 1.0f,
                                    a.data(), k, 0, b.data(), k, 0,
                                    bias.bytes.data(), pre.data(), n, 0, 1,
                                    out.data()),
              MPC_OK)
        << mpc_last_error();
    typed_buffer expected_pre(half, m * n), expected_out(half, m * n),
        double_rounded(half, m * n);
    for (int64_t i = 0; i < m * n; ++i) {
      expected_pre.set(i, sums.get(i));
      expected_out.set(i, mpc_gelu_tanh(sums.get(i)));
      double_rounded.set(i, mpc_gelu_tanh(expected_pre.get(i)));
    }
    EXPECT_TRUE(pre.bytes == expected_pre.bytes);
    EXPECT_TRUE(out.bytes == expected_out.bytes);
    EXPECT_FALSE(out.bytes == double_rounded.bytes)
        << "no element tells one rounding from two: a weak case";
  }
}

// The bias gradient: C as mpc_rt_gemm writes it, and the f32 sum of each
// row of op(A), for either layout of A and half or f32 operands.
TEST(GemmBiasGradient, WritesTheProductAndTheRowSumsOfOpA) {
  for (mpc_dtype type : {MPC_F32, MPC_F16, MPC_BF16})
    for (int trans_a : {0, 1}) {
      SCOPED_TRACE(testing::Message()
                   << type_name(type) << " trans_a " << trans_a);
      std::mt19937 generator(13);
      const int64_t m = 24, n = 9, k = 300;
      typed_buffer a(type, m * k), b(type, k * n);
      fill_random(a, generator);
      fill_random(b, generator);
      int64_t lda = trans_a ? m : k;
      typed_buffer expected(MPC_F32, m * n), c(MPC_F32, m * n);
      ASSERT_EQ(mpc_rt_gemm(type, type, MPC_F32, trans_a, 0, m, n, k, 1.0f,
                            a.data(), lda, 0, b.data(), n, 0, 0.0f,
                            expected.data(), n, 0, 1),
                MPC_OK);
      std::vector<float> sums(m, -1.0f);
      ASSERT_EQ(mpc_rt_gemm_bgrad(type, type, MPC_F32, trans_a, 0, m, n, k,
                                  1.0f, a.data(), lda, b.data(), n, c.data(), n,
                                  MPC_F32, sums.data()),
                MPC_OK)
          << mpc_last_error();
      // In bf16 (parameters without master weights): the same f32 sums,
      // rounded once to nearest even.
      std::vector<uint16_t> rounded(m);
      ASSERT_EQ(mpc_rt_gemm_bgrad(type, type, MPC_F32, trans_a, 0, m, n, k,
                                  1.0f, a.data(), lda, b.data(), n, c.data(), n,
                                  MPC_BF16, rounded.data()),
                MPC_OK)
          << mpc_last_error();
      for (int64_t i = 0; i < m; ++i)
        EXPECT_EQ(rounded[i], mpc_f32_to_bf16_bits(sums[i])) << "row " << i;
      EXPECT_TRUE(c.bytes == expected.bytes);
      for (int64_t i = 0; i < m; ++i) {
        double reference = 0;
        for (int64_t p = 0; p < k; ++p)
          reference += a.get(trans_a ? p * m + i : i * k + p);
        // 300 terms of magnitude ~1 summed by halves in f32.
        EXPECT_NEAR(sums[i], reference, 1e-4 * (1 + std::abs(reference)))
            << "row " << i;
      }
    }
}

// The GELU gradient: in f32, the GEMM then the gelu_grad kernel's
// expression (dy * mpc_gelu_tanh_grad(x)), bit for bit.
TEST(GemmGeluGradient, F32EqualsTheGemmThenTheGeluGradKernelBitForBit) {
  std::mt19937 generator(17);
  const int64_t m = 21, n = 16, k = 70, ldc = 24;
  typed_buffer a(MPC_F32, m * k), b(MPC_F32, k * n), x(MPC_F32, m * ldc);
  fill_random(a, generator);
  fill_random(b, generator);
  fill_random(x, generator);
  typed_buffer product(MPC_F32, m * n), c(MPC_F32, m * ldc);
  ASSERT_EQ(mpc_rt_gemm(MPC_F32, MPC_F32, MPC_F32, 0, 0, m, n, k, 1.0f,
                        a.data(), k, 0, b.data(), n, 0, 0.0f, product.data(), n,
                        0, 1),
            MPC_OK);
  ASSERT_EQ(mpc_rt_gemm_dgelu(MPC_F32, MPC_F32, MPC_F32, 0, 0, m, n, k, 1.0f,
                              a.data(), k, b.data(), n, x.data(), c.data(),
                              ldc),
            MPC_OK)
      << mpc_last_error();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float expected =
          product.get(i * n + j) * mpc_gelu_tanh_grad(x.get(i * ldc + j));
      ASSERT_EQ(std::memcmp(&c.bytes[(i * ldc + j) * 4], &expected, 4), 0)
          << "element " << i << ", " << j;
    }
  float zero[4] = {};
  EXPECT_EQ(mpc_rt_gemm_dgelu(MPC_F32, MPC_F32, MPC_F32, 0, 0, 2, 2, 2, 1.0f,
                              zero, 2, zero, 2, nullptr, zero, 2),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mpc_last_error(), "mpc_rt_gemm_dgelu: gelu_input is null");
}

TEST(GemmBiasGradient, RejectsANullBiasGradient) {
  float a[4] = {}, b[4] = {}, c[4] = {};
  EXPECT_EQ(mpc_rt_gemm_bgrad(MPC_F32, MPC_F32, MPC_F32, 0, 0, 2, 2, 2, 1.0f, a,
                              2, b, 2, c, 2, MPC_F32, nullptr),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mpc_last_error(), "mpc_rt_gemm_bgrad: bias_grad is null");
  float sums[2];
  EXPECT_EQ(mpc_rt_gemm_bgrad(MPC_F32, MPC_F32, MPC_F32, 0, 0, 2, 2, 2, 1.0f, a,
                              2, b, 2, c, 2, MPC_I32, sums),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mpc_last_error(),
               "mpc_rt_gemm_bgrad: bias_grad_type 3 is not a float type");
}

TEST(GemmBiasGelu, RejectsANullBiasOrOutput) {
  float a[4] = {}, b[4] = {}, c[4] = {}, out[4] = {};
  EXPECT_EQ(mpc_rt_gemm_bias_gelu(MPC_F32, MPC_F32, MPC_F32, 0, 0, 2, 2, 2,
                                  1.0f, a, 2, 0, b, 2, 0, c, c, 2, 0, 1,
                                  nullptr),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mpc_last_error(), "mpc_rt_gemm_bias_gelu: gelu_out is null");
  EXPECT_EQ(mpc_rt_gemm_bias_gelu(MPC_F32, MPC_F32, MPC_F32, 0, 0, 2, 2, 2,
                                  1.0f, a, 2, 0, b, 2, 0, nullptr, c, 2, 0, 1,
                                  out),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mpc_last_error(), "mpc_rt_gemm_bias_gelu: bias is null");
}

// ----------------------------------------------------------------------------
// Benchmark

double gflops(int64_t m, int64_t n, int64_t k, mpc_dtype type, int reps) {
  typed_buffer a(type, m * k), b(type, k * n), c(MPC_F32, m * n);
  std::mt19937 generator(1);
  fill_random(a, generator);
  fill_random(b, generator);
  mpc_rt_gemm(type, type, MPC_F32, 0, 0, m, n, k, 1.0f, a.data(), k, 0,
              b.data(), n, 0, 0.0f, c.data(), n, 0, 1); // warm-up
  double best = 1e30;
  for (int rep = 0; rep < reps; ++rep) {
    auto start = std::chrono::steady_clock::now();
    mpc_rt_gemm(type, type, MPC_F32, 0, 0, m, n, k, 1.0f, a.data(), k, 0,
                b.data(), n, 0, 0.0f, c.data(), n, 0, 1);
    std::chrono::duration<double> elapsed =
        std::chrono::steady_clock::now() - start;
    best = elapsed.count() < best ? elapsed.count() : best;
  }
  return 2.0 * m * n * k / best * 1e-9;
}

TEST(GemmBenchmark, DISABLED_Square512) {
  for (mpcrt::gemm_isa isa : {mpcrt::gemm_isa::avx512, mpcrt::gemm_isa::avx2,
                              mpcrt::gemm_isa::baseline}) {
    mpcrt::gemm_limit_isa(isa);
    if (mpcrt::gemm_current_isa() != isa)
      continue;
    const char *kernel = isa_name(isa);
    for (mpc_dtype type : {MPC_F32, MPC_F16, MPC_BF16})
      std::printf("gemm (%s) %s 512x512x512 -> f32: %.1f GFLOP/s (best of "
                  "10)\n",
                  kernel, type_name(type), gflops(512, 512, 512, type, 10));
    std::printf("gemm (%s) f32 1024x1024x1024: %.1f GFLOP/s (best of 3)\n",
                kernel, gflops(1024, 1024, 1024, MPC_F32, 3));
  }
  mpcrt::gemm_limit_isa(mpcrt::gemm_isa::avx512);
}

} // namespace
