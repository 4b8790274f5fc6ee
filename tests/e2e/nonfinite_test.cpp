//===- nonfinite_test.cpp - `mpc compile --debug-nonfinite` end to end ----===//
//
// One of the overflow models of models/ (chosen at build time with
// -DMPC_MODEL=<name>, for the target -DMPC_TARGET_UNDER_TEST: tests/cuda
// runs it on the mock driver), compiled with --debug-nonfinite or without,
// and what mpc_get_nonfinite_report says after a step; the expectation is
// chosen with -DMPC_E2E_EXPECT=<n>:
//
//   1  forward:  the mpc.scale at FORWARD_LOCATION overflows in the forward
//                pass (f16), the loss is not finite, the step returns MPC_OK
//   2  backward: the forward pass is finite, the gradient of the mpc.scale
//                at BACKWARD_LOCATION overflows (f16, scaled by the dynamic
//                loss scaler's 65536): the step is skipped
//   3  none:     every value stays finite (the same model in f32)
//   4  off:      built without --debug-nonfinite: the report is refused
//   5  healthy:  the GPT example (O2 f16), whose causal mask holds -inf by
//                design, trains with nothing to report
//   6  fp8:      the GPT example (O2 bf16, --fp8=all) with gradients 2^27
//                times larger (a static loss scale): cast to e5m2 unscaled
//                (--fp8-scaling=none), one overflows to inf, and the report
//                names its mpc.quantize in the backward pass; the step is
//                skipped
//   7  fp8 scaled: the same with each tensor scaled from its amax: nothing
//                overflows, nothing to report
//   8  fp8 delayed: the same with delayed scaling (--fp8-margin=1), which
//                starts at scale 1: the first step clips gradients beyond
//                e5m2's 57344 (no inf, nothing non-finite), and the report
//                names the first FP8 GEMM that read a clipped operand; once
//                the scales come from unclipped amaxes, nothing is clipped
//
// (1 also checks a cast of the input %x, at INPUT_LOCATION, that overflows.)
//
// Weights are set to 1 and the bias to 0, every input to MPC_E2E_INPUT and
// every target to 0, so the values are known (see the model files).
//
//===----------------------------------------------------------------------===//

#include "runtime/mpc_runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tests/e2e/compiled_model.h"

namespace {

class Nonfinite : public ::testing::Test {
protected:
  void SetUp() override {
    mpc_session_options options;
    mpc_session_options_init(&options);
    options.target = MPC_TARGET_UNDER_TEST;
    ASSERT_EQ(mpc_session_create(MPC_MODEL_DESC(), &options, &session), MPC_OK)
        << mpc_last_error();
    std::vector<float> ones(64, 1.0f), zeros(8, 0.0f);
    ASSERT_EQ(mpc_set_param(session, "w", ones.data(), ones.size()), MPC_OK);
    ASSERT_EQ(mpc_set_param(session, "b", zeros.data(), zeros.size()), MPC_OK);
    x.assign(32, MPC_E2E_INPUT);
    y.assign(4, 0);
  }
  void TearDown() override { mpc_session_destroy(session); }

  /// One training step; returns its loss.
  float trainStep() {
    const void *inputs[] = {x.data(), y.data()};
    float loss = 0;
    EXPECT_EQ(mpc_train_step(session, inputs, &loss), MPC_OK)
        << mpc_last_error();
    return loss;
  }

