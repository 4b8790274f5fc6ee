//===- nonfinite_update_test.cpp - no update writes inf or NaN ------------===//
//
// The MLP example (-DMPC_MODEL) trained two steps, then given a batch with
// one NaN input: its loss and gradients are NaN. With the default
// `mpc compile --nonfinite-updates=skip` the optimizer step is skipped at
// every precision (at O0 and O2 bf16, where no loss scaler checks the
// gradients, as at O2 f16 where the dynamic scaler does): parameters, half
// copies and moments stay bit-identical, the skip is counted, and training
// goes on from there. Built with -DMPC_EXPECT_APPLIED (a model compiled with
// --nonfinite-updates=apply), the step is applied as torch.optim applies
// it, and NaN reaches the weights.
//
//===----------------------------------------------------------------------===//

#include "runtime/mpc_runtime.h"
#include "runtime/session.h"
#include "tests/e2e/compiled_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr int batch = 64, features = 784, classes = 10;

struct Batch {
  std::vector<float> x = std::vector<float>(batch * features);
  std::vector<int32_t> y = std::vector<int32_t>(batch);
};

Batch makeBatch(unsigned seed) {
  std::mt19937 random(seed);
  std::normal_distribution<float> normal;
  Batch b;
  for (float &v : b.x)
    v = normal(random);
  for (int32_t &label : b.y)
    label = static_cast<int32_t>(random() % classes);
  return b;
}

float step(mpc_session *session, const Batch &b) {
  const void *inputs[] = {b.x.data(), b.y.data()};
  float loss = 0;
  EXPECT_EQ(mpc_train_step(session, inputs, &loss), MPC_OK) << mpc_last_error();
  return loss;
}

/// The weights (master weights, state and half copies: the whole params
/// arena) and the optimizer's moments (its arena up to the control block).
std::string weightsAndMoments(const mpc_session *session) {
  const mpc_model_desc *model = session->model;
  std::string bytes(
      static_cast<const char *>(session->arenas[MPC_ARENA_PARAMS]),
      static_cast<size_t>(model->arena_bytes[MPC_ARENA_PARAMS]));
  bytes.append(static_cast<const char *>(session->arenas[MPC_ARENA_OPTIMIZER]),
               static_cast<size_t>(model->control_offset));
  return bytes;
}

int64_t nonfiniteParameterValues(mpc_session *session) {
  std::vector<float> values;
  int64_t count = 0;
  const mpc_model_desc *model = session->model;
  for (int32_t i = 0; i < mpc_model_num_params(model); ++i) {
    mpc_tensor_info info;
    EXPECT_EQ(mpc_model_param_info(model, i, &info), MPC_OK);
    values.resize(static_cast<size_t>(info.num_elements));
    EXPECT_EQ(mpc_get_param(session, info.name, values.data(), values.size()),
              MPC_OK);
    for (float v : values)
      count += !std::isfinite(v);
  }
  return count;
}

TEST(NonfiniteUpdate, NaNInputStep) {
  mpc_session_options options;
  mpc_session_options_init(&options);
  options.seed = 3;
  mpc_session *session = nullptr;
  ASSERT_EQ(mpc_session_create(MPC_MODEL_DESC(), &options, &session), MPC_OK)
      << mpc_last_error();
  step(session, makeBatch(1));
  step(session, makeBatch(2));
  mpc_training_stats before;
  ASSERT_EQ(mpc_get_training_stats(session, &before), MPC_OK);
  const std::string weights = weightsAndMoments(session);

  Batch poisoned = makeBatch(3);
  poisoned.x[5 * features + 17] = NAN;
  EXPECT_TRUE(std::isnan(step(session, poisoned)));
  mpc_training_stats after;
  ASSERT_EQ(mpc_get_training_stats(session, &after), MPC_OK);

#ifdef MPC_EXPECT_APPLIED
  // torch.optim's behaviour, asked for: the NaN update is applied.
  EXPECT_EQ(after.skipped_steps, before.skipped_steps);
  EXPECT_EQ(after.last_skipped, 0);
  EXPECT_GT(nonfiniteParameterValues(session), 0);
#else
  EXPECT_EQ(after.skipped_steps, before.skipped_steps + 1);
  EXPECT_EQ(after.optimizer_steps, before.optimizer_steps);
  EXPECT_EQ(after.last_skipped, 1);
  EXPECT_TRUE(weightsAndMoments(session) == weights)
      << "a skipped step changed a weight, half copy or moment";
  EXPECT_EQ(nonfiniteParameterValues(session), 0);
  // Training goes on: the next clean batch is applied, and finite.
  EXPECT_TRUE(std::isfinite(step(session, makeBatch(4))));
  mpc_training_stats next;
  ASSERT_EQ(mpc_get_training_stats(session, &next), MPC_OK);
  EXPECT_EQ(next.last_skipped, 0);
  EXPECT_EQ(next.optimizer_steps, before.optimizer_steps + 1);
  EXPECT_FALSE(weightsAndMoments(session) == weights);
  EXPECT_EQ(nonfiniteParameterValues(session), 0);
#endif
  mpc_session_destroy(session);
}

} // namespace
