//===- test_model.h - hand-written models for runtime tests -----*- C++ -*-===//
//
// Stand-ins for what `mpc compile` generates: a constant mpc_model_desc plus
// step functions that work on the arenas at baked-in offsets.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_TESTS_UNIT_TEST_MODEL_H
#define MPC_TESTS_UNIT_TEST_MODEL_H

#include "runtime/mpc_model.h"

#include <deque>
#include <string>
#include <vector>

namespace mpc_test {

// ----------------------------------------------------------------------------
// "linear": softmax regression with input dropout, trained by SGD with
// momentum and weight decay.
//
//   inputs   x [8, 6] f32, y [8] i32 (classes [0, 4), ignore_index -100)
//   params   w [4, 6] f32 kaiming_uniform(sqrt(5)), b [4] f32 uniform(-0.1,
//   0.1) state    seen [1] f32 zeros: examples trained on (not changed by eval)
//   outputs  loss [] f32, logits [8, 4] f32, probs [8, 4] f16
//
// Dropout (p = 0.25, training only) draws its mask from (seed, step), so a
// resumed run matches an uninterrupted one only if both are restored.

constexpr int LINEAR_BATCH = 8;
constexpr int LINEAR_FEATURES = 6;
constexpr int LINEAR_CLASSES = 4;

const mpc_model_desc *linear_model();

/// The context the last step function of linear_model() saw.
struct seen_context {
  float learning_rate, momentum, weight_decay;
  int32_t training;
  int64_t step;
  uint64_t seed;
  int calls;
};
seen_context last_linear_context();

/// linear_model() with a train_step that reports an out-of-range index
/// through context->index_error (as a gather kernel would).
const mpc_model_desc *index_error_model();

/// A deterministic batch for step `step`: features in [-1, 1), labels in
/// [0, LINEAR_CLASSES) with one ignored (-100) label every third batch.
void linear_batch(int step, float *x, int32_t *y);

// ----------------------------------------------------------------------------
// A builder for descriptors whose step functions do nothing: for tests of
// initialisation, parameter access and descriptor checks. Tensors are laid
// out one after another, 64-byte aligned.

class model_builder {
public:
  explicit model_builder(const char *name);
  model_builder(const model_builder &) = delete;
  model_builder &operator=(const model_builder &) = delete;

  int add_input(const char *name, mpc_dtype dtype, std::vector<int64_t> shape);
  int add_param(const char *name, mpc_dtype dtype, std::vector<int64_t> shape,
                mpc_init_kind kind, std::vector<double> args = {});
  int add_state(const char *name, mpc_dtype dtype, std::vector<int64_t> shape,
                mpc_init_kind kind, std::vector<double> args = {});
  int add_output(const char *name, mpc_dtype dtype, std::vector<int64_t> shape);

  /// Lays out the arenas and fills `desc`; tweak the vectors or `desc`
  /// afterwards for negative tests.
  const mpc_model_desc *finish();

  std::vector<mpc_tensor_desc> inputs, params, states, outputs;
  mpc_model_desc desc;

private:
  const char *keep(const char *text);
  std::deque<std::string> strings_;
};

mpc_tensor_desc make_tensor(const char *name, mpc_dtype dtype,
                            const std::vector<int64_t> &shape);

} // namespace mpc_test

#endif // MPC_TESTS_UNIT_TEST_MODEL_H
