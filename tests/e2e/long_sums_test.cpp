//===- long_sums_test.cpp - long f32 sums on the cpu target ---------------===//
//
// Built once per model (-DMPC_MODEL): tests/e2e/models/conv_weight_sum.mlir
// at O2 bf16 and O1 f16, bias_sum.mlir at O0, and tensor_sums.mlir at O0
// on the cpu target and under the block emulator.
//
// ConvWeightSum: dW of a convolution over 256 images sums 16384 products per
// element. Its relative error against an fp64 reference must be within 2x
// that of summing exactly and rounding once to the half type, which is what
// fp32 accumulation with one rounding gives (fp32's own rounding is far
// below the half type's). The half-typed running sum, rounded after every
// image, was 22x worse at O2 bf16.
//
// BiasSum: the mean cross-entropy and the bias gradient are each a
// 9216-term sum of equal f32 values, which must come out within 1e-6 of the
// exact result (a sequential f32 sum was 1.1e-4 off).
//
// TensorSums: reductions of 40000 to 100000 terms to one to three outputs,
// split over blocks, give exact sums of integers.
//
//===----------------------------------------------------------------------===//

#include "runtime/half.h"
#include "runtime/mpc_runtime.h"

#include "tests/e2e/compiled_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace {

mpc_session *createSession() {
  mpc_session_options options;
  mpc_session_options_init(&options);
  mpc_session *session = nullptr;
  EXPECT_EQ(mpc_session_create(MPC_MODEL_DESC(), &options, &session), MPC_OK)
      << mpc_last_error();
  return session;
}

size_t elementsOf(const mpc_tensor_info &info) {
  size_t n = 1;
  for (int32_t d = 0; d < info.rank; ++d)
    n *= static_cast<size_t>(info.shape[d]);
  return n;
}

#ifdef MPC_E2E_HALF
/// `value` rounded to the half type the model computes in, so that the
/// values the kernels see are the test's.
float toHalf(float value) {
  uint16_t bits = 0;
  mpc_store_from_f32(MPC_E2E_HALF, &bits, 0, value);
  return mpc_load_as_f32(MPC_E2E_HALF, &bits, 0);
}

TEST(ConvWeightSum, WithinTwiceRoundingOnce) {
  mpc_session *session = createSession();
  ASSERT_NE(session, nullptr);
  mpc_tensor_info xInfo, rInfo, wInfo;
  ASSERT_EQ(mpc_model_input_info(MPC_MODEL_DESC(), 0, &xInfo), MPC_OK);
  ASSERT_EQ(mpc_model_input_info(MPC_MODEL_DESC(), 1, &rInfo), MPC_OK);
  ASSERT_EQ(mpc_model_param_info(MPC_MODEL_DESC(), 0, &wInfo), MPC_OK);
  const int64_t n = xInfo.shape[0], c = xInfo.shape[1], h = xInfo.shape[2],
                w = xInfo.shape[3], o = wInfo.shape[0], k = wInfo.shape[2];
  std::vector<float> x(elementsOf(xInfo)), r(elementsOf(rInfo));
  // Positive inputs, so that the sums do not cancel and a relative error
  // measures the rounding, not the cancellation.
  std::mt19937 random(7);
  std::uniform_real_distribution<float> uniform(0.5f, 1.5f);
  for (float &v : x)
    v = toHalf(uniform(random));
  for (float &v : r)
    v = toHalf(uniform(random));
  const void *inputs[] = {x.data(), r.data()};
  float loss = 0;
  ASSERT_EQ(mpc_compute_gradients(session, inputs, &loss), MPC_OK)
      << mpc_last_error();
  std::vector<float> grad(elementsOf(wInfo));
  ASSERT_EQ(mpc_get_gradient(session, wInfo.name, grad.data(), grad.size()),
            MPC_OK)
      << mpc_last_error();

  // dW[oc, ic, ky, kx] = sum over images and output pixels of
  // r[n, oc, y, x] * x[n, ic, y + ky - 1, x + kx - 1] (padding 1, stride 1).
  double errorMpc = 0, errorOnce = 0, norm = 0;
  for (int64_t oc = 0; oc < o; ++oc)
    for (int64_t ic = 0; ic < c; ++ic)
      for (int64_t ky = 0; ky < k; ++ky)
        for (int64_t kx = 0; kx < k; ++kx) {
          double exact = 0;
          for (int64_t b = 0; b < n; ++b)
            for (int64_t y = 0; y < h; ++y)
              for (int64_t xx = 0; xx < w; ++xx) {
                int64_t iy = y + ky - 1, ix = xx + kx - 1;
                if (iy < 0 || iy >= h || ix < 0 || ix >= w)
                  continue;
                exact += double(r[((b * o + oc) * h + y) * w + xx]) *
                         x[((b * c + ic) * h + iy) * w + ix];
              }
          float got = grad[((oc * c + ic) * k + ky) * k + kx];
          float once = toHalf(static_cast<float>(exact));
          errorMpc += (got - exact) * (got - exact);
          errorOnce += (once - exact) * (once - exact);
          norm += exact * exact;
        }
  double relativeMpc = std::sqrt(errorMpc / norm);
  double relativeOnce = std::sqrt(errorOnce / norm);
  std::printf("relative error of dW: mpc %.3g, exact sum rounded once %.3g "
              "(ratio %.2f)\n",
              relativeMpc, relativeOnce, relativeMpc / relativeOnce);
  EXPECT_GT(relativeOnce, 0.0) << "the inputs round to nothing: no test";
  EXPECT_LE(relativeMpc, 2 * relativeOnce);
  mpc_session_destroy(session);
}
#endif // MPC_E2E_HALF

