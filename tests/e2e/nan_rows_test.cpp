//===- nan_rows_test.cpp - a NaN in a row comes out of that row -----------===//
//
// tests/e2e/models/nan_rows.mlir evaluated with one NaN in row 1 of its
// input: every reduction family (reduce_max, reduce_sum, reduce_mean,
// softmax, log_softmax, layer_norm, cross_entropy) must give NaN for that
// row, as torch does (torch.amax included), and for the other rows what it
// gives without the NaN, bit for bit. Built for the cpu target (one thread
// a block) and with --emulate-blocks (256 threads a block, the cuda code's
// block reductions): a block maximum that combined warps with fmaxf dropped
// the NaN there.
//
//===----------------------------------------------------------------------===//

#include "runtime/mpc_runtime.h"
#include "tests/e2e/compiled_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int rows = 4, columns = 1000, nanRow = 1;

struct Outputs {
  float loss = 0;
  std::vector<float> max = std::vector<float>(rows);
  std::vector<float> sum = std::vector<float>(rows);
  std::vector<float> mean = std::vector<float>(rows);
  std::vector<float> softmax = std::vector<float>(rows * columns);
  std::vector<float> logSoftmax = std::vector<float>(rows * columns);
  std::vector<float> normed = std::vector<float>(rows * columns);
};

Outputs evaluate(mpc_session *session, const std::vector<float> &x) {
  std::vector<int32_t> y = {3, 1, 4, 1};
  const void *inputs[] = {x.data(), y.data()};
  Outputs out;
  void *const outputs[] = {out.max.data(),        out.sum.data(),
                           out.mean.data(),       out.softmax.data(),
                           out.logSoftmax.data(), out.normed.data()};
  EXPECT_EQ(mpc_eval(session, inputs, &out.loss, outputs), MPC_OK)
      << mpc_last_error();
  return out;
}

/// Row `nanRow` all NaN, the others bit for bit as `clean`.
void expectNaNRowOnly(const char *what, const std::vector<float> &got,
                      const std::vector<float> &clean, int width) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < width; ++c) {
      float value = got[r * width + c];
      if (r == nanRow) {
        EXPECT_TRUE(std::isnan(value))
            << what << " row " << r << " element " << c << ": " << value;
      } else {
        EXPECT_EQ(std::memcmp(&value, &clean[r * width + c], 4), 0)
            << what << " row " << r << " element " << c << ": " << value
            << " with a NaN in another row, " << clean[r * width + c]
            << " without";
      }
    }
}

TEST(NaNRows, EveryReductionFamilyKeepsTheNaNInItsRow) {
  mpc_session_options options;
  mpc_session_options_init(&options);
  mpc_session *session = nullptr;
  ASSERT_EQ(mpc_session_create(MPC_MODEL_DESC(), &options, &session), MPC_OK)
      << mpc_last_error();
  std::vector<float> x(rows * columns);
  for (int i = 0; i < rows * columns; ++i)
    x[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
  Outputs clean = evaluate(session, x);
  ASSERT_TRUE(std::isfinite(clean.loss));
  // Where the NaN lands in the row: thread 0's first element, a middle
  // thread's, the last thread's last (at 256 threads a block).
  for (int column : {0, 617, columns - 1}) {
    SCOPED_TRACE("NaN at column " + std::to_string(column));
    std::vector<float> poisoned = x;
    poisoned[nanRow * columns + column] = NAN;
    Outputs got = evaluate(session, poisoned);
    EXPECT_TRUE(std::isnan(got.loss)) << got.loss;
    expectNaNRowOnly("reduce_max", got.max, clean.max, 1);
    expectNaNRowOnly("reduce_sum", got.sum, clean.sum, 1);
    expectNaNRowOnly("reduce_mean", got.mean, clean.mean, 1);
    expectNaNRowOnly("softmax", got.softmax, clean.softmax, columns);
    expectNaNRowOnly("log_softmax", got.logSoftmax, clean.logSoftmax, columns);
    expectNaNRowOnly("layer_norm", got.normed, clean.normed, columns);
  }
  mpc_session_destroy(session);
}

} // namespace
