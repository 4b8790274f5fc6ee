//===- fp8_scaling_test.cpp - delayed FP8 scaling, end to end -------------===//
//
// The MLP example at O2 bf16 with --fp8=all --fp8-scaling=delayed (history
// MPC_FP8_HISTORY, margin MPC_FP8_MARGIN), trained on a learnable task.
// fc1 runs in FP8 (fc2 is the classifier): its input x and weight are e4m3
// columns of the state `fp8.scaling`, its output gradient the e5m2 one.
// After every step the table is checked against a reference written here
// from mpc.quantize's specification:
//   - x's and the weight's newest amax are those of their bf16 values this
//     step (x as fed; the weight's half copy, bf16 of its master before the
//     step), the gradient's is positive and finite;
//   - each history moved by one, the newest first, and each scale is the
//     largest power of two that keeps the history's largest amax within
//     the format (448, 57344), less the margin;
//   - x's and the weight's saturated elements are those beyond the format
//     at the scale the step began with;
//   - the step's amax and saturation rows are zero again.
// A step with a NaN input (its gradients NaN: skipped) leaves the scales
// and histories as they were, and the quantizations use the table: a
// scale set by hand changes the loss, and one too large saturates what
// the reference counts, which mpc_get_training_stats sums.
//
//===----------------------------------------------------------------------===//

#include "runtime/half.h"
#include "runtime/mpc_runtime.h"
#include "tests/e2e/teacher_task.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "tests/e2e/compiled_model.h"

namespace {

constexpr int64_t kHistory = MPC_FP8_HISTORY;
constexpr int kMargin = MPC_FP8_MARGIN;
constexpr int64_t kColumns = 3; // x, fc1.weight (e4m3); fc1's dy (e5m2)
constexpr int64_t kRows = 4 + kHistory;

float toBf16(float value) {
  return mpc_bf16_bits_to_f32(mpc_f32_to_bf16_bits(value));
}

float bf16Amax(const std::vector<float> &values) {
  float amax = 0;
  for (float value : values)
    amax = std::max(amax, std::fabs(toBf16(value)));
  return amax;
}

/// Elements of `values` (as bf16) beyond e4m3's 448 once scaled by 2^e.
float saturatedAt(const std::vector<float> &values, float e) {
  float count = 0;
  for (float value : values)
    count += std::ldexp(std::fabs(double(toBf16(value))), int(e)) > 448.0;
  return count;
}

/// The spec's scale exponent: the largest e with m · 2^e <= largest (0
/// where m is 0 or not finite), at most 127, less the margin, at least
/// -126. Searched in double, where m · 2^e is exact.
float referenceExponent(double m, double largest) {
  if (!(m > 0) || !std::isfinite(m) || m > 3.40282347e38)
    return 0;
  int e = 127;
  while (std::ldexp(m, e) > largest)
    --e;
  return static_cast<float>(std::max(e - kMargin, -126));
}

class Fp8Trainer {
public:
  Fp8Trainer() : task(MPC_MODEL_DESC()) {
    mpc_session_options options;
    mpc_session_options_init(&options);
    options.seed = 3;
    options.learning_rate = 0.02f;
    options.momentum = 0.9f;
    EXPECT_EQ(mpc_session_create(MPC_MODEL_DESC(), &options, &session), MPC_OK)
        << mpc_last_error();
  }
  ~Fp8Trainer() { mpc_session_destroy(session); }

  std::vector<float> table() {
    std::vector<float> values(static_cast<size_t>(kRows * kColumns));
    EXPECT_EQ(
        mpc_get_param(session, "fp8.scaling", values.data(), values.size()),
        MPC_OK)
        << mpc_last_error();
    return values;
  }
  std::vector<float> weight() {
    std::vector<float> values(256 * 784);
    EXPECT_EQ(
        mpc_get_param(session, "fc1.weight", values.data(), values.size()),
        MPC_OK);
    return values;
  }
  float step(bool poison = false) {
    if (poison)
      task.x[0] = NAN;
    float loss = NAN;
    EXPECT_EQ(mpc_train_step(session, task.inputs(), &loss), MPC_OK)
        << mpc_last_error();
    return loss;
  }