#ifdef MPC_E2E_BIAS_SUM
TEST(BiasSum, EqualTermsSumWithinOneMillionth) {
  mpc_session *session = createSession();
  ASSERT_NE(session, nullptr);
  mpc_tensor_info xInfo, yInfo;
  ASSERT_EQ(mpc_model_input_info(MPC_MODEL_DESC(), 0, &xInfo), MPC_OK);
  ASSERT_EQ(mpc_model_input_info(MPC_MODEL_DESC(), 1, &yInfo), MPC_OK);
  std::vector<float> x(elementsOf(xInfo), 1.0f);
  std::vector<int32_t> labels(elementsOf(yInfo), 0);
  const void *inputs[] = {x.data(), labels.data()};
  float loss = 0;
  ASSERT_EQ(mpc_compute_gradients(session, inputs, &loss), MPC_OK)
      << mpc_last_error();
  std::vector<float> bias(4);
  ASSERT_EQ(mpc_get_gradient(session, "b", bias.data(), 4), MPC_OK)
      << mpc_last_error();
  std::printf("loss %.9g (ln 4 = %.9g), bias gradient %.9g %.9g %.9g %.9g\n",
              loss, std::log(4.0), bias[0], bias[1], bias[2], bias[3]);
  EXPECT_NEAR(loss, std::log(4.0), 1e-6 * std::log(4.0));
  EXPECT_NEAR(bias[0], -0.75, 1e-6 * 0.75);
  for (int j = 1; j < 4; ++j)
    EXPECT_NEAR(bias[j], 0.25, 1e-6 * 0.25) << "class " << j;
  mpc_session_destroy(session);
}
#endif // MPC_E2E_BIAS_SUM

#ifdef MPC_E2E_TENSOR_SUMS
/// Long reductions to few outputs, split over blocks: every slice must be
/// summed once, into its own output. Integer terms keep every sum exact in
/// f32, so the loss must be exact but for the mean's rounding.
TEST(TensorSums, SplitReductionsSumEverySliceOnce) {
  mpc_session *session = createSession();
  ASSERT_NE(session, nullptr);
  const int64_t rows = 3, columns = 40000, count = 100000;
  std::vector<float> x(rows * columns), y(columns * rows), z(count);
  double exact = 0, total = 0;
  const float r[3] = {1.0f, 2.0f, 4.0f};
  double sums[3] = {0, 0, 0};
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < columns; ++j) {
      x[i * columns + j] = float((i * 7 + j * 3) % 3 + (j % 5 == 0)); // 0-3
      y[j * rows + i] = float((i + j * 5) % 4 == 0);
      sums[i] += x[i * columns + j] + y[j * rows + i];
      total += x[i * columns + j];
    }
  for (int64_t k = 0; k < count; ++k)
    z[k] = float((k * 7919) % 100003) / 1000.0f; // distinct, largest inside
  double largest = 0;
  int64_t argmax = 0;
  for (int64_t k = 0; k < count; ++k)
    if (z[k] > largest)
      largest = z[k], argmax = k;
  for (int i = 0; i < 3; ++i)
    exact += r[i] * sums[i];
  exact += largest + 65536.0 * total / double(rows * columns);
  ASSERT_EQ(mpc_set_param(session, "x", x.data(), x.size()), MPC_OK);
  ASSERT_EQ(mpc_set_param(session, "y", y.data(), y.size()), MPC_OK);
  ASSERT_EQ(mpc_set_param(session, "z", z.data(), z.size()), MPC_OK);
  const void *inputs[] = {r};
  float loss = 0;
  ASSERT_EQ(mpc_compute_gradients(session, inputs, &loss), MPC_OK)
      << mpc_last_error();
  std::printf("loss %.9g, exact %.9g (sums %g %g %g, max %g at %lld)\n", loss,
              exact, sums[0], sums[1], sums[2], largest, (long long)argmax);
  // Within 2 ulps: a slice missed or counted twice moves it by hundreds.
  EXPECT_NEAR(loss, exact, 2.5e-7 * std::fabs(exact));
  // d loss / dz: 1 at the maximum, 0 elsewhere.
  std::vector<float> dz(count);
  ASSERT_EQ(mpc_get_gradient(session, "z", dz.data(), dz.size()), MPC_OK);
  for (int64_t k = 0; k < count; ++k)
    ASSERT_EQ(dz[k], k == argmax ? 1.0f : 0.0f) << "z[" << k << "]";
  mpc_session_destroy(session);
}
#endif // MPC_E2E_TENSOR_SUMS

} // namespace
