//===- classifier_seed_test.cpp - a loss that seeds its own gradient ------===//
//
// Models whose cross-entropy gradient is seeded with the loss itself
// (models/classifier_loss_*.mlir, issue 36): code generation once fused
// the two into one classifier kernel that read the seed before computing
// it, from a buffer the memory plan never placed. Built with
// MPC_WEIGHTED=0 for the model whose loss is 0 up to rounding, 1 for the
// one whose loss is checked against fp64; each on the cpu target and with
// --emulate-blocks (the cuda target's kernels at their block sizes).
//
//===----------------------------------------------------------------------===//

#include "runtime/mpc_runtime.h"
#include "tests/e2e/compiled_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace {

constexpr int rows = 4, classes = 10;

/// The loss in fp64: l = mean cross-entropy, d = (softmax - onehot) * l /
/// rows, and the model's sum of d (MPC_WEIGHTED=0) or of d * logits.
double reference(const std::vector<float> &x, const std::vector<int32_t> &y,
                 bool weighted) {
  std::vector<double> p(rows * classes);
  double loss = 0;
  for (int r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int c = 0; c < classes; ++c)
      m = std::max(m, double(x[r * classes + c]));
    for (int c = 0; c < classes; ++c)
      s += std::exp(double(x[r * classes + c]) - m);
    for (int c = 0; c < classes; ++c)
      p[r * classes + c] = std::exp(double(x[r * classes + c]) - m) / s;
    loss += std::log(s) + m - x[r * classes + y[r]];
  }
  loss /= rows;
  double total = 0;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < classes; ++c) {
      double d = (p[r * classes + c] - (c == y[r] ? 1.0 : 0.0)) * loss / rows;
      total += weighted ? d * x[r * classes + c] : d;
    }
  return total;
}

TEST(ClassifierSeed, TrainingStepComputesTheLossBeforeItsGradient) {
  mpc_session_options options;
  mpc_session_options_init(&options);
  mpc_session *session = nullptr;
  ASSERT_EQ(mpc_session_create(MPC_MODEL_DESC(), &options, &session), MPC_OK)
      << mpc_last_error();
  std::vector<float> x(rows * classes);
  for (int i = 0; i < rows * classes; ++i)
    x[i] = std::sin(0.71f * static_cast<float>(i)) * 2.0f;
  std::vector<int32_t> y = {3, 0, 9, 5};
  const void *inputs[] = {x.data(), y.data()};
  double expected = reference(x, y, MPC_WEIGHTED);
  // Steps change nothing (no parameters): every one gives the same loss.
  for (int step = 0; step < 3; ++step) {
    float loss = NAN;
    ASSERT_EQ(mpc_train_step(session, inputs, &loss), MPC_OK)
        << mpc_last_error();
    EXPECT_NEAR(loss, expected, 1e-6 + 1e-5 * std::fabs(expected))
        << "step " << step;
    float evalLoss = NAN;
    ASSERT_EQ(mpc_eval(session, inputs, &evalLoss, nullptr), MPC_OK)
        << mpc_last_error();
    EXPECT_NEAR(evalLoss, expected, 1e-6 + 1e-5 * std::fabs(expected));
  }
  if (MPC_WEIGHTED) {
    EXPECT_GT(std::fabs(expected), 1e-3); // the check has teeth
  }
  mpc_session_destroy(session);
}

} // namespace
