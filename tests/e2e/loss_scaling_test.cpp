//===- loss_scaling_test.cpp - dynamic loss scaling, end to end -----------===//
//
// The MLP example at O2 f16 with dynamic loss scaling, trained on a
// learnable task (labels from a fixed random linear teacher). Overflow is
// injected by multiplying a batch's inputs by 1e5: they overflow f16 when
// cast to the half model, and the step's gradients are NaN. (A factor that
// only overflows the weight gradients no longer works: the GEMMs write the
// f32 gradients from their f32 accumulators, see mpc-form-kernels.) Built once
// per scaler configuration (tests/e2e/CMakeLists.txt); the expected trajectory
// comes from the host reference of the scaler (mpc_loss_scaler_update) run with
// the configuration the model was compiled with.
//
//===----------------------------------------------------------------------===//

#include "runtime/loss_scaler.h"
#include "runtime/mpc_model.h"
#include "runtime/session.h"
#include "tests/e2e/teacher_task.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "tests/e2e/compiled_model.h"

namespace {

constexpr float OVERFLOW_FACTOR = 1e5f;

/// A session and its task.
class Trainer {
public:
  Trainer() : task(MPC_MODEL_DESC()) {
    mpc_session_options options;
    mpc_session_options_init(&options);
    options.seed = 5;
    options.learning_rate = 0.02f;
    options.momentum = 0.9f;
    EXPECT_EQ(mpc_session_create(MPC_MODEL_DESC(), &options, &session), MPC_OK)
        << mpc_last_error();
  }
  ~Trainer() { mpc_session_destroy(session); }

  /// One train step on a fresh batch, its inputs times `factor`; with
  /// `poison`, one input is 1e6, inf in f16, so that the step's gradients
  /// are not finite at any loss scale.
  float step(float factor = 1.0f, bool poison = false) {
    task.next();
    for (float &value : task.x)
      value *= factor;
    if (poison)
      task.x[0] = 1e6f;
    float loss = NAN;
    EXPECT_EQ(mpc_train_step(session, task.inputs(), &loss), MPC_OK)
        << mpc_last_error();
    return loss;
  }

  /// mpc_compute_gradients on a fresh batch, its inputs times `factor`.
  void computeGradients(float factor) {
    task.next();
    for (float &value : task.x)
      value *= factor;
    float loss = NAN;
    EXPECT_EQ(mpc_compute_gradients(session, task.inputs(), &loss), MPC_OK)
        << mpc_last_error();
  }

  mpc_training_stats stats() {
    mpc_training_stats result;
    EXPECT_EQ(mpc_get_training_stats(session, &result), MPC_OK);
    return result;
  }

  /// Everything an update may write: the parameter arena (master weights,
  /// state and the half copies the forward pass reads) and the optimizer
  /// slots (momentum).
  std::string updatableBytes() {
    const mpc_model_desc *model = session->model;
    std::string bytes(
        static_cast<const char *>(session->arenas[MPC_ARENA_PARAMS]),
        static_cast<size_t>(model->arena_bytes[MPC_ARENA_PARAMS]));
    bytes.append(
        static_cast<const char *>(session->arenas[MPC_ARENA_OPTIMIZER]),
        static_cast<size_t>(model->control_offset));
    return bytes;
  }

