//===- two_models.cpp - two compiled models in one program ----------------===//
//
// Generated kernels carry their model's name, so the libraries of several
// models link into one program and train side by side.
//
//===----------------------------------------------------------------------===//

#include "dropout_mlp.h"
#include "mlp.h"

#include <cstdio>
#include <vector>

int main() {
  const mpc_model_desc *models[] = {mpc_model_mlp(), mpc_model_dropout_mlp()};
  for (const mpc_model_desc *model : models) {
    mpc_session_options options;
    mpc_session_options_init(&options);
    mpc_session *session = nullptr;
    if (mpc_session_create(model, &options, &session) != MPC_OK) {
      std::fprintf(stderr, "error: %s\n", mpc_last_error());
      return 1;
    }
    mpc_tensor_info x, y;
    mpc_model_input_info(model, 0, &x);
    mpc_model_input_info(model, 1, &y);
    std::vector<float> features(x.num_elements, 0.5f);
    std::vector<int> labels(y.num_elements, 1);
    const void *inputs[] = {features.data(), labels.data()};
    float loss = 0;
    if (mpc_train_step(session, inputs, &loss) != MPC_OK) {
      std::fprintf(stderr, "error: %s\n", mpc_last_error());
      return 1;
    }
    std::printf("%s: loss %.4f\n", mpc_model_name(model), loss);
    mpc_session_destroy(session);
  }
  return 0;
}