  mpc_session *session = nullptr;
  TeacherTask task;
};

float at(const std::vector<float> &table, int64_t row, int64_t column) {
  return table[static_cast<size_t>(row * kColumns + column)];
}

TEST(Fp8DelayedScaling, TableFollowsTheReference) {
  Fp8Trainer trainer;
  ASSERT_NE(trainer.session, nullptr);
  std::vector<float> before = trainer.table();
  for (float value : before)
    ASSERT_EQ(value, 0.0f) << "the table starts at zeros: scales of 1";
  int64_t xColumn = -1;
  // More steps than the history holds, so amaxes leave it.
  for (int step = 0; step < 3 * kHistory + 2; ++step) {
    trainer.task.next();
    std::vector<float> weight = trainer.weight();
    float xAmax = bf16Amax(trainer.task.x);
    float weightAmax = bf16Amax(weight);
    float loss = trainer.step();
    ASSERT_TRUE(std::isfinite(loss)) << "step " << step;
    std::vector<float> after = trainer.table();
    // Which e4m3 column is x's: the one whose newest amax is x's.
    if (xColumn < 0)
      xColumn = at(after, 4, 0) == xAmax ? 0 : 1;
    int64_t weightColumn = 1 - xColumn;
    EXPECT_EQ(at(after, 4, xColumn), xAmax) << "step " << step;
    EXPECT_EQ(at(after, 4, weightColumn), weightAmax) << "step " << step;
    EXPECT_EQ(at(after, 3, xColumn),
              saturatedAt(trainer.task.x, at(before, 0, xColumn)))
        << "step " << step;
    EXPECT_EQ(at(after, 3, weightColumn),
              saturatedAt(weight, at(before, 0, weightColumn)))
        << "step " << step;
    float gradientAmax = at(after, 4, 2);
    EXPECT_TRUE(gradientAmax > 0 && std::isfinite(gradientAmax))
        << "step " << step << ": " << gradientAmax;
    for (int64_t c = 0; c < kColumns; ++c) {
      EXPECT_EQ(at(after, 1, c), 0.0f) << "step " << step << " column " << c;
      EXPECT_EQ(at(after, 2, c), 0.0f) << "step " << step << " column " << c;
      double largest = c < 2 ? 448.0 : 57344.0;
      double historyMax = 0;
      for (int64_t h = 0; h < kHistory; ++h) {
        float expected = h == 0 ? at(after, 4, c) : at(before, 3 + h, c);
        EXPECT_EQ(at(after, 4 + h, c), expected)
            << "step " << step << " column " << c << " history " << h;
        historyMax = std::max(historyMax, double(at(after, 4 + h, c)));
      }
      EXPECT_EQ(at(after, 0, c), referenceExponent(historyMax, largest))
          << "step " << step << " column " << c << ": history max "
          << historyMax;
    }
    before = after;
  }
  // The scales did something: x (normal noise, amax about 4) is scaled by
  // 2^6 in e4m3 (448 / 4 = 112), less the margin.
  EXPECT_GT(at(before, 0, xColumn), 0.0f);
}

TEST(Fp8DelayedScaling, SkippedStepLeavesTheTable) {
  Fp8Trainer trainer;
  ASSERT_NE(trainer.session, nullptr);
  for (int step = 0; step < 3; ++step) {
    trainer.task.next();
    trainer.step();
  }
  std::vector<float> before = trainer.table();
  mpc_training_stats stats;
  ASSERT_EQ(mpc_get_training_stats(trainer.session, &stats), MPC_OK);
  int64_t skipped = stats.skipped_steps;
  trainer.task.next();
  trainer.step(/*poison=*/true);
  ASSERT_EQ(mpc_get_training_stats(trainer.session, &stats), MPC_OK);
  ASSERT_EQ(stats.skipped_steps, skipped + 1) << "the NaN step was applied";
  std::vector<float> after = trainer.table();
  for (size_t i = 0; i < after.size(); ++i) {
    if (i / kColumns == 3) // the last step's saturations: this one's
      continue;
    EXPECT_EQ(std::memcmp(&after[i], &before[i], sizeof(float)), 0)
        << "element " << i << ": " << before[i] << " -> " << after[i];
  }
  // The next step applies and moves the history again.
  trainer.task.next();
  EXPECT_TRUE(std::isfinite(trainer.step()));
  EXPECT_NE(trainer.table(), before);
}

TEST(Fp8DelayedScaling, QuantizationsUseTheTable) {
  // Two sessions alike; in one, x's scale is set 2^-20 (a tiny scale: x's
  // e4m3 copy loses most of its values to zero), so its loss differs.
  Fp8Trainer plain, rescaled;
  ASSERT_NE(plain.session, nullptr);
  ASSERT_NE(rescaled.session, nullptr);
  std::vector<float> table = rescaled.table();
  for (int64_t c = 0; c < 2; ++c)
    table[static_cast<size_t>(c)] = -20.0f;
  ASSERT_EQ(mpc_set_param(rescaled.session, "fp8.scaling", table.data(),
                          table.size()),
            MPC_OK)
      << mpc_last_error();
  plain.task.next();
  rescaled.task.next();
  float expected = plain.step(), loss = rescaled.step();
  EXPECT_NE(loss, expected);
  // And the next step's history is as the reference says all the same.
  EXPECT_EQ(rescaled.table()[static_cast<size_t>(4 * kColumns)],
            plain.table()[static_cast<size_t>(4 * kColumns)]);
}

TEST(Fp8DelayedScaling, SaturationsAreCounted) {
  // x's scale set to 2^8 by hand: x (normal noise, as bf16) beyond
  // 448 / 256 = 1.75 saturates, about 8 % of it.
  Fp8Trainer trainer;
  ASSERT_NE(trainer.session, nullptr);
  mpc_training_stats stats;
  ASSERT_EQ(mpc_get_training_stats(trainer.session, &stats), MPC_OK);
  EXPECT_EQ(stats.fp8_saturated, 0);
  trainer.task.next();
  trainer.step();
  std::vector<float> table = trainer.table();
  int64_t xColumn = at(table, 4, 0) == bf16Amax(trainer.task.x) ? 0 : 1;
  table[static_cast<size_t>(xColumn)] = 8.0f;
  ASSERT_EQ(
      mpc_set_param(trainer.session, "fp8.scaling", table.data(), table.size()),
      MPC_OK);
  trainer.task.next();
  float expected = saturatedAt(trainer.task.x, 8.0f);
  ASSERT_GT(expected, 0.0f);
  EXPECT_TRUE(std::isfinite(trainer.step())) << "saturated, not inf";
  table = trainer.table();
  EXPECT_EQ(at(table, 3, xColumn), expected);
  ASSERT_EQ(mpc_get_training_stats(trainer.session, &stats), MPC_OK);
  float total = 0;
  for (int64_t c = 0; c < kColumns; ++c)
    total += at(table, 3, c);
  EXPECT_EQ(stats.fp8_saturated, static_cast<int64_t>(total));
  EXPECT_GE(stats.fp8_saturated, static_cast<int64_t>(expected));
}

} // namespace