  mpc_session *session = nullptr;

private:
  TeacherTask task;
};

TEST(LossScaling, ModelIsCompiledWithDynamicScaling) {
  EXPECT_EQ(MPC_MODEL_DESC()->loss_scaling.mode, MPC_LOSS_SCALE_DYNAMIC);
}

// Issue 12: mpc_compute_gradients returned overflowed gradients with no
// sign of it. It still leaves the scaler alone (the train step decides), but
// counts the inf and NaN elements, and a clean call resets the count.
TEST(LossScaling, ComputeGradientsReportsOverflow) {
  Trainer trainer;
  ASSERT_NE(trainer.session, nullptr);
  trainer.computeGradients(1.0f);
  EXPECT_EQ(trainer.stats().gradients_nonfinite, 0);
  float scale = trainer.stats().loss_scale;
  trainer.computeGradients(OVERFLOW_FACTOR);
  mpc_training_stats overflowed = trainer.stats();
  EXPECT_GT(overflowed.gradients_nonfinite, 0);
  EXPECT_EQ(overflowed.loss_scale, scale);
  EXPECT_EQ(overflowed.skipped_steps, 0);
  std::printf("gradients at %gx inputs: %lld of them inf or NaN\n",
              OVERFLOW_FACTOR,
              static_cast<long long>(overflowed.gradients_nonfinite));
  trainer.computeGradients(1.0f);
  EXPECT_EQ(trainer.stats().gradients_nonfinite, 0);
}

TEST(LossScaling, OverflowSkipsTheStepBitIdenticallyAndTrainingRecovers) {
  Trainer trainer;
  ASSERT_NE(trainer.session, nullptr);
  const mpc_loss_scaler_config &config = MPC_MODEL_DESC()->loss_scaling;
  float first = trainer.step();
  for (int i = 0; i < 4; ++i)
    trainer.step();
  mpc_training_stats before = trainer.stats();
  ASSERT_EQ(before.skipped_steps, 0) << "the clean steps overflowed";
  ASSERT_EQ(before.optimizer_steps, 5);
  std::string bytes = trainer.updatableBytes();

  float loss = trainer.step(OVERFLOW_FACTOR);
  mpc_training_stats after = trainer.stats();
  // The half inputs overflowed, and with them the loss. (Overflow of the
  // scaled gradients alone, with a finite loss, is e2e.mlp_O2_f16_scaler_*:
  // an initial scale of 2^22.)
  EXPECT_FALSE(std::isfinite(loss)) << loss;
  EXPECT_EQ(after.last_skipped, 1);
  EXPECT_EQ(after.skipped_steps, 1);
  EXPECT_EQ(after.optimizer_steps, 5);
  EXPECT_EQ(mpc_session_step(trainer.session), 5);
  EXPECT_EQ(after.steps_since_growth, 0);
  if (config.hysteresis == 1) {
    EXPECT_EQ(after.loss_scale, before.loss_scale / 2) << "GradScaler halves";
  }
  EXPECT_TRUE(trainer.updatableBytes() == bytes)
      << "a skipped step changed master weights, half copies or momentum";

  // Recovery: the next steps apply and the loss keeps falling.
  trainer.step();
  EXPECT_EQ(trainer.stats().last_skipped, 0);
  double last = 0;
  for (int i = 0; i < 300; ++i) {
    float value = trainer.step();
    if (i >= 280)
      last += value / 20;
  }
  std::printf("overflow at step 6: scale %g -> %g, skipped; loss %.4f at "
              "step 1, %.4f (mean) at steps 288-307\n",
              static_cast<double>(before.loss_scale),
              static_cast<double>(after.loss_scale), first, last);
  EXPECT_LT(last, 0.5 * first) << "first loss " << first;
  if (config.growth_interval > 300) { // the scale never grew into overflow
    EXPECT_EQ(trainer.stats().skipped_steps, 1);
  }
}

TEST(LossScaling, TrajectoryFollowsTheScalerSpecification) {
  // Overflows in runs: single ones, a pair (hysteresis), and a run long
  // enough to reach a minimum scale. Poisoned inputs overflow at any scale;
  // the clean steps must not (their scale stays within what the task's
  // gradients fit in f16, which the assertions check).
  const std::set<int> overflows = {3,  4,  30, 31, 32, 60, 61, 62, 63, 64,
                                   65, 66, 67, 68, 69, 70, 71, 72, 73, 74};
  Trainer trainer;
  ASSERT_NE(trainer.session, nullptr);
  const mpc_loss_scaler_config &config = MPC_MODEL_DESC()->loss_scaling;
  mpc_loss_scaler_state expected;
  ASSERT_EQ(mpc_loss_scaler_init(&config, &expected), MPC_OK);
  for (int step = 1; step <= 120; ++step) {
    bool overflow = overflows.count(step) > 0;
    std::string bytes = trainer.updatableBytes();
    trainer.step(1.0f, overflow);
    int applied = mpc_loss_scaler_update(&config, &expected, overflow);
    mpc_training_stats stats = trainer.stats();
    ASSERT_EQ(stats.loss_scale, expected.scale) << "step " << step;
    ASSERT_EQ(stats.steps_since_growth, expected.growth_tracker)
        << "step " << step;
    ASSERT_EQ(stats.hysteresis_left, expected.hysteresis_left)
        << "step " << step;
    ASSERT_EQ(stats.skipped_steps, expected.total_skipped) << "step " << step;
    ASSERT_EQ(stats.last_skipped, !applied) << "step " << step;
    if (!applied) {
      ASSERT_TRUE(trainer.updatableBytes() == bytes) << "step " << step;
    }
  }
}

} // namespace
