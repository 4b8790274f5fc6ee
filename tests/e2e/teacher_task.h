//===- teacher_task.h - a learnable task for the MLP example ----*- C++ -*-===//
//
// Batches for a model with inputs x [B, F] (f32) and class labels y [B]
// (i32) and logits [B, C] as output 1: x ~ N(0, 1) and y = argmax(T x) for
// a fixed random linear teacher T [C, F]. Unlike random labels, the task
// can be learnt, so tests can ask the loss to fall.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_TESTS_E2E_TEACHER_TASK_H
#define MPC_TESTS_E2E_TEACHER_TASK_H

#include "runtime/mpc_runtime.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

class TeacherTask {
public:
  explicit TeacherTask(const mpc_model_desc *model, uint64_t seed = 11)
      : rng(seed) {
    mpc_tensor_info input, logits;
    mpc_model_input_info(model, 0, &input);
    mpc_model_output_info(model, 1, &logits);
    batch = input.shape[0];
    features = input.shape[1];
    classes = logits.shape[1];
    teacher.resize(static_cast<size_t>(classes * features));
    for (float &t : teacher)
      t = normal(rng);
    x.resize(static_cast<size_t>(batch * features));
    y.resize(static_cast<size_t>(batch));
  }

  /// Draws the next batch into x and y.
  void next() {
    for (float &value : x)
      value = normal(rng);
    for (int64_t b = 0; b < batch; ++b) {
      double best = -INFINITY;
      for (int64_t c = 0; c < classes; ++c) {
        double dot = 0;
        for (int64_t f = 0; f < features; ++f)
          dot += double(teacher[c * features + f]) * x[b * features + f];
        if (dot > best)
          best = dot, y[b] = static_cast<int32_t>(c);
      }
    }
  }

  /// The model's inputs, in order: {x, y}.
  const void *const *inputs() {
    pointers[0] = x.data();
    pointers[1] = y.data();
    return pointers;
  }

  std::vector<float> x;
  std::vector<int32_t> y;

private:
  std::mt19937_64 rng;
  std::normal_distribution<float> normal{0.0f, 1.0f};
  int64_t batch = 0, features = 0, classes = 0;
  std::vector<float> teacher;
  const void *pointers[2] = {nullptr, nullptr};
};

#endif // MPC_TESTS_E2E_TEACHER_TASK_H
