// Trains the outside project's model on four separable classes and exits 1
// unless the loss has fallen to under a third of where it started.
#include "outside.h"
#include "runtime/mpc_runtime.h"

#include <cstdio>
#include <random>

int main() {
  mpc_session_options options;
  mpc_session_options_init(&options);
  mpc_session *session = nullptr;
  if (mpc_session_create(mpc_model_outside(), &options, &session) != MPC_OK) {
    std::fprintf(stderr, "error: %s\n", mpc_last_error());
    return 1;
  }
  std::mt19937 random(1);
  std::normal_distribution<float> noise(0.0f, 0.3f);
  float x[32 * 8], first = 0, loss = 0;
  int y[32];
  for (int step = 0; step < 100; ++step) {
    for (int i = 0; i < 32; ++i) {
      y[i] = static_cast<int>(random() % 4);
      for (int j = 0; j < 8; ++j)
        x[i * 8 + j] = (j % 4 == y[i] ? 1.0f : 0.0f) + noise(random);
    }
    const void *inputs[] = {x, y};
    if (mpc_train_step(session, inputs, &loss) != MPC_OK) {
      std::fprintf(stderr, "error: %s\n", mpc_last_error());
      return 1;
    }
    if (step == 0)
      first = loss;
    if (step % 25 == 0 || step == 99)
      std::printf("step %d loss %.4f\n", step, loss);
  }
  mpc_session_destroy(session);
  if (!(loss < first / 3)) {
    std::fprintf(stderr,
                 "error: loss %.4f did not fall below a third of %.4f\n", loss,
                 first);
    return 1;
  }
  return 0;
}