  mpc_session *session = nullptr;
  std::vector<float> x;
  std::vector<int32_t> y;
};

#if MPC_E2E_EXPECT >= 5
/// A session of the GPT example (seed 1) and one batch for it: tokens
/// 0..49 repeating, each target the next token.
struct GptBatch {
  std::vector<int32_t> tokens, next;
  const void *inputs[2];
};
mpc_session *createGptSession(GptBatch &batch) {
  mpc_session_options options;
  mpc_session_options_init(&options);
  options.target = MPC_TARGET_UNDER_TEST;
  options.seed = 1;
  mpc_session *session = nullptr;
  EXPECT_EQ(mpc_session_create(MPC_MODEL_DESC(), &options, &session), MPC_OK)
      << mpc_last_error();
  mpc_tensor_info idx, targets;
  EXPECT_EQ(mpc_model_input_info(MPC_MODEL_DESC(), 0, &idx), MPC_OK);
  EXPECT_EQ(mpc_model_input_info(MPC_MODEL_DESC(), 1, &targets), MPC_OK);
  batch.tokens.resize(idx.num_elements);
  batch.next.resize(targets.num_elements);
  for (size_t i = 0; i < batch.tokens.size(); ++i)
    batch.tokens[i] = static_cast<int32_t>(i % 50);
  for (size_t i = 0; i < batch.next.size(); ++i)
    batch.next[i] = static_cast<int32_t>((i + 1) % 50);
  batch.inputs[0] = batch.tokens.data();
  batch.inputs[1] = batch.next.data();
  return session;
}
#endif

#if MPC_E2E_EXPECT == 1
TEST_F(Nonfinite, ForwardOverflowNamesTheOp) {
  // A finite step first (inputs 0 leave the weights as they are), so that
  // the step number is checked.
  std::vector<float> input = x;
  std::fill(x.begin(), x.end(), 0.0f);
  EXPECT_TRUE(std::isfinite(trainStep()));
  x = input;
  float loss = trainStep();
  EXPECT_FALSE(std::isfinite(loss));
  mpc_nonfinite_report report;
  ASSERT_EQ(mpc_get_nonfinite_report(session, &report), MPC_OK)
      << mpc_last_error();
  ASSERT_EQ(report.found, 1);
  EXPECT_STREQ(report.op, "mpc.scale");
  EXPECT_STREQ(report.location, FORWARD_LOCATION);
  EXPECT_EQ(report.backward, 0);
  EXPECT_EQ(report.training, 1);
  EXPECT_EQ(report.step, 1);
  // 80 * 1000 in every element: all 32 are inf, none NaN or finite.
  EXPECT_EQ(report.num_elements, 32);
  EXPECT_EQ(report.inf_count, 32);
  EXPECT_EQ(report.nan_count, 0);
  EXPECT_EQ(report.max_abs_finite, 0.0f);
  EXPECT_EQ(report.outside_half_range, -1); // not a cast
  EXPECT_EQ(report.loss_scale, 64.0f); // --loss-scale=static:64
}

TEST_F(Nonfinite, InputCastCountsValuesBeyondHalfRange) {
  // Half the inputs are beyond f16's range: the cast of %x to f16 (O1) is
  // the first op to make infs, and counts the f32 values that caused them.
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = i % 2 ? 1.0e5f : 1.0f;
  trainStep();
  mpc_nonfinite_report report;
  ASSERT_EQ(mpc_get_nonfinite_report(session, &report), MPC_OK);
  ASSERT_EQ(report.found, 1);
  EXPECT_STREQ(report.op, "mpc.cast");
  EXPECT_STREQ(report.location, INPUT_LOCATION);
  EXPECT_EQ(report.backward, 0);
  EXPECT_EQ(report.inf_count, 16);
  EXPECT_EQ(report.outside_half_range, 16);
  EXPECT_EQ(report.max_abs_finite, 1.0f);
}

TEST_F(Nonfinite, EvalReportsTheForwardOpToo) {
  const void *inputs[] = {x.data(), y.data()};
  float loss = 0;
  ASSERT_EQ(mpc_eval(session, inputs, &loss, nullptr), MPC_OK);
  mpc_nonfinite_report report;
  ASSERT_EQ(mpc_get_nonfinite_report(session, &report), MPC_OK);
  ASSERT_EQ(report.found, 1);
  EXPECT_STREQ(report.op, "mpc.scale");
  EXPECT_STREQ(report.location, FORWARD_LOCATION);
  EXPECT_EQ(report.training, 0);
  EXPECT_EQ(report.step, 0);
}

TEST_F(Nonfinite, AFiniteStepClearsTheReport) {
  EXPECT_FALSE(std::isfinite(trainStep()));
  // The update made the weights NaN: restore them. Inputs of 0 give a
  // finite step, and the report is about the last step only.
  std::vector<float> ones(64, 1.0f), zeros(8, 0.0f);
  ASSERT_EQ(mpc_set_param(session, "w", ones.data(), ones.size()), MPC_OK);
  ASSERT_EQ(mpc_set_param(session, "b", zeros.data(), zeros.size()), MPC_OK);
  std::fill(x.begin(), x.end(), 0.0f);
  EXPECT_TRUE(std::isfinite(trainStep()));
  mpc_nonfinite_report report;
  ASSERT_EQ(mpc_get_nonfinite_report(session, &report), MPC_OK);
  EXPECT_EQ(report.found, 0);
  EXPECT_EQ(report.op, nullptr);
}
#elif MPC_E2E_EXPECT == 2
TEST_F(Nonfinite, BackwardOverflowIsMarkedBackward) {
  float loss = trainStep();
  EXPECT_NEAR(loss, std::log(8.0f), 1e-3f);
  mpc_nonfinite_report report;
  ASSERT_EQ(mpc_get_nonfinite_report(session, &report), MPC_OK)
      << mpc_last_error();
  ASSERT_EQ(report.found, 1);
  EXPECT_STREQ(report.op, "mpc.scale");
  EXPECT_STREQ(report.location, BACKWARD_LOCATION);
  EXPECT_EQ(report.backward, 1);
  EXPECT_EQ(report.step, 0);
  EXPECT_EQ(report.loss_scale, 65536.0f);
  // The logits' gradient, scaled by 65536: (1/8 - 1) / 4 * 65536 = -14336
  // for the targets, 1/32 * 65536 = 2048 for the others; times 1e6 every
  // one is beyond f16's range.
  EXPECT_EQ(report.num_elements, 32);
  EXPECT_EQ(report.inf_count, 32);
  EXPECT_EQ(report.nan_count, 0);
  EXPECT_EQ(report.max_abs_finite, 0.0f);
  // The expected, handled case: the step was skipped and the scale halved.
  mpc_training_stats stats;
  ASSERT_EQ(mpc_get_training_stats(session, &stats), MPC_OK);
  EXPECT_EQ(stats.last_skipped, 1);
  EXPECT_EQ(stats.skipped_steps, 1);
  EXPECT_EQ(stats.loss_scale, 32768.0f);
}
#elif MPC_E2E_EXPECT == 3
TEST_F(Nonfinite, FiniteInF32) {
  float loss = trainStep();
  EXPECT_TRUE(std::isfinite(loss));
  mpc_nonfinite_report report;
  ASSERT_EQ(mpc_get_nonfinite_report(session, &report), MPC_OK)
      << mpc_last_error();
  EXPECT_EQ(report.found, 0);
}
#elif MPC_E2E_EXPECT == 4
TEST_F(Nonfinite, RefusedWithoutTheFlag) {
  trainStep();
  mpc_nonfinite_report report;
  EXPECT_EQ(mpc_get_nonfinite_report(session, &report),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(mpc_last_error(), "without --debug-nonfinite"), nullptr)
      << mpc_last_error();
  EXPECT_EQ(mpc_get_nonfinite_report(nullptr, &report),
            MPC_ERROR_INVALID_ARGUMENT);
}
#elif MPC_E2E_EXPECT == 5
TEST(NonfiniteHealthy, NoFalsePositiveFromTheCausalMask) {
  // The GPT's attention masks scores with -inf by design: that is not a
  // finding, and a healthy model trains with nothing to report.
  GptBatch batch;
  mpc_session *session = createGptSession(batch);
  ASSERT_NE(session, nullptr);
  const void **inputs = batch.inputs;
  float first = 0, loss = 0;
  for (int step = 0; step < 10; ++step) {
    ASSERT_EQ(mpc_train_step(session, inputs, &loss), MPC_OK)
        << mpc_last_error();
    if (step == 0)
      first = loss;
    mpc_nonfinite_report report;
    ASSERT_EQ(mpc_get_nonfinite_report(session, &report), MPC_OK);
    EXPECT_EQ(report.found, 0)
        << "step " << step << ": " << report.op << " at " << report.location;
  }
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_LT(loss, first);
  mpc_session_destroy(session);
}
#elif MPC_E2E_EXPECT == 6 || MPC_E2E_EXPECT == 7
TEST(NonfiniteFp8, AnE5m2OverflowIsNamedUnlessScaled) {
  GptBatch batch;
  mpc_session *session = createGptSession(batch);
  ASSERT_NE(session, nullptr);
  const void **inputs = batch.inputs;
  float loss = 0;
  ASSERT_EQ(mpc_train_step(session, inputs, &loss), MPC_OK) << mpc_last_error();
  EXPECT_TRUE(std::isfinite(loss)); // the forward pass is FP8 too, in range
  mpc_nonfinite_report report;
  ASSERT_EQ(mpc_get_nonfinite_report(session, &report), MPC_OK)
      << mpc_last_error();
  mpc_training_stats stats;
  ASSERT_EQ(mpc_get_training_stats(session, &stats), MPC_OK);
#if MPC_E2E_EXPECT == 6
  ASSERT_EQ(report.found, 1);
  EXPECT_STREQ(report.op, "mpc.quantize");
  // A quantize is located at the tensor it quantizes: the first e5m2 one
  // is the gradient leaving the final layer norm, the first backward GEMM
  // in FP8 (the classifier's stay bf16).
  EXPECT_STREQ(report.location, "gpt.mlir:151:9");
  EXPECT_EQ(report.backward, 1);
  EXPECT_GT(report.inf_count, 0);
  EXPECT_EQ(report.nan_count, 0);
  EXPECT_EQ(report.loss_scale, 134217728.0f);
  EXPECT_EQ(stats.last_skipped, 1);
  std::printf("first overflow: %s at %s, %lld of %lld elements inf\n",
              report.op, report.location,
              static_cast<long long>(report.inf_count),
              static_cast<long long>(report.num_elements));
#else
  EXPECT_EQ(report.found, 0) << report.op << " at " << report.location;
  EXPECT_EQ(stats.last_skipped, 0);
#endif
  mpc_session_destroy(session);
}
#elif MPC_E2E_EXPECT == 8
TEST(NonfiniteFp8, TheFirstSaturatedGemmIsNamed) {
  GptBatch batch;
  mpc_session *session = createGptSession(batch);
  ASSERT_NE(session, nullptr);
  const void **inputs = batch.inputs;
  float loss = 0;
  ASSERT_EQ(mpc_train_step(session, inputs, &loss), MPC_OK) << mpc_last_error();
  EXPECT_TRUE(std::isfinite(loss));
  mpc_nonfinite_report report;
  ASSERT_EQ(mpc_get_nonfinite_report(session, &report), MPC_OK)
      << mpc_last_error();
  // Clipped, not overflowed: nothing is non-finite, and the step applies.
  EXPECT_EQ(report.found, 0) << report.op << " at " << report.location;
  mpc_training_stats stats;
  ASSERT_EQ(mpc_get_training_stats(session, &stats), MPC_OK);
  EXPECT_EQ(stats.last_skipped, 0);
  ASSERT_EQ(report.fp8_saturated, 1);
  EXPECT_STREQ(report.fp8_gemm_op, "mpc.scaled_matmul");
  // The first backward GEMM in FP8: the last block's MLP projection's
  // input gradient, which reads the gradient leaving the final layer norm
  // (its mpc.quantize is located there) as its lhs.
  EXPECT_STREQ(report.fp8_gemm_location, "gpt.mlir:144:13");
  EXPECT_STREQ(report.fp8_tensor_location, "gpt.mlir:151:9");
  EXPECT_EQ(report.fp8_backward, 1);
  EXPECT_STREQ(report.fp8_operand, "lhs");
  EXPECT_STREQ(report.fp8_format, "e5m2");
  EXPECT_EQ(report.fp8_scale, 1.0f); // no history yet
  EXPECT_EQ(report.training, 1);
  EXPECT_EQ(report.step, 0);
  EXPECT_EQ(report.loss_scale, 134217728.0f);
  EXPECT_GT(report.fp8_amax, 57344.0f);
  EXPECT_GT(report.fp8_saturated_count, 0);
  EXPECT_LE(report.fp8_saturated_count, report.fp8_num_elements);
  // Every tensor's clipped elements, this one's among them.
  EXPECT_GE(stats.fp8_saturated, report.fp8_saturated_count);
  std::printf("first saturated FP8 GEMM: %s at %s (%s, %s, tensor at %s), "
              "%lld of %lld elements clipped, amax %g at scale %g\n",
              report.fp8_gemm_op, report.fp8_gemm_location, report.fp8_operand,
              report.fp8_format, report.fp8_tensor_location,
              static_cast<long long>(report.fp8_saturated_count),
              static_cast<long long>(report.fp8_num_elements), report.fp8_amax,
              report.fp8_scale);
  // The second step scales the first tensor from its amax, but the GEMMs
  // below it in the backward pass had their amaxes from gradients computed
  // from clipped values: the next GEMM down (the MLP's first layer) clips
  // once. From then on (--fp8-margin=1) nothing does, and each call's
  // report says so: it is about the last call only.
  ASSERT_EQ(mpc_train_step(session, inputs, &loss), MPC_OK);
  ASSERT_EQ(mpc_get_nonfinite_report(session, &report), MPC_OK);
  ASSERT_EQ(report.fp8_saturated, 1);
  EXPECT_STREQ(report.fp8_gemm_location, "gpt.mlir:141:12");
  EXPECT_EQ(report.fp8_backward, 1);
  EXPECT_EQ(report.step, 1);
  for (int step = 2; step < 10; ++step) {
    ASSERT_EQ(mpc_train_step(session, inputs, &loss), MPC_OK);
    ASSERT_EQ(mpc_get_nonfinite_report(session, &report), MPC_OK);
    EXPECT_EQ(report.fp8_saturated, 0)
        << "step " << step << ": " << report.fp8_gemm_location << ", "
        << report.fp8_saturated_count << " clipped";
    EXPECT_EQ(report.fp8_gemm_op, nullptr);
    ASSERT_EQ(mpc_get_training_stats(session, &stats), MPC_OK);
    EXPECT_EQ(stats.fp8_saturated, 0);
  }
  mpc_session_destroy(session);
}
#else
#error "MPC_E2E_EXPECT must be 1 to 8"
#endif

} // namespace
